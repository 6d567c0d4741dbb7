"""Scenario files: YAML -> validated pydantic models, overrides, semantic checks.

The public names of the scenario package, gathered from where they live:
:mod:`~meshsim.scenario.sections` and :mod:`~meshsim.scenario.document` (the
pydantic model, section by section), :mod:`~meshsim.scenario.loading` (file ->
model, the static checks, the files a run reads), :mod:`~meshsim.scenario.paths`
(dotted paths and ``--set`` overrides), :mod:`~meshsim.scenario.checks` (the
checks that need a seed's graph) and :mod:`~meshsim.scenario.jsonschema`.
"""
from __future__ import annotations

from .checks import CheckMemo, agent_abilities, build_graph, check_semantics, event_check, profile_of, topology_seed
from .document import Scenario
from .fields import Duration, Role
from .jsonschema import scenario_schema
from .loading import input_files, load_scenario, parse_scenario, read_scenario_data, scenario_data, smoke_overrides
from .paths import apply_overrides, get_path, set_path
from .sections import (AgentsSpec, BackendSpec, LinkDefaults, LinkOverride, Limits, NetworkSpec, OutputSpec, Phase,
                       ProtocolSpec, TasksSpec, Topology)

__all__ = ["Scenario", "load_scenario", "parse_scenario", "apply_overrides", "set_path", "get_path",
           "read_scenario_data", "scenario_data", "build_graph",
           "check_semantics", "CheckMemo", "Duration", "scenario_schema", "smoke_overrides", "input_files", "agent_abilities",
           "profile_of", "event_check", "topology_seed", "Role", "AgentsSpec", "BackendSpec", "LinkDefaults",
           "LinkOverride", "Limits", "NetworkSpec", "OutputSpec", "Phase", "ProtocolSpec", "TasksSpec", "Topology"]
