"""``meshsim`` command line: a thin layer over the Python API.

``app`` holds the click group, its exit codes and one-line errors, and what the
commands share; each other module registers one family of commands on it:
``runs`` (run, validate, topology, schema, scenarios, explain), ``figures``
(plot, report), ``sweeps`` (sweep, --search), ``studies`` (uncertainty,
verdict), ``profiles`` (backends), ``paper`` (reproduce, compare) and
``detector``. Importing this package registers them all; ``main`` is the
console script.
"""
from __future__ import annotations

from . import detector, figures, paper, profiles, runs, studies, sweeps  # noqa: F401  (they register commands)
from .app import main
from .runs import _loud_failures
from .sweeps import _objectives

__all__ = ["main", "_loud_failures", "_objectives"]
