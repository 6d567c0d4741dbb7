"""Load and check: a scenario file becomes a validated model (``model``), with its field types
(``fields``), its registry of checked events (``events``) and the notes on runs that cannot show
anything (``degenerate``)."""
