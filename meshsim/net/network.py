"""The network: nodes, links, traffic counters and the trace hook."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..core.errors import InputError
from ..core.sim import Environment, event_value
from ..core.names import node_order
from ..core.types import LatencySpec
from .links import Link
from .messages import KindStats, Message
from .node import Node

if TYPE_CHECKING:
    from ..core.sim import Event

__all__ = ["Network", "edge_key"]

Tracer = Callable[[float, str, dict[str, Any]], None]


def edge_key(u: str, v: str) -> tuple[str, str]:
    """Canonical (sorted, natural order) key of an undirected edge."""
    return (u, v) if node_order(u) <= node_order(v) else (v, u)


class Network:
    """All nodes and links of one run; owns the message counters.

    ``tracer(t, type, data)`` receives trace records; ``trace_messages`` adds
    one record per send outcome (only for small runs: it is voluminous).
    """

    def __init__(self, env: Environment, latency: LatencySpec | None = None, loss: float = 0.0,
                 bandwidth: float | None = None, tracer: Tracer | None = None,
                 trace_messages: bool = False):
        self.env = env
        self.default_latency = latency or LatencySpec("constant", 0.01)
        self.default_loss = float(loss)
        self.default_bandwidth = bandwidth
        self.nodes: dict[str, Node] = {}
        self.links: dict[tuple[str, str], Link] = {}
        self.stats: dict[str, KindStats] = {}
        self.unhandled_count = 0
        #: bumped on every added/removed node or link (observers snapshot neighbour sets only on change)
        self.topology_version = 0
        self.tracer = tracer
        self.trace_messages = trace_messages and tracer is not None
        self.node_factory: Callable[["Network", str], Node] = Node
        if self.trace_messages:
            self.deliver = self._deliver_traced  # type: ignore[method-assign]

    # -- records ---------------------------------------------------------
    def trace(self, type_: str, **data: Any) -> None:
        if self.tracer is not None:
            self.tracer(self.env.now, type_, data)

    def kind_stats(self, kind: str) -> KindStats:
        st = self.stats.get(kind)
        if st is None:
            st = self.stats[kind] = KindStats()
        return st

    def totals(self) -> dict[str, Any]:
        total = KindStats()
        for st in self.stats.values():
            total.add(st)
        return {"total": total.as_dict(),
                "by_kind": {k: self.stats[k].as_dict() for k in sorted(self.stats)}}

    # -- topology --------------------------------------------------------
    def add_node(self, name: str) -> Node:
        if name in self.nodes:
            raise InputError("agent already exists", field="agent", value=name)
        node = self.nodes[name] = self.node_factory(self, name)
        self.topology_version += 1
        return node

    def remove_node(self, name: str) -> None:
        node = self._node(name)
        for peer in list(node.links):
            self.remove_link(name, peer)
        node.shutdown("removed")
        del self.nodes[name]
        self.topology_version += 1

    def add_link(self, u: str, v: str, latency: LatencySpec | None = None, loss: float | None = None,
                 bandwidth: float | None = None) -> Link:
        a, b = self._node(u), self._node(v)
        key = edge_key(u, v)
        if u == v:
            raise InputError("a link needs two different agents", field="link", value=[u, v])
        if key in self.links:
            raise InputError("link already exists", field="link", value=list(key))
        link = Link(self, key[0], key[1], latency or self.default_latency,
                    self.default_loss if loss is None else loss,
                    self.default_bandwidth if bandwidth is None else bandwidth,
                    lambda: self.env.pyrandom("link", key[0], key[1]))
        self.links[key] = link
        a.links[v] = link
        b.links[u] = link
        self.topology_version += 1
        a.link_changed(v, True)
        b.link_changed(u, True)
        return link

    def remove_link(self, u: str, v: str) -> None:
        link = self.link(u, v)
        link.set_up(False)
        del self.links[edge_key(u, v)]
        a, b = self.nodes[link.u], self.nodes[link.v]
        del a.links[link.v]
        del b.links[link.u]
        self.topology_version += 1
        a.link_changed(link.v, False)
        b.link_changed(link.u, False)

    def link(self, u: str, v: str) -> Link:
        link = self.links.get(edge_key(u, v))
        if link is None:
            raise InputError("no such link", field="link", value=[u, v])
        return link

    def set_link_up(self, u: str, v: str, up: bool) -> None:
        link = self.link(u, v)
        if link.up == up:
            return
        link.set_up(up)
        self.nodes[link.u].link_changed(link.v, up)
        self.nodes[link.v].link_changed(link.u, up)

    def _node(self, name: str) -> Node:
        node = self.nodes.get(name)
        if node is None:
            raise InputError("unknown agent", field="agent", value=name)
        return node

    def up_edges(self) -> Iterable[tuple[str, str]]:
        return (k for k, link in self.links.items() if link.up)

    # -- delivery --------------------------------------------------------
    def deliver(self, msg: Message) -> None:
        # deliberate repetition: links.py inlines this body on the hot path; change both together
        node = self.nodes.get(msg.dst)
        st = self.stats[msg.kind]
        if node is None or not node.alive:
            st.dropped_down += 1
            return
        st.delivered += 1
        node.receive(msg)

    def deliver_batch(self, ev: Event) -> None:
        """Deliver a multicast's messages that share one delay (see Node.multicast)."""
        nodes = self.nodes
        stats = self.stats
        traced = self.trace_messages  # (set once, when the network is made)
        batch: list[tuple[Link, str, Message, int]] = event_value(ev)  # (typed: read natively when compiled)
        for link, dst, msg, epoch in batch:
            st = stats[msg.kind]
            if epoch != link.epoch or not link.up:
                st.dropped_down += 1
                self.on_drop(msg, "down")
                continue
            node = nodes.get(dst)
            if node is None or not node.alive:
                st.dropped_down += 1
                continue
            if traced:
                self.trace("deliver", kind=msg.kind, src=msg.src, dst=dst, size=msg.size, sent_at=msg.sent_at)
            st.delivered += 1
            node.receive(msg)

    def _deliver_traced(self, msg: Message) -> None:
        self.trace("deliver", kind=msg.kind, src=msg.src, dst=msg.dst, size=msg.size,
                   sent_at=msg.sent_at)
        Network.deliver(self, msg)

    def on_drop(self, msg: Message, why: str) -> None:
        if self.trace_messages:
            self.trace("drop", kind=msg.kind, src=msg.src, dst=msg.dst, why=why)

    def drop_unlinked(self, msg: Message) -> None:
        st = self.kind_stats(msg.kind)
        st.sent += 1
        st.dropped_down += 1
        self.on_drop(msg, "no-link")

    def unhandled(self, msg: Message) -> None:
        self.unhandled_count += 1
