"""The two small interfaces that links and nodes see of each other and of the network.

:class:`~meshsim.net.network.Network` implements :class:`Fabric` and
:class:`~meshsim.net.links.Link` implements :class:`Wire`; links and nodes are
written against these, so neither imports the network (which builds them).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .messages import KindStats, Message

if TYPE_CHECKING:  # pragma: no cover
    from ..core.sim import Environment
    from ..core.types import LatencySpec

__all__ = ["Fabric", "Wire"]


class Fabric(Protocol):
    """What a link or a node needs from the network it belongs to."""

    env: "Environment"
    stats: dict[str, KindStats]
    nodes: dict[str, Any]  # name -> node (a link delivers to the node at its far end)
    trace_messages: bool

    def kind_stats(self, kind: str) -> KindStats: ...

    def deliver(self, msg: Message) -> None: ...

    def deliver_batch(self, ev: Any) -> None: ...

    def on_drop(self, msg: Message, why: str) -> None: ...

    def drop_unlinked(self, msg: Message) -> None: ...

    def unhandled(self, msg: Message) -> None: ...


class Wire(Protocol):
    """What a node needs from one of its links."""

    up: bool
    epoch: int
    batchable: bool
    latency: "LatencySpec"

    def transmit(self, msg: Message) -> bool: ...
