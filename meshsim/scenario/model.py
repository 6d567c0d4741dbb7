"""Scenario files: YAML -> validated pydantic models, overrides, semantic checks.

Unknown keys, wrong types and impossible values are errors that name the
file, the field path and the value (``InputError``), never a traceback.
Events and protocol parameters are validated against their registries, so a
protocol or event type added later gets the same checking for free.
"""
from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import networkx as nx
import yaml
from pydantic import (BaseModel, ConfigDict, Field, SerializeAsAny,
                      ValidationError, field_validator, model_validator)

from ..core.errors import InputError, ScenarioError, TopologyError
from .events import EVENT_TYPES, EventCheck
from .fields import (DURATION_SCHEMA, MAX_SEED, AgentPair, Duration, EventSpec, Latency, Probability, Role,
                     Seed, Seeds, Strict)
from ..core.files import YAML_VALUES, check_numbers, parse_yaml, read_text

__all__ = ["Scenario", "load_scenario", "parse_scenario", "apply_overrides", "set_path", "get_path",
           "read_scenario_data", "scenario_data", "build_graph",
           "check_semantics", "Duration", "scenario_schema"]


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


def _fmt(x: Any) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        x = int(x)
    return str(x) if isinstance(x, int) else f"{x:g}"


def _over(what: str, value: Any, key: str, limit: Any) -> str:
    unit = "s" if key == "duration" else ""
    return (f"{_fmt(value)}{unit} {what} is above limits.{key} ({_fmt(limit)}{unit}); raise it (limits: {{{key}: N}} "
            f"in the scenario, or --set limits.{key}=N) if you mean it")


class Scenario(Strict):
    name: str
    description: str = ""
    seed: Seed = 0
    #: a count N (seeds seed .. seed+N-1), a list of seeds, or a range text "9301-9320"
    seeds: Seeds = 1
    duration: Optional[Annotated[Duration, Field(gt=0)]] = None
    network: NetworkSpec
    agents: AgentsSpec = AgentsSpec()
    protocol: ProtocolSpec = ProtocolSpec()
    tasks: Optional[TasksSpec] = None
    backend: Optional[BackendSpec] = None
    phases: list[Phase] = []
    events: list[SerializeAsAny[EventSpec]] = []
    output: OutputSpec = OutputSpec()
    #: Overrides (``path: value``) that shrink the scenario for a quick run:
    #: ``meshsim run --smoke`` and the test suite apply them.
    smoke: dict[str, Any] = {}
    limits: Limits = Limits()
    #: A parameter sweep over this scenario (``meshsim sweep``, docs/sweeps.md);
    #: ignored by ``meshsim run`` and not part of the resolved scenario.
    sweep: Optional[dict[str, Any]] = Field(default=None, exclude=True)

    # Where the scenario came from (not part of the file).
    _source: str = "<scenario>"
    _base_dir: Optional[Path] = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        if len(v) > MAX_NAME:
            raise ValueError(f"at most {MAX_NAME} characters (it names the run folder runs/<name>; got {len(v)})")
        if not any(c.isalnum() for c in v):
            raise ValueError("must contain a letter or digit (it names the run folder runs/<name>)")
        return v

    @model_validator(mode="after")
    def _ends(self) -> "Scenario":
        if self.duration is None and self.tasks is None:
            raise ValueError("give 'duration' (simulated seconds) or a 'tasks' stream, so the run can end")
        return self

    def folder_name(self) -> str:
        """The default run folder's name (``runs/<folder_name>``): the name with
        every character but letters, digits, ``-``, ``_`` and ``.`` replaced, and
        no leading dot, so it is one path component that stays inside ``runs/``."""
        safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "-" for c in self.name)
        return safe.lstrip(".") or "run"

    @property
    def source(self) -> str:
        return self._source

    @property
    def base_dir(self) -> Optional[Path]:
        return self._base_dir

    def resolved(self) -> dict[str, Any]:
        """Every field with defaults filled in, as plain data (for the run folder)."""
        return self.model_dump(mode="json")

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: Any) -> Any:
        if isinstance(v, int) and v < 1:
            raise ValueError("a seed count must be >= 1 (or give a list / range of seeds)")
        return v

    def seed_list(self) -> list[int]:
        """The seeds to run: ``seed .. seed+N-1`` for a count N, else the list."""
        if isinstance(self.seeds, list):
            return list(self.seeds)
        return [self.seed + k for k in range(self.seeds)]


# --------------------------------------------------------------------------
# loading


def _fmt_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _from_validation(exc: ValidationError, source: str, prefix: tuple = (), model: Any = None) -> ScenarioError:
    from ..core.types import closest_key

    errs = exc.errors(include_url=False)
    # an unknown key first: a misspelt key also makes its field "missing", and the typo is the cause
    first = next((e for e in errs if e["type"] == "extra_forbidden"), errs[0])
    loc = tuple(p for p in prefix + tuple(first["loc"])
                if not (isinstance(p, str) and ("function-" in p or p in ("list[str]",))))
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        own = tuple(p for p in first["loc"] if not (isinstance(p, str) and "function-" in p))
        msg = "unknown key" + closest_key(model or Scenario, own)
    elif first["type"] == "missing":
        msg = "missing required field"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if msg.startswith("Assertion failed, "):
        msg = msg[len("Assertion failed, "):]
    more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
    value = first.get("input", InputError._MISSING) if first["type"] != "missing" else InputError._MISSING
    if first["type"] == "extra_forbidden":
        value = InputError._MISSING
    if isinstance(value, dict) and len(repr(value)) > 80:
        value = InputError._MISSING
    return ScenarioError(msg + more, file=source, field=_fmt_loc(loc) or None, value=value)


def _parse_value(text: str, field: str) -> Any:
    """An override's value, parsed as YAML with the file's checks (an alias
    bomb on the command line is refused too); text that is not YAML stays text."""
    if not text.strip():
        # `--set protocol.params=` would silently reset every parameter to its default
        raise ScenarioError("empty value (write PATH='' for an empty string, PATH={} for an empty mapping)",
                            file="--set", field=field)
    return parse_yaml(text, "--set", field, syntax_error_as_text=True)


def _split_path(path: str, item: Any, source: str) -> list[str]:
    parts = [p for p in str(path).strip().split(".") if p]
    if not parts:
        raise ScenarioError("empty path", file=source, value=item)
    # backend.overrides holds dotted profile paths as keys: the rest of the path is one key
    if len(parts) > 2 and parts[0] == "backend" and parts[1] == "overrides":
        parts = parts[:2] + [".".join(parts[2:])]
    return parts


def set_path(data: dict, path: str, value: Any, source: str = "--set", item: Any = None) -> None:
    """Set ``path`` (``a.b.0.c``; ``backend.overrides.<dotted profile path>``) in
    raw scenario ``data`` to ``value``, in place: missing mappings are created,
    list items are addressed by index."""
    item = f"{path}=..." if item is None else item
    parts = _split_path(path, item, source)
    cur: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(cur, list):
            if not part.isdigit() or int(part) >= len(cur):
                raise ScenarioError("list index out of range", file=source,
                                    field=".".join(parts[: i + 1]), value=part)
            if last:
                cur[int(part)] = value
            else:
                cur = cur[int(part)]
        elif isinstance(cur, dict):
            if last:
                cur[part] = value
            else:
                nxt = cur.get(part)
                if nxt is None:
                    nxt = cur[part] = {}
                elif not isinstance(nxt, (dict, list)):
                    raise ScenarioError("cannot set a field inside a scalar", file=source,
                                        field=".".join(parts[: i + 1]), value=nxt)
                cur = nxt
        else:
            raise ScenarioError("cannot set a field inside a scalar", file=source,
                                field=".".join(parts[:i]), value=cur)


_NOT_FOUND = object()


def get_path(data: Any, path: str, default: Any = _NOT_FOUND) -> Any:
    """The value at ``path`` in (raw or resolved) scenario data; ``default`` (or
    KeyError) when there is none. Same path syntax as :func:`set_path`."""
    cur = data
    for part in _split_path(path, path, "<path>"):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            if default is _NOT_FOUND:
                raise KeyError(path)
            return default
    return cur


def apply_overrides(data: dict, overrides: list[str], source: str = "--set") -> dict:
    """Apply ``path=value`` overrides (``a.b.0.c=1``) to raw scenario data."""
    data = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise ScenarioError("expected PATH=VALUE", file="--set", value=item)
        path, raw = item.split("=", 1)
        set_path(data, path, _parse_value(raw, path.strip()), source, item)
    return data


def _resolve_events(raw_events: Any, source: str) -> Any:
    if not isinstance(raw_events, list):
        return raw_events  # let pydantic report the type error
    out = []
    for i, ev in enumerate(raw_events):
        if not isinstance(ev, dict):
            raise ScenarioError("each event must be a mapping", file=source, field=f"events[{i}]", value=ev)
        kind = ev.get("type")
        cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise ScenarioError(f"unknown event type; choose one of {sorted(EVENT_TYPES)}", file=source,
                                field=f"events[{i}].type", value=kind)
        try:
            out.append(cls.model_validate(ev))
        except ValidationError as exc:
            raise _from_validation(exc, source, ("events", i), cls) from None
    return out


def _resolve_protocol(raw: Any, source: str) -> Any:
    from ..protocols import PROTOCOLS

    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return raw
    raw = dict(raw)
    name = raw.get("name", "routing")
    cls = PROTOCOLS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ScenarioError(f"unknown protocol; choose one of {sorted(PROTOCOLS)}", file=source,
                            field="protocol.name", value=name)
    params = raw.get("params") or {}
    if isinstance(params, BaseModel):
        return raw
    if not isinstance(params, dict):
        raise ScenarioError("must be a mapping", file=source, field="protocol.params", value=params)
    try:
        raw["params"] = cls.Params.model_validate(params)
    except ValidationError as exc:
        raise _from_validation(exc, source, ("protocol", "params"), cls.Params) from None
    return raw


def parse_scenario(data: Any, source: str = "<scenario>", base_dir: Path | None = None) -> Scenario:
    """Validate raw scenario data (already parsed from YAML)."""
    if not isinstance(data, dict):
        raise ScenarioError("a scenario must be a YAML mapping", file=source, value=type(data).__name__)
    try:
        check_numbers(data, source)  # finite, 64-bit: before any model sees a number
    except InputError as exc:
        raise ScenarioError(exc.message, file=exc.file, field=exc.field, value=exc.value) from None
    data = dict(data)
    if "events" in data and data["events"] is not None:
        data["events"] = _resolve_events(data["events"], source)
    elif "events" in data:
        data["events"] = []
    if "protocol" in data or True:
        data["protocol"] = _resolve_protocol(data.get("protocol"), source)
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as exc:
        raise _from_validation(exc, source) from None
    sc._source = source
    sc._base_dir = base_dir
    _check_static(sc)
    return sc


def read_scenario_data(path: str | Path) -> Any:
    """A scenario file's raw data (YAML parsed, nothing validated yet)."""
    path = Path(path)
    source = str(path)
    try:
        data = parse_yaml(read_text(path, "scenario"), source, max_values=YAML_VALUES["scenario"])
    except InputError as exc:
        raise ScenarioError(exc.message, file=exc.file, field=exc.field, value=exc.value) from None
    if data is None:
        raise ScenarioError("scenario file is empty", file=source)
    return data


def scenario_data(data: Any, source: str, overrides: list[str] | None = None, smoke: bool = False) -> Any:
    """Raw scenario data with the file's ``smoke`` overrides (``smoke``) and then
    ``overrides`` applied, as :func:`load_scenario` validates it."""
    if (overrides or smoke) and not isinstance(data, dict):
        raise ScenarioError("a scenario must be a YAML mapping", file=source)
    if smoke:
        small = data.get("smoke") or {}
        if not isinstance(small, dict):
            raise ScenarioError("must be a mapping of PATH: VALUE", file=source, field="smoke", value=small)
        data = apply_overrides(data, [f"{k}={yaml.safe_dump(v, default_flow_style=True).strip()}"
                                      for k, v in small.items()])
        if isinstance(data.get("smoke"), dict):
            data["smoke"] = {}
    if overrides:
        data = apply_overrides(data, overrides)
    return data


def load_scenario(path: str | Path, overrides: list[str] | None = None, smoke: bool = False) -> Scenario:
    """Load, override and validate a scenario file (static checks only).

    Checks that need the graph (unknown agents, connectivity) run in
    :func:`check_semantics`, which ``meshsim validate`` and every run call.
    """
    path = Path(path)
    data = scenario_data(read_scenario_data(path), str(path), overrides, smoke)
    return parse_scenario(data, str(path), path.parent)


def smoke_overrides(path: str | Path) -> list[str]:
    """A scenario's ``smoke`` block as ``--set`` overrides (``meshsim compare --smoke``)."""
    data = yaml.safe_load(Path(path).read_text()) or {}
    small = data.get("smoke") or {} if isinstance(data, dict) else {}
    if not isinstance(small, dict):
        raise ScenarioError("must be a mapping of PATH: VALUE", file=str(path), field="smoke", value=small)
    return [f"{k}={yaml.safe_dump(v, default_flow_style=True).strip()}" for k, v in small.items()] + ["smoke={}"]


def _check_static(sc: Scenario) -> None:
    src = sc.source
    lim = sc.limits
    n_seeds = len(sc.seeds) if isinstance(sc.seeds, list) else sc.seeds
    if n_seeds > lim.seeds:
        raise ScenarioError(_over("seeds", n_seeds, "seeds", lim.seeds), file=src, field="seeds", value=n_seeds)
    if not isinstance(sc.seeds, list) and sc.seed + sc.seeds - 1 > MAX_SEED:
        raise ScenarioError(f"the last seed, seed + seeds - 1, must be <= 2**63-1 ({MAX_SEED})", file=src,
                            field="seeds", value=sc.seeds)
    if sc.duration is not None and sc.duration > lim.duration:
        raise ScenarioError(_over("of simulated time", sc.duration, "duration", lim.duration), file=src,
                            field="duration", value=sc.duration)
    if sc.tasks is not None:
        for key in ("count", "block"):
            n = getattr(sc.tasks, key)
            if n is not None and n > lim.tasks:
                raise ScenarioError(_over("tasks", n, "tasks", lim.tasks), file=src, field=f"tasks.{key}", value=n)
    if sc.agents.replicas > lim.agents:
        raise ScenarioError(_over("replicas", sc.agents.replicas, "agents", lim.agents), file=src,
                            field="agents.replicas", value=sc.agents.replicas)
    for i, ev in enumerate(sc.events):
        if ev.at is not None and ev.at > lim.duration:  # a run without duration would never reach it
            raise ScenarioError(_over("event time", ev.at, "duration", lim.duration), file=src,
                                field=f"events[{i}].at", value=ev.at)
        if ev.at is not None and sc.duration is not None and ev.at > sc.duration:
            raise ScenarioError(f"event is after the end of the run (duration {sc.duration:g}s)", file=src,
                                field=f"events[{i}].at", value=ev.at)
        if ev.at_task is not None:
            if sc.tasks is None:
                raise ScenarioError("'at_task' needs a 'tasks' stream", file=src, field=f"events[{i}].at_task",
                                    value=ev.at_task)
            if ev.at_task > sc.tasks.count:
                raise ScenarioError(f"event is after the end of the task stream ({sc.tasks.count} tasks)",
                                    file=src, field=f"events[{i}].at_task", value=ev.at_task)
    if sc.phases:
        if sc.tasks is None:
            raise ScenarioError("'phases' need a 'tasks' stream", file=src, field="phases")
        total = sum(p.tasks for p in sc.phases)
        if total != sc.tasks.count:
            raise ScenarioError(f"phase lengths must add up to tasks.count ({sc.tasks.count})", file=src,
                                field="phases", value=total)
        names = [p.name for p in sc.phases]
        if len(set(names)) != len(names):
            raise ScenarioError("phase names must be unique", file=src, field="phases", value=names)


# --------------------------------------------------------------------------
# graph-dependent checks


def topology_seed(sc: Scenario, seed: int) -> int:
    """The topology's own seed: fixed by the file, else derived from the run seed."""
    if sc.network.topology.seed is not None:
        return sc.network.topology.seed
    from ..core.sim import stream_key
    import numpy as np

    return int(np.random.SeedSequence(seed, spawn_key=stream_key("topology")).generate_state(1)[0])


def build_graph(sc: Scenario, seed: int | None = None) -> nx.Graph:
    """The scenario's initial graph for ``seed`` (default: the scenario seed)."""
    from .. import graphs

    seed = sc.seed if seed is None else seed
    spec = sc.network.topology
    params = {k: v for k, v in (spec.model_extra or {}).items()}
    if spec.kind == "ability_sparse" and "abilities" not in params:
        prof = profile_of(sc)
        if prof is not None:
            params["abilities"] = {a: list(k) for a, k in prof.agents.items()}
            params["targets"] = list(prof.targets)
    _check_size(sc, spec.kind, params)
    try:
        G = graphs.build(spec.kind, params, topology_seed(sc, seed), sc.base_dir,
                         limits=(sc.limits.agents, sc.limits.links))
    except InputError as exc:
        if exc.file and exc.file != sc.source:
            # a referenced topology file is bad: name the scenario and its field too
            raise type(exc)(f"{exc.file}: {exc.message}", file=sc.source,
                            field=exc.field or "network.topology.path", value=exc.value) from None
        raise exc.with_file(sc.source) from None
    if G.number_of_nodes() == 0:
        raise TopologyError("the graph has no agents", file=sc.source, field="network.topology")
    lim = sc.limits
    if G.number_of_nodes() > lim.agents:
        raise TopologyError(_over("agents", G.number_of_nodes(), "agents", lim.agents), file=sc.source,
                            field="network.topology")
    if G.number_of_edges() > lim.links:
        raise TopologyError(_over("links", G.number_of_edges(), "links", lim.links), file=sc.source,
                            field="network.topology")
    if sc.network.require_connected and not nx.is_connected(G):
        raise TopologyError(f"graph is disconnected ({nx.number_connected_components(G)} components) "
                            "but network.require_connected is true", file=sc.source,
                            field="network.topology")
    return G


def _num(params: dict, key: str) -> Optional[float]:
    v = params.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _check_size(sc: Scenario, kind: str, params: dict) -> None:
    """Agents and links a generator would make, against ``limits``, before it
    runs: ``complete`` with n = 10**6 must not start building 5 * 10**11 links."""
    lim = sc.limits
    n = _num(params, "n")
    if n is None:
        return  # the generator names what is missing or wrong
    if n > lim.agents:
        raise TopologyError(_over("agents", params["n"], "agents", lim.agents), field="network.topology.n",
                            file=sc.source, value=params["n"])
    pairs = n * (n - 1) / 2
    p, m, d, k, r = (_num(params, key) for key in ("p", "m", "d", "k", "r"))
    links = {"complete": pairs, "merg": pairs, "gnm": m, "regular": None if d is None else n * d / 2,
             "k_circulant": None if k is None else n * k, "pa_robust": None if r is None else n * r,
             "gnp": None if p is None else p * pairs, "erdos_renyi": None if p is None else p * pairs,
             "er_robust": None if p is None else p * pairs, "ability_sparse": m}.get(kind)
    if links is not None and links > lim.links:
        key = {"gnm": "m", "ability_sparse": "m", "regular": "d", "k_circulant": "k", "pa_robust": "r",
               "gnp": "p", "erdos_renyi": "p", "er_robust": "p"}.get(kind, "n")
        raise TopologyError(_over(f"links ({kind} topology)", links, "links", lim.links), file=sc.source,
                            field=f"network.topology.{key}", value=params.get(key))


def profile_of(sc: Scenario):
    """The dataset profile the agents replicate (None when abilities are explicit)."""
    name = sc.agents.profile or (sc.tasks.dataset if sc.tasks is not None and not sc.agents.abilities else None)
    if name is None:
        return None
    from ..workload.tasks import load_profile

    try:
        return load_profile(name)
    except InputError as exc:
        if exc.file and exc.field:  # a field of the profile file: name it
            raise
        raise ScenarioError(exc.message, file=exc.file or sc.source,
                            field="agents.profile" if sc.agents.profile else "tasks.dataset", value=name) from None


def _dataset_profile(sc: Scenario):
    """``tasks.dataset``'s profile (None without one)."""
    if sc.tasks is None or not sc.tasks.dataset:
        return None
    from ..workload.tasks import load_profile

    try:
        return load_profile(sc.tasks.dataset)
    except InputError as exc:
        if exc.file and exc.field:
            raise
        raise ScenarioError(exc.message, file=exc.file or sc.source, field="tasks.dataset",
                            value=sc.tasks.dataset) from None


def agent_abilities(sc: Scenario, G: nx.Graph) -> tuple[dict[str, list[str]], list[str]]:
    """Every agent's abilities and the profile's degradation targets.

    ``agents.abilities`` overrides the profile for the agents it names; the
    others take the profile's (``agents.profile``, else ``tasks.dataset``: a
    partial map is filled, issue 30). Without either (routing studies) the
    agents it does not name hold nothing. With a dataset, every ability named
    must be one of its abilities."""
    from ..workload.tasks import replicate

    prof = profile_of(sc)
    named = sc.agents.abilities
    filled = False
    if prof is None and named and any(str(v) not in named for v in G.nodes):
        prof = _dataset_profile(sc)  # a partial map: the agents it does not name take the dataset's abilities
        filled = prof is not None
    vocab: dict[str, str] = {}
    for p in (prof, _dataset_profile(sc) if named and prof is None else None):
        if p is not None:
            vocab.update(p.abilities)
    if vocab:
        for a, ks in named.items():
            for i, k in enumerate(ks):
                if k not in vocab:
                    names = prof.name if prof is not None else sc.tasks.dataset  # type: ignore[union-attr]
                    raise ScenarioError(f"unknown ability; dataset '{names}' has: {', '.join(sorted(vocab))}",
                                        file=sc.source, field=f"agents.abilities.{a}[{i}]", value=k)
        for j, ev in enumerate(sc.events):
            for i, k in enumerate(getattr(ev, "abilities", None) or []) if ev.type == "add_agent" else ():
                if k not in vocab:
                    names = prof.name if prof is not None else sc.tasks.dataset  # type: ignore[union-attr]
                    raise ScenarioError(f"unknown ability; dataset '{names}' has: {', '.join(sorted(vocab))}",
                                        file=sc.source, field=f"events[{j}].abilities[{i}]", value=k)
    abilities: dict[str, list[str]] = {v: [] for v in G.nodes}
    targets: list[str] = []
    if prof is not None:
        rep, targets = replicate(prof, sc.agents.replicas)
        if set(rep) != set(G.nodes):
            if filled:
                raise ScenarioError(f"names {len(named)} of the {G.number_of_nodes()} agents; the others would take "
                                    f"dataset '{prof.name}''s abilities, but its profile x {sc.agents.replicas} "
                                    f"replicas names {len(rep)} agents: name every agent, or set agents.profile "
                                    "and agents.replicas to match the topology", file=sc.source,
                                    field="agents.abilities", value=len(named))
            raise ScenarioError(f"profile '{prof.name}' x {sc.agents.replicas} replicas names {len(rep)} agents "
                                f"but the topology has {G.number_of_nodes()}", file=sc.source,
                                field="agents.replicas", value=sc.agents.replicas)
        abilities.update(rep)
    for a, ks in named.items():
        abilities[a] = list(ks)
    return abilities, targets


def event_check(sc: Scenario, targets: list[str]) -> EventCheck:
    """What event checks need of ``sc``: its protocol's capabilities and the profile's targets."""
    from ..protocols import PROTOCOLS

    proto = PROTOCOLS[sc.protocol.name]
    roles = getattr(proto, "supports_roles", False)
    return EventCheck(protocol=sc.protocol.name,
                      supports_degradation=bool(getattr(proto, "supports_degradation", False)),
                      supports_roles=bool(roles),
                      # a partial agents.abilities filled from tasks.dataset has that profile's targets
                      targets=list(targets) if profile_of(sc) is not None or targets else None,
                      roles=dict(sc.agents.roles) if roles else None,
                      rounds=getattr(sc.protocol.params, "rounds", None) if roles else None,
                      degrade_modes=getattr(proto, "degrade_modes", None))


class _Tracked(set):
    """A set of agents or links that notes what an event's ``check`` looked up
    (``in``) and changed (``add``, ``discard``): an event's footprint, found
    without asking each event type to declare it."""

    def __init__(self, items: Any, tag: str):
        super().__init__(items)
        self.tag = tag
        self.reads: set = set()
        self.writes: set = set()

    def __contains__(self, x: Any) -> bool:
        self.reads.add((self.tag, x))
        return super().__contains__(x)

    def add(self, x: Any) -> None:
        self.writes.add((self.tag, x))
        super().add(x)

    def discard(self, x: Any) -> None:
        self.writes.add((self.tag, x))
        super().discard(x)

    def remove(self, x: Any) -> None:
        self.writes.add((self.tag, x))
        super().remove(x)


def _when(ev: Any) -> str:
    return f"at {ev.at:g}s" if ev.at is not None else f"at_task {ev.at_task}"


def _elem_key(elem: tuple) -> tuple:
    tag, x = elem
    return (tag != "agent", str(x) if tag == "agent" else "-".join(sorted(map(str, x))))


def _what(elem: tuple) -> str:
    tag, x = elem
    return f"agent {x}" if tag == "agent" else "link " + "-".join(sorted(x))


def _replay_events(sc: Scenario, nodes: set, edges: set, ctx: EventCheck) -> None:
    """A dry run of the event schedule against the graph: every event's agents
    and links must exist (or, for ``add_*``, must not) when it fires.

    Time events (``at``) fire in time order, task events (``at_task``) in task
    order, and the runner fires them in exactly these orders (ties: list
    order). How the two chains interleave is only known once the run goes (task
    5 may start before or after t = 100 s), so an agent or link that one chain
    adds or removes must not be used by the other: then every interleaving
    gives every event the same graph, and this replay is exact.
    """
    src = sc.source
    lim = sc.limits
    evs = sc.events
    chains = {
        "time": sorted((i for i, e in enumerate(evs) if e.at is not None), key=lambda i: (evs[i].at, i)),
        "task": sorted((i for i, e in enumerate(evs) if e.at is None), key=lambda i: (evs[i].at_task, i)),
    }
    tn, te = _Tracked(nodes, "agent"), _Tracked(edges, "link")
    n_agents, n_links = len(nodes), len(edges)
    touched: dict[str, dict[tuple, int]] = {"time": {}, "task": {}}
    changed: dict[str, dict[tuple, int]] = {"time": {}, "task": {}}
    base = ctx
    for chain, order in chains.items():
        if base.roles is not None:  # set_role events update the roles the chain's later events see
            ctx = dataclasses.replace(base, roles=dict(base.roles))
        for i in order:
            ev = evs[i]
            for t in (tn, te):
                t.reads, t.writes = set(), set()
            before = (len(tn), len(te))
            try:
                ev.check(tn, te, ctx)  # type: ignore[attr-defined]
            except InputError as exc:
                field = f"events[{i}]" + (f".{exc.field}" if exc.field else "")
                raise ScenarioError(exc.message, file=src, field=field, value=exc.value) from None
            # an upper bound on the graph's size at any time, whatever the interleaving
            n_agents += max(0, len(tn) - before[0])
            n_links += max(0, len(te) - before[1])
            if n_agents > lim.agents:
                raise ScenarioError(_over("agents", n_agents, "agents", lim.agents), file=src,
                                    field=f"events[{i}]", value=ev.type)
            if n_links > lim.links:
                raise ScenarioError(_over("links", n_links, "links", lim.links), file=src,
                                    field=f"events[{i}]", value=ev.type)
            # sorted (agents first): the error names the same element in every process
            for elem in sorted(tn.reads | te.reads | tn.writes | te.writes, key=_elem_key):
                touched[chain].setdefault(elem, i)
            for elem in sorted(tn.writes | te.writes, key=_elem_key):
                changed[chain].setdefault(elem, i)
    for a, b in (("time", "task"), ("task", "time")):
        for elem, i in changed[a].items():
            j = touched[b].get(elem)
            if j is not None:
                first, second = sorted((i, j))
                raise ScenarioError(
                    f"{_what(elem)} is changed by events[{i}] ({_when(evs[i])}) and used by events[{j}] "
                    f"({_when(evs[j])}), and whether a task starts before or after a simulated time is only known "
                    "during the run; time both events with 'at' or both with 'at_task'",
                    file=src, field=f"events[{second}]", value=evs[second].type)


def check_semantics(sc: Scenario, G: nx.Graph, memo: Optional[dict] = None) -> None:
    """Checks that need the graph: every named agent and link must exist.

    Events are checked in time order against the graph as earlier events
    change it (an ``add_agent`` makes the agent known to later events).
    ``memo`` (a dict kept by the caller) remembers the abilities and the
    backend checks of scenarios that share them: a sweep checks many points
    that differ in a parameter only, and reading profiles is the slow part.
    """
    import json

    src = sc.source
    nodes = set(G.nodes)
    edges = {frozenset(e) for e in G.edges}
    if memo is None:
        memo = {}
    akey = json.dumps(["abilities", sc.agents.model_dump(mode="json"),
                       sc.tasks.model_dump(mode="json") if sc.tasks else None, sorted(map(str, G.nodes)),
                       str(sc.base_dir)], sort_keys=True, default=str)
    if akey not in memo:
        memo[akey] = agent_abilities(sc, G)
    _abilities, targets = memo[akey]
    bkey = json.dumps(["backend", sc.backend.model_dump(mode="json") if sc.backend else None, str(sc.base_dir)],
                      sort_keys=True, default=str)
    if sc.backend is not None and bkey not in memo:
        from ..backends import check_backend

        try:
            check_backend(sc.backend.model_dump(), sc.base_dir)
            memo[bkey] = True
        except InputError as exc:
            if exc.file:
                raise  # it names the profile file and its field
            raise ScenarioError(exc.message, file=src, field="backend" + (f".{exc.field}" if exc.field else ""),
                                value=exc.value) from None
    for name in sc.agents.abilities:
        if name not in nodes:
            raise ScenarioError("unknown agent", file=src, field=f"agents.abilities.{name}", value=name)
    for i, ov in enumerate(sc.network.overrides):
        for a in ov.link:
            if a not in nodes:
                raise ScenarioError("unknown agent", file=src, field=f"network.overrides[{i}].link", value=a)
        if frozenset(ov.link) not in edges:
            raise ScenarioError("no such link in the topology", file=src, field=f"network.overrides[{i}].link",
                                value=ov.link)
    ekey = akey + sc.protocol.name + repr(getattr(sc.protocol.params, "rounds", None))  # rounds: degrade's 'round'
    if ekey not in memo:
        memo[ekey] = event_check(sc, targets)
    _replay_events(sc, nodes, edges, memo[ekey])
    proto_check = getattr(sc.protocol.params, "check", None)
    if proto_check is not None:
        try:
            proto_check(sc, G)
        except InputError as exc:
            raise exc.with_file(src) from None


# --------------------------------------------------------------------------
# JSON Schema (``meshsim schema``)


def scenario_schema() -> dict[str, Any]:
    """The scenario file's JSON Schema (draft 2020-12), for editors and other tools.

    Built from the same models that validate a file, with the registries
    filled in: one schema per event type (by ``type``) and per protocol (its
    ``params``), the topology kinds, and durations and latencies that may be
    written as numbers or strings. Checks that need the graph (unknown
    agents, connectivity) are beyond a schema: ``meshsim validate`` runs them.
    """
    from .. import graphs
    from ..protocols import PROTOCOLS

    ref = "#/$defs/{model}"
    schema = Scenario.model_json_schema(ref_template=ref)
    defs = schema.setdefault("$defs", {})

    def add(name: str, model: type[BaseModel]) -> dict[str, Any]:
        sub = model.model_json_schema(ref_template=ref)
        defs.update(sub.pop("$defs", {}))
        defs[name] = sub
        return {"$ref": ref.format(model=name)}

    events = []
    for kind, cls in sorted(EVENT_TYPES.items()):
        r = add(f"event_{kind}", cls)
        defs[f"event_{kind}"]["properties"]["type"] = {"const": kind}
        events.append(r)
    schema["properties"]["events"] = {"type": "array", "items": {"oneOf": events}, "default": []}
    protocols = []
    for name, cls in sorted(PROTOCOLS.items()):
        params = add(f"params_{name}", cls.Params)
        _widen_parsed(defs, f"params_{name}", cls.Params)
        protocols.append({"type": "object", "additionalProperties": False, "required": ["name"],
                          "properties": {"name": {"const": name}, "params": params}})
    schema["properties"]["protocol"] = {"oneOf": protocols, "default": {"name": "routing"}}
    kinds = sorted(set(graphs.GENERATORS) | {"file"})
    defs["Topology"]["properties"]["kind"] = {"enum": kinds, "description": "generator (its own keys beside "
                                              "kind are checked when the graph is built)"}
    lat = defs["Latency"]
    defs["Latency"] = {"anyOf": [DURATION_SCHEMA, lat], "description": lat.get("description", "")}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "meshsim scenario"
    return schema


def _widen_parsed(defs: dict[str, Any], name: str, model: type[BaseModel]) -> None:
    """A field with a before-validator parses its input (a protocol's durations
    such as ``refresh: 5s``): its schema also accepts a string."""
    from pydantic.functional_validators import BeforeValidator

    props = defs[name].get("properties", {})
    for field, info in model.model_fields.items():
        key = info.alias or field
        if key in props and any(isinstance(m, BeforeValidator) for m in info.metadata):
            props[key] = {"anyOf": [props[key], {"type": "string"}], "description": "also a string the "
                          "protocol parses, e.g. a duration such as '5s'"}


# --------------------------------------------------------------------------
# the files a run reads (provenance.json hashes them; resume compares them)


def input_files(sc: Scenario) -> dict[str, tuple[Path, bool]]:
    """``{role: (path, append_only)}`` of every file the scenario reads besides
    itself: ``topology``, ``tasks`` (the task file), ``dataset`` (the dataset
    profile), ``profile`` (the backend profile; ``inner`` is wrapped by a
    replay backend) and ``cassette`` (append-only: later recordings append).
    Only files that exist; call after the checks."""
    from ..backends import find_profile
    from ..workload.tasks import _profile_path

    base = sc.base_dir
    out: dict[str, tuple[Path, bool]] = {}

    def rel(p: str) -> Path:
        q = Path(p)
        return q if q.is_absolute() or base is None else base / q

    topo = sc.network.topology
    if topo.kind == "file" and isinstance((topo.model_extra or {}).get("path"), str):
        out["topology"] = (rel(topo.model_extra["path"]), False)
    if sc.tasks is not None and sc.tasks.file:
        out["tasks"] = (rel(sc.tasks.file), False)
    name = sc.agents.profile or (sc.tasks.dataset if sc.tasks is not None else None)
    if name:
        p = _profile_path(name)
        if p is not None:
            out["dataset"] = (p, False)

    def backend(spec: Any, role: str) -> None:
        if not isinstance(spec, dict):
            return
        if spec.get("kind") == "replay":
            if spec.get("mode", "record-missing") != "off" and isinstance(spec.get("cassette"), str):
                out["cassette"] = (rel(spec["cassette"]), True)
            backend(spec.get("backend"), "inner")
        elif isinstance(spec.get("profile"), str):
            try:
                out[role] = (find_profile(spec["profile"], base), False)
            except InputError:
                pass

    if sc.backend is not None:
        backend(sc.backend.model_dump(), "profile")
    return {k: (p, a) for k, (p, a) in out.items() if p.is_file() or a}
