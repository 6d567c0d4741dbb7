"""Run a scenario: check, build the world, fire events, write the run folder.

One pipeline, the scenario flowing down once: :func:`prepare` (every seed's
graph and the dry replay of its events) → :func:`build` (network, backend,
protocol, task stream: the first seed's world is built before the run folder
is touched) → the backend's preflight → :func:`simulate` → write.
:func:`validate` is the same minus simulate and write, so validate and run
agree on every input, and a run whose input is bad leaves nothing behind.

A run folder (as desmod's ``simulate()``) holds ``scenario.resolved.yaml``
(every default filled in; rerunning it reproduces the run), ``events.jsonl``
(the trace), ``summary.json``, ``provenance.json`` (versions, input hashes,
times: not compared) and, on failure, ``error.txt``. Every file is written
atomically (temp file + rename) and ``summary.json`` is written last, so its
presence means the run completed. The folder is locked while a run writes
it, and a completed seed is resumed only when scenario, inputs and meshsim
version match (:mod:`meshsim.io.runfolder`).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generator, Optional

import networkx as nx
import yaml

from ..core.errors import InputError, MeshsimError, RunFolderError, ScenarioError, SimulationError
from ..core.files import os_reason
from ..observe.aggregate import aggregate
from ..observe.routing import RoutingConvergence
from ..observe.summary import protocol_summary, protocol_tables
from ..net.network import Network
from ..protocols import PROTOCOLS, ProtocolContext
from ..protocols.base import TableRows
from ..core import redact
from ..io.records import TableWriter, json_default, read_records, write_atomic, write_records
from ..backends import make_backend
from ..observe.attribution import BYZANTINE_EVENTS, attribute, reach_warnings, review_reach, without_liars
from ..io.runfolder import (OWN_FILES, PROVENANCE, SEED_FILES, TOP_FILES, OwnFiles, RunLock, environment,
                        input_record, read_json, refuse_inputs_inside, remove_stale_tmp, resume_problem,
                        scenario_inputs)
from ..scenario.model import Scenario, agent_abilities, build_graph, check_semantics, input_files, topology_seed
from ..core.sim import Environment, long_run_gc
from ..core.types import LatencySpec

__all__ = ["run", "run_one", "validate", "prepare", "Interrupted", "RunResult", "MultiRunResult", "RunContext",
           "write_atomic", "portable_data", "resolved_yaml", "dump_json"]

Progress = Callable[[str, float, float], None]


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, default=json_default) + "\n"


def _clean(obj: Any) -> Any:
    """Replace non-finite floats by None so summaries stay valid JSON."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


@dataclass
class RunResult:
    """One seed's outcome: ``summary`` (as in summary.json) and trace ``records``."""

    seed: int
    summary: dict[str, Any]
    records: list[dict[str, Any]]
    out: Optional[Path] = None
    resumed: bool = False
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: how LLM calls were served (not written to the run folder when the backend
    #: records or replays: see Backend.transport)
    transport: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.summary[key]


@dataclass
class MultiRunResult:
    runs: list[RunResult]
    aggregate: dict[str, Any]
    out: Optional[Path] = None

    @property
    def summary(self) -> dict[str, Any]:
        return self.aggregate


class RunContext:
    """The running world of one run: what events act on (:class:`meshsim.scenario.events.World`)."""

    def __init__(self, scenario: Scenario, seed: int, env: Environment, net: Network, trace: Callable):
        self.scenario = scenario
        self.seed = seed
        self.env = env
        self.net = net
        self.trace = trace
        self.protocol: Any = None
        self.partitioned: set[tuple[str, str]] = set()
        self.abilities: dict[str, list[str]] = {}
        self.targets: list[str] = []

    # -- links -------------------------------------------------------------
    def link_pairs(self) -> list[tuple[str, str]]:
        return list(self.net.links)

    def link_is_up(self, u: str, v: str) -> bool:
        return self.net.link(u, v).up

    def set_link_up(self, u: str, v: str, up: bool) -> None:
        self.net.set_link_up(u, v, up)

    def set_link(self, u: str, v: str, latency: Optional[LatencySpec], loss: Optional[float],
                 bandwidth: Optional[float]) -> None:
        link = self.net.link(u, v)
        if latency is not None:
            link.set_latency(latency)
        if loss is not None:
            link.loss = loss
        if bandwidth is not None:
            link.bandwidth = bandwidth

    def add_link(self, u: str, v: str, latency: Optional[LatencySpec], loss: Optional[float],
                 bandwidth: Optional[float]) -> None:
        self.net.add_link(u, v, latency=latency, loss=loss, bandwidth=bandwidth)

    def remove_link(self, u: str, v: str) -> None:
        self.net.remove_link(u, v)

    # -- agents ------------------------------------------------------------
    def add_agent(self, name: str, links: list[str], abilities: list[str]) -> None:
        node = self.net.add_node(name)
        self.abilities[name] = list(abilities)
        self.protocol.attach(node, list(abilities))
        for peer in links:
            self.net.add_link(name, peer)

    def remove_agent(self, name: str) -> None:
        self.net.remove_node(name)
        self.protocol.detach(name)

    def set_degraded(self, agent: str, degraded: bool, fault: Optional[dict[str, Any]] = None) -> None:
        if degraded:
            self.protocol.set_degraded(agent, True, fault)
        elif fault:  # a recovery from a given round (consensus protocols)
            self.protocol.set_degraded(agent, False, fault)
        else:
            self.protocol.set_degraded(agent, False)

    def degrade_share(self, share: float) -> list[str]:
        """``degrade`` with ``share``: the protocol draws the agents (SAC, CP-WBFT)."""
        pick = getattr(self.protocol, "degrade_share", None)
        if pick is None:
            raise InputError("'share' needs a protocol that picks degradable agents (SAC, CP-WBFT)",
                             field="share", value=share)
        return pick(share)

    def set_role(self, agent: str, role: str) -> None:
        self.protocol.set_role(agent, role)

    # -- Byzantine MeshHeal agents (issue 20) --------------------------------
    def agent_names(self) -> list[str]:
        return sorted(self.net.nodes, key=lambda a: (len(a), a))

    def neighbours(self, agent: str) -> list[str]:
        node = self.net.nodes.get(agent)
        if node is None:
            raise InputError("unknown agent", field="near", value=agent)
        return sorted(node.links, key=lambda a: (len(a), a))

    def ability_names(self) -> set[str]:
        return {s for ks in self.abilities.values() for s in ks}

    def rng(self, *names: str) -> Any:
        return self.env.pyrandom("events", *names)

    def set_behaviour(self, agent: str, kind: str, spec: dict[str, Any]) -> None:
        self.protocol.set_behaviour(agent, kind, spec)


class _Trace:
    def __init__(self, level: str):
        self.level = level
        self.records: list[dict[str, Any]] = []

    def __call__(self, t: float, type_: str, data: dict) -> None:
        rec = {"t": t, "type": type_}
        rec.update(data)
        self.records.append(rec)

    def emit(self, env: Environment, type_: str, **data: Any) -> None:
        if self.level != "none":
            self(env.now, type_, data)


def portable_data(scenario: Scenario) -> dict[str, Any]:
    """The resolved scenario as plain data, with the files it names (tasks file,
    cassette) made absolute: what a sweep's workers receive, and what
    ``scenario.resolved.yaml`` holds (with the run's seed)."""
    data = scenario.resolved()
    # files named relative to the scenario: absolute, so the resolved scenario
    # runs from its run folder (or `backends fit` re-runs it) as it ran here
    base = scenario.base_dir
    t = data.get("tasks")
    if base is not None and isinstance(t, dict) and t.get("file") and not Path(t["file"]).is_absolute():
        t["file"] = str((base / t["file"]).resolve())
    b = data.get("backend")
    if base is not None and isinstance(b, dict) and b.get("cassette") and not Path(b["cassette"]).is_absolute():
        b["cassette"] = str((base / b["cassette"]).resolve())
    return data


def resolved_yaml(scenario: Scenario, seed: int) -> str:
    """The text of ``scenario.resolved.yaml`` for ``seed``."""
    return _resolved_yaml(scenario, seed)


World = Generator[None, Optional[Progress], RunResult]


def build(scenario: Scenario, seed: int, G: Optional[nx.Graph] = None) -> World:
    """The world of ``seed`` on graph ``G`` (checked by :func:`prepare`), built
    and set up up to the first tick of the clock: network, backend, protocol,
    task stream, scheduled events. Every build-time input error (a task file,
    a protocol's setup) is raised here, before anything is written. Run it
    with :func:`simulate`; ``world.close()`` discards it (``meshsim validate``)."""
    world = _world(scenario, seed, G)
    try:
        next(world)
    except InputError as exc:
        raise _in_scenario(scenario, exc) from None
    return world


def _in_scenario(scenario: Scenario, exc: InputError) -> InputError:
    """An error about a file the scenario names (its task file, a profile),
    raised while building: the line names the scenario too, then that file."""
    if not exc.file or exc.file == scenario.source:
        return exc.with_file(scenario.source)
    if exc.field and not exc.field.startswith(("line ", "examples[")):  # a scenario field (tasks.count): keep it
        return type(exc)(f"{exc.file}: {exc.message}", file=scenario.source, field=exc.field, value=exc.value)
    field = None
    t = scenario.tasks
    if t is not None and t.file:
        tf = Path(t.file) if Path(t.file).is_absolute() or scenario.base_dir is None else scenario.base_dir / t.file
        if Path(exc.file) == tf:
            field = "tasks.file"
    return type(exc)(exc.format(), file=scenario.source, field=field)


def simulate(world: World, progress: Optional[Progress] = None, tables: Optional[TableWriter] = None) -> RunResult:
    """Run a world made by :func:`build` to its end. With ``tables`` (a run
    folder's writer) the record tables are streamed into it as their rows
    close, and the result's ``tables`` is empty; without, they are kept in
    memory in ``RunResult.tables``."""
    try:
        with long_run_gc():
            world.send((progress, tables))
    except StopIteration as stop:
        return stop.value
    raise SimulationError("the world did not finish")  # pragma: no cover - _world yields once


def _world(scenario: Scenario, seed: int, G: Optional[nx.Graph]) -> World:
    """Build, yield once (built), then run when sent the progress callback."""
    if G is None:
        G = build_graph(scenario, seed)
        check_semantics(scenario, G)
    env = Environment(seed)
    level = scenario.output.trace
    tracer = _Trace(level)
    links = scenario.network.links
    net = Network(env, links.latency.spec(), links.loss, links.bandwidth,
                  tracer=tracer if level != "none" else None, trace_messages=(level == "messages"))
    ctx = RunContext(scenario, seed, env, net, tracer.emit)
    for v in G.nodes:
        net.add_node(v)
    overrides = {frozenset(o.link): o for o in scenario.network.overrides}
    for u, v, d in G.edges(data=True):
        ov = overrides.get(frozenset((u, v)))
        lat = ov.latency.spec() if ov and ov.latency else None
        if lat is None and "latency" in d:
            lat = LatencySpec("constant", d["latency"])
        loss = ov.loss if ov and ov.loss is not None else d.get("loss")
        bw = ov.bandwidth if ov and ov.bandwidth is not None else d.get("bandwidth")
        net.add_link(u, v, latency=lat, loss=loss, bandwidth=bw)

    ctx.abilities, ctx.targets = agent_abilities(scenario, G)
    backend = make_backend(scenario.backend.model_dump() if scenario.backend else None,
                           int(env.seed_sequence("backend").generate_state(1)[0]), scenario.base_dir)
    try:
        return (yield from _run_world(scenario, seed, G, env, tracer, net, ctx, backend))
    finally:
        backend.close()


def _run_world(scenario: Scenario, seed: int, G: nx.Graph, env: Environment, tracer: "_Trace", net: Network,
               ctx: RunContext, backend: Any) -> World:
    level = scenario.output.trace
    pctx = ProtocolContext(env=env, net=net, abilities=ctx.abilities, seed=seed,
                           trace=lambda type_, **data: tracer.emit(env, type_, **data),
                           tasks=scenario.tasks, phases=scenario.phases, backend=backend)
    pctx.extra["roles"] = dict(scenario.agents.roles)  # consensus protocols (SAC, CP-WBFT)
    if scenario.tasks is not None and scenario.tasks.file:
        tf = Path(scenario.tasks.file)
        base = scenario.base_dir
        pctx.extra["tasks_file"] = tf if tf.is_absolute() or base is None else base / tf
    proto_cls = PROTOCOLS[scenario.protocol.name]
    protocol = proto_cls(scenario.protocol.params, pctx)
    ctx.protocol = protocol
    convergence = RoutingConvergence(net, protocol)
    route_trace = level != "none"

    def route_changed(agent: str, ability: str, distance: int) -> None:
        convergence.changed(agent, ability, distance)
        if route_trace:
            tracer(env.now, "route", {"agent": agent, "ability": ability, "distance": distance})

    pctx.route_changed = route_changed
    protocol.setup()
    convergence.open("start", 0.0)

    # Scenario events: time events on the clock, task events via the protocol.
    task_events: dict[int, list] = {}
    for i, ev in enumerate(scenario.events):
        if ev.at is not None:
            env.call_later(ev.at, lambda _e, i=i, ev=ev: _fire(i, ev))
        else:
            task_events.setdefault(ev.at_task, []).append((i, ev))

    def _fire(i: int, ev: Any) -> None:
        convergence.open(f"events[{i}]:{ev.type}", env.now)
        tracer.emit(env, "event", index=i, event=ev.type,
                    **{k: v for k, v in ev.model_dump(mode="json").items() if k not in ("type", "at", "at_task")})
        try:
            ev.apply(ctx)
        except InputError as exc:
            raise InputError(exc.message, file=scenario.source, field=f"events[{i}]" +
                             (f".{exc.field}" if exc.field else ""), value=exc.value) from None

    budget = scenario.limits.events

    def over_budget() -> None:
        """The run's event budget (issue 19): the estimate before the clock started
        may be wrong; a run that has sent more than limits.events messages ends
        with one line instead of running on for hours. Checked per task and per
        hundredth of a timed run, never per message."""
        sent = sum(st.sent for st in net.stats.values())
        if sent > budget:
            raise ScenarioError(f"the run sent {sent:,} messages by t={env.now:g}s, above limits.events "
                                f"({budget:,}); it was ended (raise limits.events if you mean it)",
                                file=scenario.source, field="limits.events")

    def task_starting(index: int) -> None:
        over_budget()
        for i, ev in task_events.get(index, ()):
            _fire(i, ev)

    pctx.task_starting = task_starting
    timers = protocol.timers()
    _check_timers(scenario, timers, backend)  # budget before the clock: every periodic timer (issue 30)
    progress, sink = yield  # built: the clock starts when simulate() sends the progress callback
    if sink is not None:
        pctx.tables = sink  # the run folder's tables, written as rows close (issue 22)
    if progress is not None:
        pctx.progress = lambda done, total: progress("tasks", done, total)

    done_ev = protocol.finished()
    end = scenario.duration
    if done_ev is not None:
        done_ev.callbacks.append(lambda _e: env_stop())
    stopped = [False]

    def env_stop() -> None:
        stopped[0] = True
        from simpy.core import StopSimulation
        raise StopSimulation(None)

    if end is not None:
        step = end / 100.0
        while not stopped[0] and env.now < end:
            env.run(until=min(end, env.now + step))
            over_budget()
            if progress is not None and done_ev is None:
                progress("time", env.now, end)
    elif timers:
        # a run without a duration whose periodic timers keep the queue full: the budget is checked
        # about every hundredth of it, not only at task starts (a task could outlast it by far)
        step = budget / (100.0 * sum(t.messages / t.period for t in timers))
        while not stopped[0] and env.peek() != float("inf"):
            env.run(until=max(env.now + step, math.nextafter(env.now, math.inf)))
            over_budget()
    else:
        env.run()
    convergence.close()
    protocol.close_records()
    summary: dict[str, Any] = {
        "scenario": scenario.name,
        "seed": seed,
        "sim_time": env.now,
        "network": {"agents": len(net.nodes), "links": len(net.links),
                    "links_up": sum(1 for link in net.links.values() if link.up)},
        "messages": net.totals(),
        "unhandled_messages": net.unhandled_count,
    }
    from ..scenario.degenerate import degenerate_notes

    notes = degenerate_notes(scenario, len(net.links))
    if notes:  # a run whose outcome was foregone says so in its summary too (issue 19)
        summary["notes"] = notes
    if protocol.routing_tables():
        summary["routing"] = convergence.summary()
    psum = protocol_summary(protocol)
    if psum:
        summary.update(psum)
    # How calls were served (cassette hits, wall time, retries, calls on the wire
    # together) is not a result: a replay serves the same replies from a file.
    transport = dict(backend.transport())
    bridge = getattr(env, "_llm_bridge", None)
    if bridge is not None:
        transport["max_in_flight"] = bridge.max_in_flight
        transport["batches"] = bridge.batches
    if transport and not backend.replayable:
        summary["transport"] = transport  # a live endpoint: no byte-identity to keep
    tables = protocol_tables(protocol)  # every table, with the rows not yet streamed
    for name, rows in tables.items():
        pctx.tables.extend(name, rows)
    kept = pctx.tables
    tables = {name: kept.tables.get(name, []) for name in tables} if isinstance(kept, TableRows) else {}
    return RunResult(seed=seed, summary=_clean(summary), records=tracer.records, tables=tables,
                     transport=_clean(transport))


# --------------------------------------------------------------------------
# load -> check (prepare) -> build -> simulate -> write


class Interrupted(MeshsimError):
    """Ctrl-C during a run: completed seeds are kept, a rerun resumes (exit 130)."""

    exit_code = 130


#: topology kinds whose graph does not depend on the seed: checked once per run
_FIXED_KINDS = frozenset({"complete", "ring", "path", "star", "k_circulant", "file"})


def _topology_key(scenario: Scenario, seed: int) -> Any:
    return None if scenario.network.topology.kind in _FIXED_KINDS else topology_seed(scenario, seed)


def prepare(scenario: Scenario, seeds: list[int]) -> dict[int, nx.Graph]:
    """Every check that needs a graph, for every seed, before anything is
    built or written: the graph of each distinct topology (its seed is derived
    from the run seed unless pinned), its connectivity and limits, and the dry
    replay of the events against it (:func:`meshsim.scenario.model.check_semantics`).

    Returns the graph of the first seed (the others are rebuilt when they run,
    so a 5-seed run never holds five large graphs at once)."""
    keep: dict[int, nx.Graph] = {}
    seen: set = set()
    for k, s in enumerate(seeds):
        key = _topology_key(scenario, s)
        if key in seen:
            continue
        seen.add(key)
        try:
            G = build_graph(scenario, s)
            check_semantics(scenario, G)
        except InputError as exc:
            if key is None or scenario.network.topology.seed is not None or len(seeds) == 1 and s == scenario.seed:
                raise
            # a random graph drawn from this seed: say which, and how to pin it
            raise type(exc)(f"{exc.message} (in the graph of seed {s}: a random topology is drawn from the run "
                            "seed unless network.topology.seed pins it)", file=exc.file, field=exc.field,
                            value=exc.value) from None
        if k == 0:
            keep[s] = G
    return keep


def _preflight(scenario: Scenario) -> None:
    """One request per endpoint a real backend will call (none for fakes and replays)."""
    if scenario.backend is None:
        return
    backend = make_backend(scenario.backend.model_dump(), 0, scenario.base_dir)
    try:
        backend.preflight()
    except InputError as exc:
        if exc.file:
            raise
        raise InputError(exc.message, file=scenario.source, field="backend" + (f".{exc.field}" if exc.field else ""),
                         value=exc.value) from None
    finally:
        backend.close()


def _validate(scenario: Scenario, seed: Optional[int] = None, preflight: bool = True) -> dict[str, Any]:
    """Every step of :func:`run` before the clock starts, for every seed it
    would run: the checks (:func:`prepare`), building the world (network,
    backend, protocol setup, task stream) on each distinct graph, and the
    backend's preflight. Raises what ``run`` would raise before its first
    tick; returns the first graph's size."""
    seeds = [seed] if seed is not None else scenario.seed_list()
    graphs = prepare(scenario, seeds)
    built: set = set()
    for s in seeds:
        key = _topology_key(scenario, s)
        if key not in built:  # a SAC setup checks robustness by MILP: once per graph, not per seed
            built.add(key)
            build(scenario, s, graphs.get(s)).close()
    if preflight:
        _preflight(scenario)
    G = graphs[seeds[0]]
    warnings: list[str] = []  # liars that can never reach their targets (issue 34), per distinct graph
    seen: set = set()
    for s in seeds if any(e.type in ("frame", "shield") for e in scenario.events) else ():
        key = _topology_key(scenario, s)
        if key in seen:
            continue
        seen.add(key)
        g = graphs.get(s)
        for w in reach_warnings(scenario, g if g is not None else build_graph(scenario, s)):
            if w not in warnings:
                warnings.append(w)
    return {"agents": G.number_of_nodes(), "links": G.number_of_edges(), "seeds": seeds, "warnings": warnings}


def _horizon(scenario: Scenario, backend: Any) -> tuple[float, str]:
    """How long the run lasts at least (simulated seconds), and how that was found."""
    if scenario.duration:
        return float(scenario.duration), f"duration {float(scenario.duration):g}s"
    tasks = scenario.tasks
    if tasks is None:
        return 0.0, ""
    rate = tasks.poisson_rate()
    if rate:
        return tasks.count / rate, f"{tasks.count} tasks arriving at {rate:g}/s"
    # one after another, each needing at least one model call: the fastest call, one token
    fastest = min(backend.latency_model(m)(0, 1) for m in ("strong", "weak"))
    return tasks.count * fastest, f"{tasks.count} sequential tasks x at least {fastest:g}s (the fastest model call)"


def _check_timers(scenario: Scenario, timers: list, backend: Any) -> None:
    """Refuse, before the clock starts, a periodic timer that would send more than
    limits.events messages over the run's shortest possible length (issue 30)."""
    if not timers:
        return
    horizon, how = _horizon(scenario, backend)
    budget = scenario.limits.events
    for t in timers:
        est = t.messages * horizon / t.period
        if est > budget:
            raise ScenarioError(f"about {est:.3g} messages from {t.what} ({t.messages} every {t.period:g}s over "
                                f"{how}) is above limits.events ({budget:,}); raise {t.field.rsplit('.', 1)[-1]}, "
                                "or limits.events if you mean it", file=scenario.source, field=t.field,
                                value=t.period)


def _resolved_data(scenario: Scenario) -> dict[str, Any]:
    data = portable_data(scenario)
    b = data.get("backend")
    if isinstance(b, dict) and b.get("kind") == "replay":
        # where replies come from (cassette or endpoint) is not part of what was
        # run: a recorded run and its replay resolve to the same scenario
        b.pop("mode", None)
        b.pop("fsync", None)
    return data


def _resolved_yaml(scenario: Scenario, seed: int) -> str:
    # secrets leave by field (URL credentials, header values), whatever their length
    data = redact.structural(_resolved_data(scenario))
    data["seed"] = seed
    data["seeds"] = 1
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _identity_of(data: Any) -> Optional[str]:
    """What makes two runs 'the same scenario' whatever their seeds: a hash of
    the resolved scenario without ``seed`` and ``seeds``."""
    if not isinstance(data, dict):
        return None
    d = {k: v for k, v in data.items() if k not in ("seed", "seeds")}
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _folder_identity(folder: Path) -> Optional[str]:
    try:
        return _identity_of(yaml.safe_load((folder / "scenario.resolved.yaml").read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None


def _clear(own: OwnFiles) -> None:
    """Before a seed (re)runs: remove the files an earlier run wrote into its
    folder (so a rerun of another scenario leaves none of the old run's tables
    behind), and only those (runfolder.OwnFiles)."""
    own.remove(SEED_FILES)


class _Session:
    """One ``run`` into a run folder: the lock, the layout, the resume plan,
    provenance. Every refusal happens before the first seed is simulated."""

    def __init__(self, scenario: Scenario, top: Path, seeds: list[int], multi: bool, force: bool):
        self.scenario = scenario
        self.top = top
        self.seeds = seeds
        self.multi = multi
        self.force = force
        self.identity = _identity_of(yaml.safe_load(_resolved_yaml(scenario, scenario.seed)))
        self.env = environment()
        self.inputs = {role: input_record(p, prefix) for role, (p, prefix) in input_files(scenario).items()}
        self.lock = RunLock(top)
        self.started = time.time()
        self.wrote = False
        self._own: dict[Path, OwnFiles] = {}

    def own(self, folder: Path) -> OwnFiles:
        """The list of meshsim's files in ``folder``: a name joins it before its file is written."""
        if folder not in self._own:
            self._own[folder] = OwnFiles(folder)
        return self._own[folder]

    def folder(self, seed: int) -> Path:
        return self.top / f"seed-{seed}" if self.multi else self.top

    # -- before any seed runs ------------------------------------------------
    def open(self) -> dict[int, str]:
        """Refuse a folder holding files meshsim did not write under the names
        the run writes; lock, check the layout, remove stale temp files, decide
        per seed ``run`` or ``resume`` (or refuse)."""
        self._check_own()
        self.lock.acquire({"scenario": self.scenario.name})
        remove_stale_tmp(self.top)
        self._check_layout()
        return {s: self._plan(s) for s in self.seeds}

    def _check_own(self) -> None:
        """A file the run would write, replace or remove that meshsim did not write stops the run (issue 30)."""
        folders = [(self.top, TOP_FILES)] if self.multi else []
        folders += [(self.folder(s), SEED_FILES) for s in self.seeds]
        for folder, names in folders:
            if folder != self.top and os.path.islink(folder):
                raise RunFolderError("is a link; a seed folder is the run's own: remove the link or choose "
                                     "another --out", file=str(folder))
            if not folder.is_dir():
                continue  # (not there yet; a path that is no folder: RunLock says so)
            foreign = OwnFiles(folder).foreign(names)
            if foreign:
                raise RunFolderError(f"holds {foreign[0]}, which meshsim did not write (it is not listed in "
                                     f"{OWN_FILES}); a run never replaces or deletes a file it did not write: "
                                     "move it, or choose another --out", file=str(folder))

    def _check_layout(self) -> None:
        top, out = self.top, str(self.top)
        seed_dirs = sorted(d for d in top.glob("seed-*") if d.is_dir())
        single = (top / "summary.json").exists() or (top / "scenario.resolved.yaml").exists()
        if self.multi:
            if single:
                raise RunFolderError(f"holds a single-seed run, and this scenario has seeds: {self.scenario.seeds} "
                                     "(its runs go to seed-<s>/ folders); choose another --out", file=out)
            top_prov = read_json(top / PROVENANCE)
            ident = top_prov.get("scenario", {}).get("identity") if top_prov else None
            if ident and ident != self.identity and not self.force:
                raise RunFolderError(f"holds runs of a different scenario "
                                     f"({top_prov.get('scenario', {}).get('name')!r}); use --force to rerun the "
                                     "seeds into it, or choose another --out", file=out)
            ours = {f"seed-{s}" for s in self.seed_list_all()}
            for d in seed_dirs:
                if d.name not in ours and (d / "summary.json").exists() and _folder_identity(d) != self.identity:
                    raise RunFolderError(f"holds {d.name}/ of a different scenario, which this run would not "
                                         "replace (the folder would mix two scenarios); choose another --out",
                                         file=out)
        elif seed_dirs or (top / "aggregate.json").exists():
            raise RunFolderError("holds a multi-seed run (seed-<s>/ folders), and this scenario has one seed; "
                                 "choose another --out", file=out)

    def seed_list_all(self) -> list[int]:
        return self.scenario.seed_list() if self.multi else self.seeds

    def _plan(self, seed: int) -> str:
        folder = self.folder(seed)
        if not (folder / "summary.json").exists() or self.force:
            return "run"
        try:
            old = (folder / "scenario.resolved.yaml").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            old = None
        if old != _resolved_yaml(self.scenario, seed):
            raise RunFolderError("folder holds a completed run of a different scenario or seed; "
                                 "use --force to overwrite or choose another --out", file=str(folder))
        why = resume_problem(read_json(folder / PROVENANCE), self.env, self.inputs)
        if why:
            raise RunFolderError(f"holds a completed run that cannot be resumed: {why}; use --force to rerun it, "
                                 "or choose another --out", file=str(folder))
        return "resume"

    # -- per seed ------------------------------------------------------------
    def start(self, seed: int) -> Path:
        folder = self.folder(seed)
        folder.mkdir(parents=True, exist_ok=True)
        self.wrote = True
        own = self.own(folder)
        _clear(own)
        own.claim(["scenario.resolved.yaml"])
        write_atomic(folder / "scenario.resolved.yaml", _resolved_yaml(self.scenario, seed))
        return folder

    def provenance(self, seed: Optional[int], started: float, extra: Optional[dict[str, Any]] = None) -> str:
        inputs = dict(self.inputs)
        if "cassette" in inputs:  # as the run left it: what a resume must still find as its prefix
            inputs["cassette"] = input_record(Path(inputs["cassette"]["path"]), prefix=True)
        src = Path(self.scenario.source)
        rec: dict[str, Any] = {
            "format": 1, **self.env,
            "layout": "seeds" if self.multi else "single",
            "scenario": {"name": self.scenario.name, "file": str(src), "identity": self.identity,
                         **({k: v for k, v in input_record(src).items() if k != "path"} if src.is_file() else {})},
            "inputs": inputs,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_seconds": round(time.time() - started, 3),
        }
        if seed is not None:
            rec["seed"] = seed
        rec.update(extra or {})
        return dump_json(rec)

    def close(self) -> None:
        if self.wrote:
            self.lock.release()
        else:
            self.lock.release_unused()


def _run_one(scenario: Scenario, seed: int, out: Optional[Path] = None,
             progress: Optional[Progress] = None, force: bool = False) -> RunResult:
    """Run one seed into the folder ``out`` (single-seed layout); see :func:`run`."""
    if out is None:
        G = prepare(scenario, [seed]).get(seed)
        return _run_seed(scenario, seed, None, progress, build(scenario, seed, G))
    return _run(scenario, [seed], Path(out), progress, force, multi=False)  # type: ignore[return-value]


def _run_seed(scenario: Scenario, seed: int, folder: Optional[Path], progress: Optional[Progress],
              world: Optional[World], session: Optional[_Session] = None, G: Optional[nx.Graph] = None) -> RunResult:
    started = time.time()
    # a run folder's record tables are written while the run goes, into temp files that
    # take their names only when it completed: a failed or interrupted run leaves none
    writer = TableWriter(folder, scenario.output.format) if folder is not None and session is not None else None
    try:
        try:
            if world is None:
                world = build(scenario, seed, G)
            result = simulate(world, progress, writer)
            _attribute(scenario, seed, result, G)
        except MeshsimError as exc:
            if folder is not None:
                _claim(session, folder, ["error.txt"])
                write_atomic(folder / "error.txt", f"{type(exc).__name__}: {exc}\n")
            raise
        except Exception as exc:
            if folder is not None:
                _claim(session, folder, ["error.txt"])
                write_atomic(folder / "error.txt", traceback.format_exc())
            raise SimulationError(f"internal error in seed {seed}: {type(exc).__name__}: {exc}"
                                  + (f" (traceback in {folder / 'error.txt'})" if folder else "")) from exc
        assert result is not None
        if writer is not None:
            assert folder is not None and session is not None
            result.out = folder
            fmt = scenario.output.format
            tables = ["events.jsonl"] + list(result.tables) + writer.names()
            session.own(folder).claim([t + (".gz" if fmt == "jsonl.gz" else "") for t in tables]
                                      + [PROVENANCE, "summary.json"])
            write_records(folder, "events.jsonl", result.records, fmt)
            for name, rows in result.tables.items():  # (none: the writer streamed them)
                write_records(folder, name, rows, fmt)
            writer.commit()
            write_atomic(folder / PROVENANCE, session.provenance(seed, started))
            write_atomic(folder / "summary.json", dump_json(result.summary))  # last: the run is complete
    finally:
        if writer is not None:
            writer.abort()  # (after a commit: nothing left to remove)
    return result


def _attribute(scenario: Scenario, seed: int, result: RunResult, G: Optional[nx.Graph]) -> None:
    """A run with Byzantine agents: its attack counts limited to what the attack caused, against
    the paired run of the same seed without the liars (in memory; issue 34, meshsim/observe/attribution.py)."""
    adv = result.summary.get("adversarial")
    if adv is None or not any(e.type in BYZANTINE_EVENTS for e in scenario.events):
        return  # (SAC's `adversarial` is about roles, not liar events: nothing to pair)
    if scenario.backend is not None and scenario.backend.kind in ("openai", "replay"):
        # the paired run would call the endpoint again and write into the cassette (a replay of
        # the run would then be served the paired run's answers): counts stay as observed
        return
    if G is None:
        G = build_graph(scenario, seed)
    pair = without_liars(scenario)  # its trace is not kept: none (the trace level changes no outcome)
    pair = pair.model_copy(update={"output": pair.output.model_copy(update={"trace": "none"})})
    paired = simulate(build(pair, seed, G))
    result.summary["adversarial"] = attribute(adv, paired.tables.get("states.jsonl", []), review_reach(scenario, G))


def _claim(session: Optional[_Session], folder: Path, names: list[str]) -> None:
    if session is not None:
        session.own(folder).claim(names)


def _resumed(folder: Path, seed: int) -> RunResult:
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    return RunResult(seed, summary, read_records(folder, "events.jsonl"), folder, resumed=True)


def _run(scenario: Scenario, seeds: list[int], top: Path, progress: Optional[Progress], force: bool,
         multi: bool) -> RunResult | MultiRunResult:
    graphs = prepare(scenario, seeds)  # every check before the folder is touched,
    refuse_inputs_inside(top, scenario_inputs(scenario))  # (a run never writes among its inputs)
    session = _Session(scenario, top, seeds, multi, force)
    first: Optional[World] = None
    if force or not (session.folder(seeds[0]) / "summary.json").exists():  # (a seed to resume needs no world)
        first = build(scenario, seeds[0], graphs.pop(seeds[0], None))  # and the first world built
    runs: list[RunResult] = []
    try:
        plan = session.open()
        if any(v == "run" for v in plan.values()):
            _preflight(scenario)
        for k, s in enumerate(seeds):
            folder = session.folder(s)
            if plan[s] == "resume":
                runs.append(_resumed(folder, s))
                continue

            def seed_progress(kind: str, done: float, total: float, k=k) -> None:
                if progress is not None:
                    progress(kind, k + (done / total if total else 0), len(seeds))

            session.start(s)
            world, first = (first, None) if k == 0 else (None, first)
            runs.append(_run_seed(scenario, s, folder, seed_progress if progress else None, world, session,
                                  graphs.pop(s, None)))
        if multi:
            session.wrote = True
            session.own(top).claim([PROVENANCE] + (["aggregate.json"] if len(seeds) > 1 else []))
            write_atomic(top / PROVENANCE, session.provenance(None, session.started, {
                "seeds": {str(r.seed): "resumed" if r.resumed else "ran" for r in runs}}))
        if multi and len(seeds) > 1:
            agg = {"scenario": scenario.name, "seeds": seeds, "metrics": aggregate([r.summary for r in runs])}
            write_atomic(top / "aggregate.json", dump_json(_clean(agg)))
            return MultiRunResult(runs, agg, top)
        return runs[0]
    except KeyboardInterrupt:
        # Ctrl-C can land between a temp file's creation and its rename: we
        # still hold the lock, so tidy up now rather than at the next run
        try:
            remove_stale_tmp(top)
        except OSError:
            pass
        done = sum(1 for s in seeds if (session.folder(s) / "summary.json").exists())
        raise Interrupted(f"interrupted: {done} of {len(seeds)} seeds complete, rerun to resume") from None
    except OSError as exc:  # a full or read-only disk, a vanished folder: the path and the reason
        raise RunFolderError(f"cannot write the run folder: {os_reason(exc)}",
                             file=str(exc.filename or top)) from None
    finally:
        if first is not None:
            first.close()
        session.close()


def _is_multi_folder(top: Path) -> bool:
    if (top / "aggregate.json").exists() or any(d.is_dir() for d in top.glob("seed-*")):
        return True
    prov = read_json(top / PROVENANCE)
    return bool(prov) and prov.get("layout") == "seeds"


def _run_api(scenario: Scenario, seed: Optional[int] = None, out: Optional[str | Path] = None,
             progress: Optional[Progress] = None, force: bool = False,
             seed_folder: Optional[bool] = None) -> RunResult | MultiRunResult:
    """Run ``scenario``: one seed (``seed`` given, or ``seeds: 1``) or all its seeds.

    Every check (for every seed) runs before anything is built or written.
    With ``out``: a scenario with ``seeds: N > 1`` writes ``out/seed-<s>/``
    folders plus ``out/aggregate.json`` (mean ± sample std of every numeric
    summary field); a one-seed scenario writes ``out/`` itself. One ``seed``
    of a multi-seed scenario goes to ``out/seed-<s>/`` when ``out`` already is
    a multi-seed folder or ``seed_folder`` is true (``meshsim run --seed``:
    the layout is the scenario's), else to ``out/`` itself (a folder of its
    own, as from Python). Either way a folder never holds both layouts. The
    folder is locked while the run writes it; completed seeds are resumed when
    nothing they depend on changed (``force`` reruns them); see
    :mod:`meshsim.io.runfolder`.
    """
    all_seeds = scenario.seed_list()
    multi = len(all_seeds) > 1
    if multi and seed is not None and out is not None and not seed_folder and not _is_multi_folder(Path(out)):
        multi = False  # one seed into a folder of its own
    if seed is not None:
        seeds = [seed]
    else:
        seeds = all_seeds if multi else all_seeds[:1]
    if out is None:
        graphs = prepare(scenario, seeds)
        first = build(scenario, seeds[0], graphs.pop(seeds[0], None))
        try:
            _preflight(scenario)
            runs = [_run_seed(scenario, s, None, progress if len(seeds) == 1 else None,
                              first if k == 0 else None, None, graphs.pop(s, None)) for k, s in enumerate(seeds)]
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted: 0 of {len(seeds)} seeds written (no run folder)") from None
        finally:
            first.close()
        if len(runs) == 1:
            return runs[0]
        agg = {"scenario": scenario.name, "seeds": seeds, "metrics": aggregate([r.summary for r in runs])}
        return MultiRunResult(runs, agg, None)
    return _run(scenario, seeds, Path(out), progress, force, multi)


# The public entry points: an API key a run registers for scrubbing is
# forgotten when the run ends (meshsim.core.redact.scope), so it cannot go on
# masking the outputs of later runs in the same process.


def validate(scenario: Scenario, seed: Optional[int] = None, preflight: bool = True) -> dict[str, Any]:
    with redact.scope():
        return _validate(scenario, seed, preflight)


validate.__doc__ = _validate.__doc__


def run_one(scenario: Scenario, seed: int, out: Optional[Path] = None,
            progress: Optional[Progress] = None, force: bool = False) -> RunResult:
    with redact.scope():
        return _run_one(scenario, seed, out, progress, force)


run_one.__doc__ = _run_one.__doc__


def run(scenario: Scenario, seed: Optional[int] = None, out: Optional[str | Path] = None,
        progress: Optional[Progress] = None, force: bool = False,
        seed_folder: Optional[bool] = None) -> RunResult | MultiRunResult:
    with redact.scope():
        return _run_api(scenario, seed, out, progress, force, seed_folder)


run.__doc__ = _run_api.__doc__
