"""The small interface that links and nodes see of the network.

:class:`~meshsim.net.network.Network` implements :class:`Fabric`; links and
nodes are written against it, so neither imports the network (which builds
them). A node holds its links as :class:`~meshsim.net.links.Link` itself (a
node sends on every hop: the compiled build reads a link's fields natively,
issue 33); a link knows nodes only as the network's table.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .messages import KindStats, Message

if TYPE_CHECKING:  # pragma: no cover
    from ..core.sim import Environment

__all__ = ["Fabric"]


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
