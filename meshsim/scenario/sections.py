"""The sections of a scenario file, one pydantic model each (``network``, ``agents``,
``protocol``, ``phases``, ``tasks``, ``backend``, ``output``, ``limits``); the whole
file is :class:`meshsim.scenario.document.Scenario`."""
from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator

from .fields import AgentPair, Duration, Latency, Probability, Role, Seed, Strict

__all__ = ["LinkDefaults", "LinkOverride", "Topology", "NetworkSpec", "AgentsSpec", "ProtocolSpec", "Phase",
           "TasksSpec", "BackendSpec", "OutputSpec", "Limits", "MAX_NAME"]


class LinkDefaults(Strict):
    latency: Latency = Latency(dist="constant", value=0.01)
    loss: Probability = 0.0
    bandwidth: Optional[Annotated[float, Field(ge=1.0, le=1e15)]] = None  # bytes/s


class LinkOverride(Strict):
    link: AgentPair
    latency: Optional[Latency] = None
    loss: Optional[Probability] = None
    bandwidth: Optional[Annotated[float, Field(ge=1.0, le=1e15)]] = None  # bytes/s


class Topology(BaseModel):
    """``kind`` plus the generator's own parameters (checked by the generator)."""

    model_config = ConfigDict(extra="allow")
    kind: str
    seed: Optional[Seed] = None


class NetworkSpec(Strict):
    topology: Topology
    require_connected: bool = True
    links: LinkDefaults = LinkDefaults()
    overrides: list[LinkOverride] = []


class AgentsSpec(Strict):
    #: A dataset profile whose six-agent ability assignment is replicated
    #: ``replicas`` times (MeshHeal App. B.2, Sec. 6.3); defaults to tasks.dataset.
    profile: Optional[str] = None
    replicas: Annotated[int, Field(ge=1)] = 1
    #: Explicit abilities (override the profile's for the agents named).
    abilities: dict[str, list[str]] = {}
    #: Consensus protocols (SAC, CP-WBFT): each agent's role; unnamed agents are
    #: strong. See docs/sac.md.
    roles: dict[str, Role] = {}


class ProtocolSpec(Strict):
    name: str = "routing"
    params: SerializeAsAny[BaseModel] = Field(default_factory=dict)  # type: ignore[assignment]


class Phase(Strict):
    name: str
    tasks: Annotated[int, Field(ge=1)]


class TasksSpec(Strict):
    count: Annotated[int, Field(ge=1)]
    dataset: Optional[str] = None
    #: JSONL task file (or BIG-bench task.json) with questions and gold answers,
    #: relative to the scenario file; its types must be the profile's types.
    file: Optional[str] = None
    block: Optional[Annotated[int, Field(ge=1)]] = None
    #: ``sequential`` (next task when the previous one ends, as in the papers)
    #: or open-loop ``poisson(RATE)`` arrivals, RATE tasks per simulated second,
    #: so that many tasks overlap
    arrival: str = "sequential"

    @field_validator("arrival")
    @classmethod
    def _arrival(cls, v: str) -> str:
        if v == "sequential":
            return v
        import re

        import math

        m = re.fullmatch(r"poisson\(\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*\)", v.strip())
        if not m or not 0 < float(m.group(1)) < math.inf:
            raise ValueError("expected 'sequential' or 'poisson(RATE)' with RATE > 0 tasks per simulated second")
        if not 1e-9 <= float(m.group(1)) <= 1e6:  # beyond: arrivals overflow the clock or all coincide
            raise ValueError("poisson RATE must be within 1e-9 .. 1e6 tasks per simulated second")
        return v.strip()

    def poisson_rate(self) -> Optional[float]:
        return None if self.arrival == "sequential" else float(self.arrival[8:-1])


class BackendSpec(BaseModel):
    """``kind`` (fake, ...) plus the backend's own fields (checked when it is built)."""

    model_config = ConfigDict(extra="allow")
    kind: str


class OutputSpec(Strict):
    trace: Literal["none", "states", "messages"] = "states"
    #: per-record tables (tasks, reviews, states, rounds, queries, events):
    #: gzip-compressed JSONL (``NAME.jsonl.gz``, default) or plain ``NAME.jsonl``
    format: Literal["jsonl.gz", "jsonl"] = "jsonl.gz"


#: the longest scenario name: it names the run folder ``runs/<name>``
MAX_NAME = 128


class Limits(Strict):
    """Resource bounds a scenario must stay within (errors name the bound and
    how to raise it). They guard against a typo costing hours or all memory
    before anything is simulated; raise them in the file or with
    ``--set limits.agents=N``. Each has a hard ceiling that keeps every size in
    the range the graph and array code handles."""

    #: agents in the graph at any time (initial topology plus ``add_agent`` events)
    agents: Annotated[int, Field(ge=1, le=10 ** 8)] = 10_000
    #: links in the graph at any time (initial topology plus events)
    links: Annotated[int, Field(ge=1, le=10 ** 10)] = 2_000_000
    #: ``tasks.count`` (and ``tasks.block``)
    tasks: Annotated[int, Field(ge=1, le=10 ** 9)] = 1_000_000
    #: simulated seconds (``duration``)
    duration: Annotated[Duration, Field(gt=0, le=1e12)] = 1e7
    #: ``seeds`` (replications of one scenario)
    seeds: Annotated[int, Field(ge=1, le=10 ** 6)] = 1000
    #: messages a run is estimated to send before the clock starts (periodic
    #: refreshes); about a million a second are simulated
    events: Annotated[int, Field(ge=1, le=10 ** 12)] = 500_000_000
