"""Run a scenario: build the world, fire events, write the run folder.

A run folder (as desmod's ``simulate()``) holds ``scenario.resolved.yaml``
(every default filled in; rerunning it reproduces the run), ``events.jsonl``
(the trace), ``summary.json`` and, on failure, ``error.txt``. Every file is
written atomically (temp file + rename) and ``summary.json`` is written last,
so its presence means the run completed; a multi-seed run skips seeds that
already completed with the same resolved scenario (resume).
"""
from __future__ import annotations

import json
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from .errors import InputError, MeshsimError, RunFolderError, SimulationError
from .metrics import RoutingConvergence, aggregate
from .net.network import Network
from .protocols import PROTOCOLS, ProtocolContext
from .records import json_default, read_records, write_atomic, write_records
from .backends import make_backend
from .scenario import Scenario, agent_abilities, build_graph, check_semantics
from .sim import Environment
from .types import LatencySpec

__all__ = ["run", "run_one", "RunResult", "MultiRunResult", "RunContext", "write_atomic", "portable_data",
           "resolved_yaml", "dump_json"]

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
    """The running world of one run: what events act on (:class:`meshsim.events.World`)."""

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
        else:
            self.protocol.set_degraded(agent, False)

    def set_role(self, agent: str, role: str) -> None:
        self.protocol.set_role(agent, role)


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


def _resolved_yaml(scenario: Scenario, seed: int) -> str:
    data = portable_data(scenario)
    b = data.get("backend")
    if isinstance(b, dict) and b.get("kind") == "replay":
        # where replies come from (cassette or endpoint) is not part of what was
        # run: a recorded run and its replay resolve to the same scenario
        b.pop("mode", None)
        b.pop("fsync", None)
    data["seed"] = seed
    data["seeds"] = 1
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _simulate(scenario: Scenario, seed: int, progress: Optional[Progress]) -> RunResult:
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

    def task_starting(index: int) -> None:
        for i, ev in task_events.get(index, ()):
            _fire(i, ev)

    pctx.task_starting = task_starting
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
            if progress is not None and done_ev is None:
                progress("time", env.now, end)
    else:
        env.run()
    convergence.close()
    summary: dict[str, Any] = {
        "scenario": scenario.name,
        "seed": seed,
        "sim_time": env.now,
        "network": {"agents": len(net.nodes), "links": len(net.links),
                    "links_up": sum(1 for link in net.links.values() if link.up)},
        "messages": net.totals(),
        "unhandled_messages": net.unhandled_count,
    }
    if protocol.routing_tables():
        summary["routing"] = convergence.summary()
    psum = protocol.summary()
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
    tables = protocol.output_tables()
    backend.close()
    return RunResult(seed=seed, summary=_clean(summary), records=tracer.records, tables=tables,
                     transport=_clean(transport))


def run_one(scenario: Scenario, seed: int, out: Optional[Path] = None,
            progress: Optional[Progress] = None, force: bool = False) -> RunResult:
    """Run one seed; with ``out``, write (or resume from) its run folder."""
    resolved = _resolved_yaml(scenario, seed)
    if out is not None:
        out = Path(out)
        if out.exists() and not out.is_dir():
            raise RunFolderError("output path exists and is not a folder", file=str(out))
        done = out / "summary.json"
        old = out / "scenario.resolved.yaml"
        if done.exists() and not force:
            if old.exists() and old.read_text() == resolved:
                records = read_records(out, "events.jsonl")
                return RunResult(seed, json.loads(done.read_text()), records, out, resumed=True)
            raise RunFolderError("folder holds a completed run of a different scenario or seed; "
                                 "use --force to overwrite or choose another --out", file=str(out))
        out.mkdir(parents=True, exist_ok=True)
        for stale in ("summary.json", "error.txt"):
            if (out / stale).exists():
                (out / stale).unlink()
        write_atomic(old, resolved)
    try:
        result = _simulate(scenario, seed, progress)
    except MeshsimError as exc:
        if out is not None:
            write_atomic(out / "error.txt", f"{type(exc).__name__}: {exc}\n")
        raise
    except Exception as exc:
        if out is not None:
            write_atomic(out / "error.txt", traceback.format_exc())
        raise SimulationError(f"internal error in seed {seed}: {type(exc).__name__}: {exc}"
                              + (f" (traceback in {out / 'error.txt'})" if out else "")) from exc
    if out is not None:
        result.out = out
        fmt = scenario.output.format
        write_records(out, "events.jsonl", result.records, fmt)
        for name, rows in result.tables.items():
            write_records(out, name, rows, fmt)
        write_atomic(out / "summary.json", dump_json(result.summary))
    return result


def run(scenario: Scenario, seed: Optional[int] = None, out: Optional[str | Path] = None,
        progress: Optional[Progress] = None, force: bool = False) -> RunResult | MultiRunResult:
    """Run ``scenario``: one seed (``seed`` given, or ``seeds: 1``) or all its seeds.

    Several seeds write ``out/seed-<s>/`` folders plus ``out/aggregate.json``
    (mean ± sample std of every numeric summary field).
    """
    out_path = Path(out) if out is not None else None
    seeds = scenario.seed_list()
    if seed is not None or len(seeds) == 1:
        return run_one(scenario, seeds[0] if seed is None else seed, out_path, progress, force)
    runs = []
    for k, s in enumerate(seeds):
        sub = out_path / f"seed-{s}" if out_path is not None else None

        def seed_progress(kind: str, done: float, total: float, k=k) -> None:
            if progress is not None:
                progress(kind, k + (done / total if total else 0), len(seeds))

        runs.append(run_one(scenario, s, sub, seed_progress if progress else None, force))
    agg = {"scenario": scenario.name, "seeds": seeds, "metrics": aggregate([r.summary for r in runs])}
    if out_path is not None:
        write_atomic(out_path / "aggregate.json", dump_json(_clean(agg)))
    return MultiRunResult(runs, agg, out_path)
