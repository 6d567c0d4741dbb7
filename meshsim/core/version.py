"""meshsim's version, at the bottom so that any package can write it into its outputs
(run folders, sweeps, reports, verdicts) without importing the top of ``meshsim``.
It must equal ``[project] version`` in pyproject.toml (a static value there)."""

__version__ = "0.1.0"
