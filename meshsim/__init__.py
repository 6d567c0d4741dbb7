"""meshsim: discrete-event simulation of decentralized LLM agent networks.

Notebook use::

    import meshsim
    sc = meshsim.load_scenario("scenarios/routing/sparse-failures.yaml")
    result = meshsim.run(sc, seed=3, out="runs/demo")
    result.summary["routing"]["tables_correct_at_end"]
    df = meshsim.load_results("runs/my-sweep")   # a sweep folder as a pandas DataFrame
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core.errors import InputError, MeshsimError, ScenarioError
from .core.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from .simulate.runner import MultiRunResult, RunResult, run
    from .scenario.model import Scenario, load_scenario, parse_scenario
    from .sweep import load_results

# The face is loaded on first use, so that importing one part (meshsim.graphs,
# meshsim.plots) does not load the simulator, its protocols and backends.
_LAZY = {"run": "simulate.runner", "RunResult": "simulate.runner", "MultiRunResult": "simulate.runner",
         "Scenario": "scenario.model", "load_scenario": "scenario.model", "parse_scenario": "scenario.model",
         "load_results": "sweep"}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'meshsim' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value

__all__ = ["load_scenario", "parse_scenario", "run", "load_results", "Scenario", "RunResult", "MultiRunResult",
           "MeshsimError", "InputError", "ScenarioError", "__version__"]
