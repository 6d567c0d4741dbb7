"""The checks that need a seed's graph: the graph itself (its seed, size and
connectivity), each agent's abilities, and the dry replay of the events against
it (:func:`check_semantics`), run by ``meshsim validate`` and before every run."""
from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, Optional

import networkx as nx

from ..core.errors import InputError, ScenarioError, TopologyError
from .document import Scenario, over_limit
from .events import EventCheck

if TYPE_CHECKING:
    from ..backends.registry import BackendPlan

__all__ = ["topology_seed", "build_graph", "profile_of", "agent_abilities", "event_check", "check_semantics",
           "CheckMemo"]


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
        raise TopologyError(over_limit("agents", G.number_of_nodes(), "agents", lim.agents), file=sc.source,
                            field="network.topology")
    if G.number_of_edges() > lim.links:
        raise TopologyError(over_limit("links", G.number_of_edges(), "links", lim.links), file=sc.source,
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
        raise TopologyError(over_limit("agents", params["n"], "agents", lim.agents), field="network.topology.n",
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
        raise TopologyError(over_limit(f"links ({kind} topology)", links, "links", lim.links), file=sc.source,
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
    roles = proto.supports_roles
    return EventCheck(protocol=sc.protocol.name,
                      supports_degradation=bool(proto.supports_degradation),
                      supports_roles=bool(roles),
                      # a partial agents.abilities filled from tasks.dataset has that profile's targets
                      targets=list(targets) if profile_of(sc) is not None or targets else None,
                      roles=dict(sc.agents.roles) if roles else None,
                      rounds=getattr(sc.protocol.params, "rounds", None) if roles else None,
                      degrade_modes=proto.degrade_modes)


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
                raise ScenarioError(over_limit("agents", n_agents, "agents", lim.agents), file=src,
                                    field=f"events[{i}]", value=ev.type)
            if n_links > lim.links:
                raise ScenarioError(over_limit("links", n_links, "links", lim.links), file=src,
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


@dataclasses.dataclass
class CheckMemo:
    """What :func:`check_semantics` worked out, kept by its caller for the scenarios it checks next: a
    run's seeds, a sweep's points (which differ in a parameter only; reading profiles is the slow part).
    Each map is keyed by the part of the scenario its entry depends on.

    ``backends`` keeps the plan the backend's check made (its profile loaded and validated), so the run
    builds every seed's backend from it and reads the profile once (issue 31 item 5); ``None``: checked
    by the caller itself (the uncertainty study validates each sample's overrides from one parsed file)."""

    abilities: dict[str, tuple[dict[str, list[str]], list[str]]] = dataclasses.field(default_factory=dict)
    backends: dict[str, Optional["BackendPlan"]] = dataclasses.field(default_factory=dict)
    events: dict[str, EventCheck] = dataclasses.field(default_factory=dict)

    def backend_plan(self, sc: Scenario) -> Optional["BackendPlan"]:
        """The plan the check of ``sc``'s backend made (None: not checked here, or no plan kept)."""
        return self.backends.get(_backend_key(sc))

    def backend_checked(self, sc: Scenario) -> None:
        """Mark ``sc``'s backend checked by the caller (no plan kept)."""
        self.backends[_backend_key(sc)] = None


def _backend_key(sc: Scenario) -> str:
    return json.dumps(["backend", sc.backend.model_dump(mode="json") if sc.backend else None, str(sc.base_dir)],
                      sort_keys=True, default=str)


def check_semantics(sc: Scenario, G: nx.Graph, memo: Optional[CheckMemo] = None) -> None:
    """Checks that need the graph: every named agent and link must exist.

    Events are checked in time order against the graph as earlier events
    change it (an ``add_agent`` makes the agent known to later events).
    ``memo`` (kept by the caller, see :class:`CheckMemo`) remembers the
    abilities, backend and event checks of scenarios that share them.
    """
    src = sc.source
    nodes = set(G.nodes)
    edges = {frozenset(e) for e in G.edges}
    if memo is None:
        memo = CheckMemo()
    akey = json.dumps(["abilities", sc.agents.model_dump(mode="json"),
                       sc.tasks.model_dump(mode="json") if sc.tasks else None, sorted(map(str, G.nodes)),
                       str(sc.base_dir)], sort_keys=True, default=str)
    if akey not in memo.abilities:
        memo.abilities[akey] = agent_abilities(sc, G)
    _abilities, targets = memo.abilities[akey]
    bkey = _backend_key(sc)
    if sc.backend is not None and bkey not in memo.backends:
        from ..backends import plan_backend

        try:
            memo.backends[bkey] = plan_backend(sc.backend.model_dump(), sc.base_dir)
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
    if ekey not in memo.events:
        memo.events[ekey] = event_check(sc, targets)
    _replay_events(sc, nodes, edges, memo.events[ekey])
    proto_check = getattr(sc.protocol.params, "check", None)
    if proto_check is not None:
        try:
            proto_check(sc, G)
        except InputError as exc:
            raise exc.with_file(src) from None
