"""Scenario events: a registry of types, each validated and applied the same way.

An event type is a pydantic model (subclass of :class:`EventSpec`) with two
methods: ``check(nodes, edges, scenario)`` updates the *expected* graph and
raises :class:`InputError` for unknown agents or links (run before the
simulation starts), and ``apply(run)`` changes the live network. Later
capabilities (degrade/recover, Byzantine roles) register more types here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, Optional

from pydantic import Field

from .errors import InputError
from .scenario import AgentPair, EventSpec, Latency, Probability
from .scenario import Role  # set_role (consensus protocols)

if TYPE_CHECKING:  # pragma: no cover
    from .runner import RunContext

__all__ = ["EVENT_TYPES", "register_event"]

EVENT_TYPES: dict[str, type[EventSpec]] = {}


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

    def check(self, nodes: set, edges: set, sc) -> None:
        _need_link(nodes, edges, self.link)


@register_event("link_down")
class LinkDown(_LinkEvent):
    """Take a link down: messages on it are dropped; endpoints notice at once."""

    def apply(self, run: "RunContext") -> None:
        run.net.set_link_up(*self.link, up=False)


@register_event("link_up")
class LinkUp(_LinkEvent):
    def apply(self, run: "RunContext") -> None:
        run.net.set_link_up(*self.link, up=True)


@register_event("set_link")
class SetLink(EventSpec):
    """Change latency / loss / bandwidth of one link, or of every link (``link: all``)."""

    link: AgentPair | str
    latency: Optional[Latency] = None
    loss: Optional[Probability] = None
    bandwidth: Optional[Annotated[float, Field(gt=0)]] = None

    def check(self, nodes: set, edges: set, sc) -> None:
        if isinstance(self.link, str):
            if self.link != "all":
                raise InputError("expected [A, B] or 'all'", field="link", value=self.link)
        else:
            _need_link(nodes, edges, self.link)
        if self.latency is None and self.loss is None and self.bandwidth is None:
            raise InputError("set at least one of latency, loss, bandwidth", field="link")

    def apply(self, run: "RunContext") -> None:
        links = list(run.net.links.values()) if self.link == "all" else [run.net.link(*self.link)]
        for link in links:
            if self.latency is not None:
                link.set_latency(self.latency.spec())
            if self.loss is not None:
                link.loss = self.loss
            if self.bandwidth is not None:
                link.bandwidth = self.bandwidth


@register_event("add_link")
class AddLink(EventSpec):
    link: AgentPair
    latency: Optional[Latency] = None
    loss: Optional[Probability] = None
    bandwidth: Optional[Annotated[float, Field(gt=0)]] = None

    def check(self, nodes: set, edges: set, sc) -> None:
        for a in self.link:
            _need_agent(nodes, a, "link")
        if self.link[0] == self.link[1]:
            raise InputError("a link needs two different agents", field="link", value=self.link)
        if frozenset(self.link) in edges:
            raise InputError("link already exists", field="link", value=self.link)
        edges.add(frozenset(self.link))

    def apply(self, run: "RunContext") -> None:
        run.net.add_link(*self.link, latency=self.latency.spec() if self.latency else None,
                         loss=self.loss, bandwidth=self.bandwidth)


@register_event("remove_link")
class RemoveLink(_LinkEvent):
    def check(self, nodes: set, edges: set, sc) -> None:
        super().check(nodes, edges, sc)
        edges.discard(frozenset(self.link))

    def apply(self, run: "RunContext") -> None:
        run.net.remove_link(*self.link)


@register_event("add_agent")
class AddAgent(EventSpec):
    """A new agent joins with links to ``links`` and the given abilities."""

    agent: str
    links: list[str] = []
    abilities: list[str] = []

    def check(self, nodes: set, edges: set, sc) -> None:
        if self.agent in nodes:
            raise InputError("agent already exists", field="agent", value=self.agent)
        for i, peer in enumerate(self.links):
            _need_agent(nodes, peer, f"links[{i}]")
        nodes.add(self.agent)
        for peer in self.links:
            edges.add(frozenset((self.agent, peer)))

    def apply(self, run: "RunContext") -> None:
        run.add_agent(self.agent, self.links, self.abilities)


@register_event("remove_agent")
class RemoveAgent(EventSpec):
    agent: str

    def check(self, nodes: set, edges: set, sc) -> None:
        _need_agent(nodes, self.agent, "agent")
        nodes.discard(self.agent)
        for e in [e for e in edges if self.agent in e]:
            edges.discard(e)

    def apply(self, run: "RunContext") -> None:
        run.remove_agent(self.agent)


@register_event("partition")
class Partition(EventSpec):
    """Split the graph: every link between different groups goes down.

    Agents named in no group form one more group together.
    """

    groups: Annotated[list[list[str]], Field(min_length=1)]

    def check(self, nodes: set, edges: set, sc) -> None:
        seen: set[str] = set()
        for g, group in enumerate(self.groups):
            for i, a in enumerate(group):
                _need_agent(nodes, a, f"groups[{g}][{i}]")
                if a in seen:
                    raise InputError("agent is in two groups", field=f"groups[{g}][{i}]", value=a)
                seen.add(a)

    def apply(self, run: "RunContext") -> None:
        where = {a: g for g, group in enumerate(self.groups) for a in group}
        rest = len(self.groups)
        for (u, v), link in list(run.net.links.items()):
            if where.get(u, rest) != where.get(v, rest) and link.up:
                run.net.set_link_up(u, v, False)
                run.partitioned.add((u, v))


@register_event("heal")
class Heal(EventSpec):
    """Bring back up every link that a partition took down."""

    def check(self, nodes: set, edges: set, sc) -> None:
        return None

    def apply(self, run: "RunContext") -> None:
        for u, v in sorted(run.partitioned):
            if (u, v) in run.net.links:
                run.net.set_link_up(u, v, True)
        run.partitioned.clear()


class _HealthEvent(EventSpec):
    """Model-Backed MAS Evaluation (Sec. 5): switch agents' backends; their
    abilities, links and controllers stay as they were. ``agents: targets``
    names every degradation target of the agents' profile (replicas too)."""

    agents: list[str] | str

    def names(self, sc, nodes=None) -> list[str]:
        if isinstance(self.agents, str):
            if self.agents != "targets":
                raise InputError("expected a list of agents or 'targets'", field="agents", value=self.agents)
            from .scenario import profile_of
            from .tasks import replicate

            prof = profile_of(sc)
            if prof is None:
                raise InputError("'targets' needs a dataset profile (agents.profile or tasks.dataset)",
                                 field="agents")
            return replicate(prof, sc.agents.replicas)[1]
        return list(self.agents)

    def check(self, nodes: set, edges: set, sc) -> None:
        from .protocols import PROTOCOLS

        if not getattr(PROTOCOLS[sc.protocol.name], "supports_degradation", False):
            raise InputError(f"protocol '{sc.protocol.name}' has no model backends to degrade", field="type",
                             value=self.type)
        for i, a in enumerate(self.names(sc)):
            _need_agent(nodes, a, f"agents[{i}]")


@register_event("degrade")
class Degrade(_HealthEvent):
    """Gray failure. ``mode: swap`` (default, the paper's): the agents use the
    weak model for every call, reviews included. Other modes keep the model and
    hurt quality while the agent stays responsive: ``temperature``
    (``temperature``), ``truncate`` (keep the first ``keep`` of context texts),
    ``corrupt`` (replace a ``rate`` of their characters), ``stale`` (drop earlier
    outputs: stale memory), ``latency`` (calls ``factor`` times slower),
    ``errors`` (a ``rate`` of calls fail after retries)."""

    mode: Literal["swap", "temperature", "truncate", "corrupt", "stale", "latency", "errors"] = "swap"
    temperature: Annotated[float, Field(ge=0, le=2)] = 1.5
    keep: Probability = 0.3
    rate: Probability = 0.3
    factor: Annotated[float, Field(gt=0)] = 4.0

    def apply(self, run: "RunContext") -> None:
        fault = {"mode": self.mode, "temperature": self.temperature, "keep": self.keep, "rate": self.rate,
                 "factor": self.factor}
        for a in self.names(run.scenario):
            run.protocol.set_degraded(a, True, fault)


@register_event("recover")
class Recover(_HealthEvent):
    """Backend restored: the agents' calls use the strong model again where they hold the ability."""

    def apply(self, run: "RunContext") -> None:
        for a in self.names(run.scenario):
            run.protocol.set_degraded(a, False)


@register_event("set_role")
class SetRole(EventSpec):
    """Consensus protocols (SAC, CP-WBFT): the agents take ``role`` from their next
    round on (a reliable agent turns faulty or adversarial, or is restored)."""

    agents: Annotated[list[str], Field(min_length=1)]
    role: Role

    def check(self, nodes: set, edges: set, sc) -> None:
        from .protocols import PROTOCOLS

        if not getattr(PROTOCOLS[sc.protocol.name], "supports_roles", False):
            raise InputError(f"protocol '{sc.protocol.name}' has no agent roles", field="type", value=self.type)
        for i, a in enumerate(self.agents):
            _need_agent(nodes, a, f"agents[{i}]")

    def apply(self, run: "RunContext") -> None:
        for a in self.agents:
            run.protocol.set_role(a, self.role)
