"""Scenario events: a registry of types, each validated and applied the same way.

An event type is a pydantic model (subclass of :class:`EventSpec`) with two
methods: ``check(nodes, edges, ctx)`` updates the *expected* graph and raises
:class:`InputError` for unknown agents or links (run before the simulation
starts; ``ctx`` is an :class:`EventCheck`), and ``apply(world)`` changes the
running world through the small :class:`World` interface. Events know neither
the scenario model nor the runner: both sit above this module.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, Protocol

from pydantic import Field, model_serializer

from ..core.discovery import Registry
from ..core.errors import InputError
from .fields import AgentPair, EventSpec, Latency, Probability, Role
from ..core.types import LatencySpec

__all__ = ["EVENT_TYPES", "register_event", "EventCheck", "World"]


@dataclass(frozen=True)
class EventCheck:
    """What the checks of events need to know of the scenario (built by ``check_semantics``)."""

    protocol: str
    #: the protocol has model backends that can be degraded (MeshHeal)
    supports_degradation: bool = False
    #: the protocol has agent roles (SAC, CP-WBFT)
    supports_roles: bool = False
    #: the profile's degradation targets; None when the scenario has no profile
    targets: Optional[list[str]] = None
    #: consensus protocols: the agents' initial roles (``agents.roles``; unnamed agents are strong)
    roles: Optional[dict[str, str]] = None
    #: consensus protocols: T, the rounds of a query (``degrade`` / ``recover`` may name one)
    rounds: Optional[int] = None
    #: the ``degrade`` modes the protocol supports; None: all
    degrade_modes: Optional[tuple[str, ...]] = None


class World(Protocol):
    """The running world as events see it (implemented by the runner)."""

    #: links a partition took down (``heal`` brings them back)
    partitioned: set[tuple[str, str]]
    #: degradation targets of the agents' profile (``agents: targets``)
    targets: list[str]

    def link_pairs(self) -> list[tuple[str, str]]: ...

    def link_is_up(self, u: str, v: str) -> bool: ...

    def set_link_up(self, u: str, v: str, up: bool) -> None: ...

    def set_link(self, u: str, v: str, latency: Optional[LatencySpec], loss: Optional[float],
                 bandwidth: Optional[float]) -> None: ...

    def add_link(self, u: str, v: str, latency: Optional[LatencySpec], loss: Optional[float],
                 bandwidth: Optional[float]) -> None: ...

    def remove_link(self, u: str, v: str) -> None: ...

    def add_agent(self, name: str, links: list[str], abilities: list[str]) -> None: ...

    def remove_agent(self, name: str) -> None: ...

    def set_degraded(self, agent: str, degraded: bool, fault: Optional[dict[str, Any]] = None) -> None: ...

    def degrade_share(self, share: float) -> list[str]: ...

    def set_role(self, agent: str, role: str) -> None: ...

    # Byzantine MeshHeal agents (issue 20)
    def agent_names(self) -> list[str]: ...

    def neighbours(self, agent: str) -> list[str]: ...

    def ability_names(self) -> set[str]: ...

    def rng(self, *names: str) -> Any: ...

    def set_behaviour(self, agent: str, kind: str, spec: dict[str, Any]) -> None: ...

#: a lookup first imports every module of meshsim.scenario that calls register_event (meshsim.core.discovery)
EVENT_TYPES: Registry[type[EventSpec]] = Registry(__package__ or "meshsim.scenario", "register_event")


def register_event(name: str):
    def deco(cls: type[EventSpec]) -> type[EventSpec]:
        EVENT_TYPES[name] = cls
        return cls
    return deco


def _need_agent(nodes: set, name: str, field: str) -> None:
    if name not in nodes:
        raise InputError("unknown agent", field=field, value=name)


def _need_link(nodes: set, edges: set, link: list[str], field: str = "link") -> None:
    for a in link:
        _need_agent(nodes, a, field)
    if frozenset(link) not in edges:
        raise InputError("no such link", field=field, value=link)


class _LinkEvent(EventSpec):
    link: AgentPair

    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        _need_link(nodes, edges, self.link)


@register_event("link_down")
class LinkDown(_LinkEvent):
    """Take a link down: messages on it are dropped; endpoints notice at once."""

    def apply(self, world: World) -> None:
        world.set_link_up(*self.link, up=False)


@register_event("link_up")
class LinkUp(_LinkEvent):
    def apply(self, world: World) -> None:
        world.set_link_up(*self.link, up=True)


@register_event("set_link")
class SetLink(EventSpec):
    """Change latency / loss / bandwidth of one link, or of every link (``link: all``)."""

    link: AgentPair | str
    latency: Optional[Latency] = None
    loss: Optional[Probability] = None
    bandwidth: Optional[Annotated[float, Field(ge=1.0, le=1e15)]] = None

    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        if isinstance(self.link, str):
            if self.link != "all":
                raise InputError("expected [A, B] or 'all'", field="link", value=self.link)
        else:
            _need_link(nodes, edges, self.link)
        if self.latency is None and self.loss is None and self.bandwidth is None:
            raise InputError("set at least one of latency, loss, bandwidth", field="link")

    def apply(self, world: World) -> None:
        pairs = world.link_pairs() if self.link == "all" else [tuple(self.link)]
        latency = self.latency.spec() if self.latency is not None else None
        for u, v in pairs:
            world.set_link(u, v, latency, self.loss, self.bandwidth)


@register_event("add_link")
class AddLink(EventSpec):
    link: AgentPair
    latency: Optional[Latency] = None
    loss: Optional[Probability] = None
    bandwidth: Optional[Annotated[float, Field(ge=1.0, le=1e15)]] = None

    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        for a in self.link:
            _need_agent(nodes, a, "link")
        if self.link[0] == self.link[1]:
            raise InputError("a link needs two different agents", field="link", value=self.link)
        if frozenset(self.link) in edges:
            raise InputError("link already exists", field="link", value=self.link)
        edges.add(frozenset(self.link))

    def apply(self, world: World) -> None:
        world.add_link(*self.link, self.latency.spec() if self.latency else None, self.loss, self.bandwidth)


@register_event("remove_link")
class RemoveLink(_LinkEvent):
    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        super().check(nodes, edges, ctx)
        edges.discard(frozenset(self.link))

    def apply(self, world: World) -> None:
        world.remove_link(*self.link)


@register_event("add_agent")
class AddAgent(EventSpec):
    """A new agent joins with links to ``links`` and the given abilities."""

    agent: str
    links: list[str] = []
    abilities: list[str] = []

    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        if self.agent in nodes:
            raise InputError("agent already exists", field="agent", value=self.agent)
        seen: set[str] = set()
        for i, peer in enumerate(self.links):
            if peer == self.agent:
                raise InputError("a link needs two different agents (the new agent links to itself)",
                                 field=f"links[{i}]", value=peer)
            if peer in seen:
                raise InputError("duplicate link (the agent is linked to this peer twice)", field=f"links[{i}]",
                                 value=peer)
            seen.add(peer)
            _need_agent(nodes, peer, f"links[{i}]")
        nodes.add(self.agent)
        for peer in self.links:
            edges.add(frozenset((self.agent, peer)))

    def apply(self, world: World) -> None:
        world.add_agent(self.agent, self.links, self.abilities)


@register_event("remove_agent")
class RemoveAgent(EventSpec):
    agent: str

    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        _need_agent(nodes, self.agent, "agent")
        nodes.discard(self.agent)
        for e in [e for e in edges if self.agent in e]:
            edges.discard(e)

    def apply(self, world: World) -> None:
        world.remove_agent(self.agent)


@register_event("partition")
class Partition(EventSpec):
    """Split the graph: every link between different groups goes down.

    Agents named in no group form one more group together.
    """

    groups: Annotated[list[list[str]], Field(min_length=1)]

    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        seen: set[str] = set()
        for g, group in enumerate(self.groups):
            for i, a in enumerate(group):
                _need_agent(nodes, a, f"groups[{g}][{i}]")
                if a in seen:
                    raise InputError("agent is in two groups", field=f"groups[{g}][{i}]", value=a)
                seen.add(a)

    def apply(self, world: World) -> None:
        where = {a: g for g, group in enumerate(self.groups) for a in group}
        rest = len(self.groups)
        for u, v in world.link_pairs():
            if where.get(u, rest) != where.get(v, rest) and world.link_is_up(u, v):
                world.set_link_up(u, v, False)
                world.partitioned.add((u, v))


@register_event("heal")
class Heal(EventSpec):
    """Bring back up every link that a partition took down."""

    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        return None

    def apply(self, world: World) -> None:
        pairs = set(world.link_pairs())
        for u, v in sorted(world.partitioned):
            if (u, v) in pairs:
                world.set_link_up(u, v, True)
        world.partitioned.clear()


class _HealthEvent(EventSpec):
    """Model-Backed MAS Evaluation (Sec. 5): switch agents' backends; their
    abilities, links and controllers stay as they were. ``agents: targets``
    names every degradation target of the agents' profile (replicas too).

    Consensus protocols (SAC, CP-WBFT; docs/sac.md "Gray failures beside
    Byzantine agents"): ``at_task: k`` acts from query k on; ``round: r``
    (with ``at_task``) from round r of query k on (r = 0: the initial answer,
    r = t: the calls that produce round t's answer); only honest agents can be
    degraded, and ``swap`` only agents running the strong model."""

    agents: Optional[list[str] | str] = None
    round: Optional[Annotated[int, Field(ge=0)]] = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> dict:
        # fields added later (issue 20) are written only when set: the resolved scenario
        # and the trace of older runs stay byte-identical
        out = handler(self)
        for k in ("round", "share"):
            if k in out and out[k] is None:
                del out[k]
        return out

    def names(self, targets: Optional[list[str]]) -> list[str]:
        if isinstance(self.agents, str):
            if self.agents != "targets":
                raise InputError("expected a list of agents or 'targets'", field="agents", value=self.agents)
            if targets is None:
                raise InputError("'targets' needs a dataset profile (agents.profile or tasks.dataset)",
                                 field="agents")
            return list(targets)
        return list(self.agents or [])

    def _fault(self) -> dict[str, Any]:
        return {} if self.round is None else {"round": self.round}

    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        self._check_when(ctx)
        if self.agents is None:
            raise InputError("name the agents (a list, or 'targets')", field="agents")
        for i, a in enumerate(self.names(ctx.targets)):
            _need_agent(nodes, a, f"agents[{i}]")

    def _check_when(self, ctx: EventCheck) -> None:
        if not ctx.supports_degradation:
            raise InputError(f"protocol '{ctx.protocol}' has no model backends to degrade", field="type",
                             value=self.type)
        if self.round is not None:
            if ctx.rounds is None:
                raise InputError(f"protocol '{ctx.protocol}' has no rounds (only SAC and CP-WBFT do)",
                                 field="round", value=self.round)
            if self.at_task is None:
                raise InputError("'round' counts within the query of 'at_task': give at_task, not at",
                                 field="round", value=self.round)
            if self.round > ctx.rounds:
                raise InputError(f"out of range: a query has rounds 0..{ctx.rounds}", field="round",
                                 value=self.round)


#: honest roles of the consensus protocols (keep in step with ``protocols.consensus.HONEST_ROLES``)
_HONEST_ROLES = frozenset({"strong", "weak", "faulty"})


def _check_degradable(role: str, mode: str, field: str, agent: str) -> None:
    """Consensus protocols: what a gray failure of an agent with ``role`` means."""
    if role not in _HONEST_ROLES:
        raise InputError(f"agent has the Byzantine role '{role}' (it replays or forges its answers, no model "
                         "of its own degrades); degrade honest agents", field=field, value=agent)
    if mode == "swap" and role != "strong":
        raise InputError(f"agent already runs the weak model (role '{role}'): a model swap changes nothing; "
                         "degrade a 'strong' agent, or use mode latency / errors", field=field, value=agent)


@register_event("degrade")
class Degrade(_HealthEvent):
    """Gray failure. ``mode: swap`` (default, the paper's): the agents use the
    weak model for every call, reviews included. Other modes keep the model and
    hurt quality while the agent stays responsive: ``temperature``
    (``temperature``), ``truncate`` (keep the first ``keep`` of context texts),
    ``corrupt`` (replace a ``rate`` of their characters), ``stale`` (drop earlier
    outputs: stale memory), ``latency`` (calls ``factor`` times slower),
    ``errors`` (a ``rate`` of calls fail after retries).

    ``share: p`` (SAC, CP-WBFT) instead of ``agents``: round(p x n) of the n
    agents running the strong model and not yet degraded, drawn when the event
    fires from a named stream of the run's seed."""

    mode: Literal["swap", "temperature", "truncate", "corrupt", "stale", "latency", "errors"] = "swap"
    temperature: Annotated[float, Field(ge=0, le=2)] = 1.5
    keep: Probability = 0.3
    rate: Probability = 0.3
    factor: Annotated[float, Field(gt=0, le=1e6)] = 4.0
    share: Optional[Probability] = None

    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        if self.share is not None:
            if self.agents is not None:
                raise InputError("give 'agents' or 'share', not both", field="share", value=self.share)
            if ctx.roles is None:
                raise InputError(f"'share' picks among the strong agents of SAC / CP-WBFT; protocol "
                                 f"'{ctx.protocol}' needs the agents named", field="share", value=self.share)
            if self.mode != "swap":
                raise InputError("'share' picks agents for a model swap (mode: swap)", field="mode",
                                 value=self.mode)
            self._check_when(ctx)  # the draw happens when the event fires
            return
        super().check(nodes, edges, ctx)
        if ctx.degrade_modes is not None and self.mode not in ctx.degrade_modes:
            raise InputError(f"mode has no effect on protocol '{ctx.protocol}'; choose one of "
                             f"{list(ctx.degrade_modes)}", field="mode", value=self.mode)
        if ctx.roles is not None:
            for i, a in enumerate(self.names(ctx.targets)):
                _check_degradable(ctx.roles.get(a, "strong"), self.mode, f"agents[{i}]", a)

    def apply(self, world: World) -> None:
        fault = {"mode": self.mode, "temperature": self.temperature, "keep": self.keep, "rate": self.rate,
                 "factor": self.factor, **self._fault()}
        names = world.degrade_share(self.share) if self.share is not None else self.names(world.targets)
        for a in names:
            world.set_degraded(a, True, fault)


@register_event("recover")
class Recover(_HealthEvent):
    """Backend restored: the agents' calls use the strong model again where they hold the ability."""

    def apply(self, world: World) -> None:
        for a in self.names(world.targets):
            world.set_degraded(a, False, self._fault() or None)


@register_event("set_role")
class SetRole(EventSpec):
    """Consensus protocols (SAC, CP-WBFT): the agents take ``role`` from their next
    round on (a reliable agent turns faulty or adversarial, or is restored)."""

    agents: Annotated[list[str], Field(min_length=1)]
    role: Role

    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        if not ctx.supports_roles:
            raise InputError(f"protocol '{ctx.protocol}' has no agent roles", field="type", value=self.type)
        for i, a in enumerate(self.agents):
            _need_agent(nodes, a, f"agents[{i}]")
            if ctx.roles is not None:
                ctx.roles[a] = self.role  # later events of the chain see the new role

    def apply(self, world: World) -> None:
        for a in self.agents:
            world.set_role(a, self.role)


# -- Byzantine MeshHeal agents (issue 20; meshsim.protocols.meshheal.byzantine) ----------

_Score = Annotated[float, Field(ge=0.0, le=1.0)]
#: a shortfall mean x̄ an honest agent could report: a reference minus a score, both in [0, 1]
_Shortfall = Annotated[float, Field(ge=-1.0, le=1.0)]
_StateName = Literal["normal", "watched", "isolated"]


class _ByzEvent(EventSpec):
    """Agents turn Byzantine (MeshHeal only): named (``agents``; ``targets`` = the
    profile's degradation targets), or ``count`` / ``share`` of them drawn from the
    run's ``byzantine`` stream among every agent, or among the neighbours of
    ``near``, never among the event's own targets. ``coalition``: the members each
    liar knows (default: the agents this event picked). Behaviours add up: an
    agent may frame, poison and lie about routes at once; ``honest`` ends them."""

    agents: Optional[list[str] | str] = None
    count: Optional[Annotated[int, Field(ge=1, le=10 ** 6)]] = None
    share: Optional[Annotated[float, Field(gt=0.0, le=1.0)]] = None
    near: Optional[str] = None
    coalition: Optional[list[str]] = None

    def _targets(self, targets: Optional[list[str]]) -> list[str]:
        """Agents this event acts *on* (framed / shielded), excluded from the draw."""
        return []

    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        if ctx.protocol != "meshheal":
            raise InputError(f"protocol '{ctx.protocol}' has no Byzantine MeshHeal behaviours (use set_role "
                             "for SAC / CP-WBFT)", field="type", value=self.type)
        given = [k for k in ("agents", "count", "share") if getattr(self, k) is not None]
        if len(given) != 1:
            raise InputError("give exactly one of 'agents', 'count' or 'share'", field="agents",
                             value=given or None)
        if isinstance(self.agents, list):
            for i, a in enumerate(self.agents):
                _need_agent(nodes, a, f"agents[{i}]")
        elif isinstance(self.agents, str):
            self._names_or_targets(self.agents, ctx.targets, "agents")
        if self.near is not None:
            _need_agent(nodes, self.near, "near")
            if self.agents is not None:
                raise InputError("'near' picks agents by count or share, not with 'agents'", field="near",
                                 value=self.near)
        for i, a in enumerate(self.coalition or []):
            _need_agent(nodes, a, f"coalition[{i}]")
        for i, a in enumerate(self._targets(ctx.targets)):
            _need_agent(nodes, a, f"targets[{i}]")

    @staticmethod
    def _names_or_targets(value: str, targets: Optional[list[str]], field: str) -> list[str]:
        if value != "targets":
            raise InputError("expected a list of agents or 'targets'", field=field, value=value)
        if targets is None:
            raise InputError("'targets' needs a dataset profile (agents.profile or tasks.dataset)", field=field)
        return list(targets)

    def pick(self, world: "World") -> list[str]:
        if isinstance(self.agents, list):
            return list(self.agents)
        if isinstance(self.agents, str):
            return self._names_or_targets(self.agents, world.targets, "agents")
        skip = set(self._targets(world.targets))
        pool = world.neighbours(self.near) if self.near is not None else world.agent_names()
        pool = [a for a in pool if a not in skip]
        k = self.count if self.count is not None else max(1, round((self.share or 0.0) * len(pool)))
        if k > len(pool):
            raise InputError(f"only {len(pool)} agents to draw from", field="count" if self.count else "share",
                             value=self.count or self.share)
        rnd = world.rng("byzantine")
        chosen = set(rnd.sample(pool, k))
        return [a for a in pool if a in chosen]

    def spec(self, world: "World", liars: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def apply(self, world: "World") -> None:
        liars = self.pick(world)
        spec = self.spec(world, liars)
        spec["coalition"] = sorted(self.coalition if self.coalition is not None else liars)
        for a in liars:
            world.set_behaviour(a, self.type, spec)


class _ScoreEvent(_ByzEvent):
    score: _Score
    roles: Annotated[list[Literal["review", "committee"]], Field(min_length=1)] = ["review", "committee"]

    def spec(self, world: "World", liars: list[str]) -> dict[str, Any]:
        return {"targets": self._targets(world.targets), "score": self.score, "roles": sorted(set(self.roles))}


@register_event("frame")
class Frame(_ScoreEvent):
    """As reviewer (``review``: the three initial calls) or committee member
    (``committee``: both rounds), score every output of the ``targets`` ``score``
    (default 0.05) whatever the model said. A coalition (several agents, one
    event) coordinates on the same targets."""

    targets: Annotated[list[str], Field(min_length=1)]
    score: _Score = 0.05

    def _targets(self, targets: Optional[list[str]]) -> list[str]:
        return list(self.targets)


@register_event("shield")
class Shield(_ScoreEvent):
    """Score the ``targets``' outputs ``score`` (default 0.95): named agents,
    ``targets`` (the profile's degradation targets) or ``coalition`` (each other)."""

    targets: list[str] | Literal["coalition", "targets"]
    score: _Score = 0.95

    def _targets(self, targets: Optional[list[str]]) -> list[str]:
        if self.targets == "coalition":
            return []
        if self.targets == "targets":
            return self._names_or_targets("targets", targets, "targets")
        return list(self.targets)

    def spec(self, world: "World", liars: list[str]) -> dict[str, Any]:
        out = super().spec(world, liars)
        if self.targets == "coalition":
            out["targets"] = sorted(self.coalition if self.coalition is not None else liars)
        return out


@register_event("poison")
class Poison(_ByzEvent):
    """Summary poisoning: advertise a false recent mean score ``mu``, mean
    shortfall ``xbar`` and/or routing ``state`` instead of the truth. One value
    tells every neighbour the same lie; a list is dealt round-robin over the
    liar's neighbours in name order (different lies to different neighbours;
    ``null`` in the list: the truth for that neighbour)."""

    mu: Optional[_Score | Annotated[list[Optional[_Score]], Field(min_length=1)]] = None
    xbar: Optional[_Shortfall | Annotated[list[Optional[_Shortfall]], Field(min_length=1)]] = None
    state: Optional[_StateName | Annotated[list[Optional[_StateName]], Field(min_length=1)]] = None

    def check(self, nodes: set, edges: set, ctx: EventCheck) -> None:
        super().check(nodes, edges, ctx)
        if self.mu is None and self.xbar is None and self.state is None:
            raise InputError("set at least one of mu, xbar, state", field="mu")

    def spec(self, world: "World", liars: list[str]) -> dict[str, Any]:
        return {"mu": self.mu, "xbar": self.xbar, "state": self.state}


@register_event("route_lie")
class RouteLie(_ByzEvent):
    """Routing lies: advertise ``distance`` (default 0: "I hold it") to
    ``abilities`` (default ``all`` it has heard of) in distance-vector adverts.
    ``hole: black`` drops every task that reaches the liar over a link; ``grey``
    answers a ``rate`` share of them itself, unreviewed; ``none`` only attracts."""

    abilities: list[str] | Literal["all"] = "all"
    distance: Annotated[int, Field(ge=0, le=255)] = 0
    hole: Literal["black", "grey", "none"] = "black"
    rate: Probability = 0.5

    def spec(self, world: "World", liars: list[str]) -> dict[str, Any]:
        if isinstance(self.abilities, list):
            known = world.ability_names()
            for i, s in enumerate(self.abilities):
                if s not in known:
                    raise InputError("unknown ability", field=f"abilities[{i}]", value=s)
        return {"abilities": self.abilities, "distance": self.distance, "hole": self.hole, "rate": self.rate}


@register_event("honest")
class Honest(_ByzEvent):
    """The agents stop every Byzantine behaviour (adverts return to the truth)."""

    def spec(self, world: "World", liars: list[str]) -> dict[str, Any]:
        return {}
