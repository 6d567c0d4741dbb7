"""Load and check: a scenario file becomes a validated model. ``model`` gathers the public names;
they live in ``sections`` and ``document`` (the pydantic model), ``loading`` (file -> model, static
checks), ``paths`` (dotted paths, ``--set``), ``checks`` (the checks that need a seed's graph),
``jsonschema``, with the field types (``fields``), the registry of checked events (``events``) and
the notes on runs that cannot show anything (``degenerate``)."""
