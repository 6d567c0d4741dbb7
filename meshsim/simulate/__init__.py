"""Build and simulate: the run pipeline (``runner``: prepare, build, simulate, write) and what
``meshsim run`` prints (``console``)."""
