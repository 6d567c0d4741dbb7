"""Build and simulate one seed's world: the network, the backend, the protocol and its
task stream, the scheduled events (:func:`build`), then the clock run to its end and
the summary the observer assembles (:func:`simulate`). Nothing here touches a run
folder: :mod:`meshsim.simulate.runner` decides what is written where."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generator, Optional

import networkx as nx

from ..backends import BackendPlan, plan_backend
from ..core.errors import InputError, ScenarioError, SimulationError
from ..core.names import node_order
from ..core.sim import Environment, long_run_gc
from ..core.types import LatencySpec
from ..io.records import TableWriter
from ..net.network import Network
from ..observe.routing import RoutingConvergence
from ..observe.summary import protocol_summary, protocol_tables
from ..protocols import PROTOCOLS, ProtocolContext
from ..protocols.base import Protocol, TableRows
from ..protocols.llm import Bridge
from ..scenario.model import CheckMemo, Scenario, agent_abilities, build_graph, check_semantics

__all__ = ["RunResult", "RunContext", "World", "Progress", "build", "simulate", "check_timers", "finite"]

Progress = Callable[[str, float, float], None]


def finite(obj: Any) -> Any:
    """Replace non-finite floats by None so summaries stay valid JSON."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
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


class RunContext:
    """The running world of one run: what events act on (:class:`meshsim.scenario.events.World`)."""

    def __init__(self, scenario: Scenario, seed: int, env: Environment, net: Network, trace: Callable):
        self.scenario = scenario
        self.seed = seed
        self.env = env
        self.net = net
        self.trace = trace
        self._protocol: Optional[Protocol] = None
        self.partitioned: set[tuple[str, str]] = set()
        self.abilities: dict[str, list[str]] = {}
        self.targets: list[str] = []

    @property
    def protocol(self) -> Protocol:
        """The run's protocol (set once it is built, before any event can fire)."""
        if self._protocol is None:
            raise SimulationError("an event fired before the protocol was built")
        return self._protocol

    @protocol.setter
    def protocol(self, protocol: Protocol) -> None:
        self._protocol = protocol

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
        return self.protocol.degrade_share(share)

    def set_role(self, agent: str, role: str) -> None:
        self.protocol.set_role(agent, role)

    # -- Byzantine MeshHeal agents (issue 20) --------------------------------
    def agent_names(self) -> list[str]:
        return sorted(self.net.nodes, key=node_order)

    def neighbours(self, agent: str) -> list[str]:
        node = self.net.nodes.get(agent)
        if node is None:
            raise InputError("unknown agent", field="near", value=agent)
        return sorted(node.links, key=node_order)

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


# built, a world waits for what simulate() sends: the progress callback and the run folder's tables
World = Generator[None, tuple[Optional[Progress], Optional[TableWriter]], RunResult]


def build(scenario: Scenario, seed: int, G: Optional[nx.Graph] = None, backend: Optional[BackendPlan] = None,
          memo: Optional[CheckMemo] = None) -> World:
    """The world of ``seed`` on graph ``G`` (checked by :func:`prepare`), built
    and set up up to the first tick of the clock: network, backend, protocol,
    task stream, scheduled events. Every build-time input error (a task file,
    a protocol's setup) is raised here, before anything is written. Run it
    with :func:`simulate`; ``world.close()`` discards it (``meshsim validate``).
    ``backend``: the run's :func:`backend_plan` (its profile loaded once per run;
    planned here when not given); ``memo``: the run's ``check_semantics`` memo."""
    world = _world(scenario, seed, G, backend, memo)
    try:
        next(world)
    except InputError as exc:
        raise _in_scenario(scenario, exc) from None
    return world


def backend_plan(scenario: Scenario, memo: Optional[CheckMemo] = None) -> BackendPlan:
    """The scenario's backend checked and its profile loaded, once per run: every seed's
    world (and the preflight) builds its backend from this plan. ``memo``: the run's
    ``check_semantics`` memo, whose backend check made the plan (planned here without one)."""
    try:
        return _plan(scenario, memo)
    except InputError as exc:
        raise _in_scenario(scenario, exc) from None


def _plan(scenario: Scenario, memo: Optional[CheckMemo]) -> BackendPlan:
    plan = memo.backend_plan(scenario) if memo is not None else None
    if plan is None:
        plan = plan_backend(scenario.backend.model_dump() if scenario.backend else None, scenario.base_dir)
    return plan


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


def _world(scenario: Scenario, seed: int, G: Optional[nx.Graph], plan: Optional[BackendPlan],
           memo: Optional[CheckMemo]) -> World:
    """Build, yield once (built), then run when sent the progress callback."""
    if memo is None:
        memo = CheckMemo()  # (the check's backend plan is then this world's)
    if G is None:
        G = build_graph(scenario, seed)
        check_semantics(scenario, G, memo)
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
    if plan is None:
        plan = _plan(scenario, memo)
    backend = plan.build(int(env.seed_sequence("backend").generate_state(1)[0]))
    try:
        return (yield from _run_world(scenario, seed, G, env, tracer, net, ctx, backend))
    finally:
        backend.close()


def _run_world(scenario: Scenario, seed: int, G: nx.Graph, env: Environment, tracer: "_Trace", net: Network,
               ctx: RunContext, backend: Any) -> World:
    level = scenario.output.trace
    tasks_file = None
    if scenario.tasks is not None and scenario.tasks.file:
        tf = Path(scenario.tasks.file)
        base = scenario.base_dir
        tasks_file = tf if tf.is_absolute() or base is None else base / tf
    bridge = Bridge(env, backend)  # async calls of one instant, all agents together (fakes never use it)
    pctx = ProtocolContext(env=env, net=net, abilities=ctx.abilities, seed=seed,
                           trace=lambda type_, **data: tracer.emit(env, type_, **data),
                           tasks=scenario.tasks, phases=scenario.phases, backend=backend,
                           roles=dict(scenario.agents.roles), tasks_file=tasks_file, bridge=bridge)
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
    task_events: dict[Optional[int], list] = {}  # (an event without ``at`` has ``at_task``)
    for i, ev in enumerate(scenario.events):
        if ev.at is not None:
            def fire_at(_e: Any, i: int = i, ev: Any = ev) -> None:
                _fire(i, ev)
            env.call_later(ev.at, fire_at)
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
    check_timers(scenario, timers, backend)  # budget before the clock: every periodic timer (issue 30)
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
    if bridge.used:
        transport["max_in_flight"] = bridge.max_in_flight
        transport["batches"] = bridge.batches
    if transport and not backend.replayable:
        summary["transport"] = transport  # a live endpoint: no byte-identity to keep
    tables = protocol_tables(protocol)  # every table, with the rows not yet streamed
    for name, rows in tables.items():
        pctx.tables.extend(name, rows)
    kept = pctx.tables
    tables = {name: kept.tables.get(name, []) for name in tables} if isinstance(kept, TableRows) else {}
    return RunResult(seed=seed, summary=finite(summary), records=tracer.records, tables=tables,
                     transport=finite(transport))


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


def check_timers(scenario: Scenario, timers: list, backend: Any) -> None:
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
