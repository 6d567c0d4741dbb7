"""Build and simulate: the run pipeline (``runner``: prepare, build, simulate, write, the API),
one seed's world (``world``: build and simulate), the run folder's session (``session``: lock,
layout, resume, provenance) and what ``meshsim run`` prints (``console``)."""
