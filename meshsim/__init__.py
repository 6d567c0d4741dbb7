"""meshsim: discrete-event simulation of decentralized LLM agent networks.

Notebook use::

    import meshsim
    sc = meshsim.load_scenario("scenarios/routing/sparse-failures.yaml")
    result = meshsim.run(sc, seed=3, out="runs/demo")
    result.summary["routing"]["tables_correct_at_end"]
"""
from __future__ import annotations

__version__ = "0.1.0"

from . import events as _events  # noqa: F401  (registers event types)
from .errors import InputError, MeshsimError, ScenarioError
from .runner import MultiRunResult, RunResult, run
from .scenario import Scenario, load_scenario, parse_scenario

__all__ = ["load_scenario", "parse_scenario", "run", "Scenario", "RunResult", "MultiRunResult",
           "MeshsimError", "InputError", "ScenarioError", "__version__"]
