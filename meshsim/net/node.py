"""The agent node runtime: handlers, the processes they start, timers.

A node knows only its own links (whether each is up: its interface state)
and what arrives on them. A message is handed to the handler of its kind the
moment it arrives (like an interrupt handler; handlers take no simulated
time). A handler that returns a generator has it started as its own process
so that slow work (an LLM call) never blocks routing traffic.
"""
from __future__ import annotations

from typing import Any, Callable, Generator, Protocol

from simpy import Interrupt
from simpy.events import Process

from ..core.sim import Event, start_detached
from .fabric import Fabric
from .links import Link
from .messages import HEADER_BYTES, Message, payload_size

__all__ = ["Node"]


Handler = Callable[[Message], Any]


class Deduplicator(Protocol):
    """What a node asks its reliable layer (net.reliable.Reliable) of an arriving message: handle it or not."""

    def accept(self, msg: Message) -> bool: ...


class Node:
    def __init__(self, net: Fabric, name: str):
        self.net = net
        self.env = net.env
        self.name = name
        self.links: dict[str, Link] = {}
        self.handlers: dict[str, Handler] = {}
        self.link_listeners: list[Callable[[str, bool], None]] = []
        self.alive = True
        self.reliable: Deduplicator | None = None  # set by net.reliable.Reliable
        # insertion-ordered (a dict, not a set of objects hashed by address): shutdown
        # interrupts them in the order they started, the same in every run
        self._procs: dict[Any, None] = {}  # SimPy processes (spawn) and detached ones (start)

    # -- local knowledge -------------------------------------------------
    @property
    def neighbors(self) -> list[str]:
        """Peers on this node's links that are up (its own interface state)."""
        return [p for p, link in self.links.items() if link.up]

    def on(self, kind: str, handler: Handler) -> None:
        """Hand messages of ``kind`` to ``handler`` as they arrive.

        A handler takes no simulated time: bookkeeping runs in it, and slow
        work goes in the generator it returns, which is started at once as a
        process of this node (see :meth:`receive`).
        """
        self.handlers[kind] = handler

    # -- sending ---------------------------------------------------------
    def send(self, dst: str, kind: str, payload: Any = None, size: int | None = None,
             rid: int = 0) -> bool:
        """Send one message to neighbour ``dst``; False if it left no link."""
        if size is None:
            size = HEADER_BYTES + payload_size(payload)
        msg = Message(kind, self.name, dst, payload, size, self.env.now, rid)
        link = self.links.get(dst)
        if link is None:
            self.net.drop_unlinked(msg)
            return False
        return link.transmit(msg)

    def broadcast(self, kind: str, payload: Any = None, size: int | None = None) -> int:
        """Send the same message to every neighbour whose link is up."""
        return self.multicast(None, kind, payload, size)

    def multicast(self, peers: Any, kind: str, payload: Any = None, size: int | None = None) -> int:
        """Send the same message to ``peers`` (None: every neighbour whose link is up).

        Counted and delivered exactly as separate sends, but links with a
        constant latency, no loss and no bandwidth limit that share a delay are
        served by one scheduled event (a summary to 575 neighbours costs one
        heap operation, not 575); unless messages are traced, they also share
        one message record (handlers never read ``dst``).
        """
        if size is None:
            size = HEADER_BYTES + payload_size(payload)
        now = self.env.now
        name = self.name
        links = self.links
        groups: dict[float, list[Any]] = {}
        shared = None if self.net.trace_messages else Message(kind, name, "*", payload, size, now, 0)
        n = 0
        for peer in (links if peers is None else peers):
            link = links.get(peer)
            if link is None or not link.up:
                if peers is not None:
                    self.send(peer, kind, payload, size)  # counted as dropped, as a send would be
                continue
            n += 1
            if link.batchable:
                msg = shared or Message(kind, name, peer, payload, size, now, 0)
                delay = link.latency.value
                # (get, not setdefault: no empty list made per peer)
                group = groups.get(delay)
                if group is None:
                    group = groups[delay] = []
                group.append((link, peer, msg, link.epoch))
            else:
                link.transmit(Message(kind, name, peer, payload, size, now, 0))
        if groups:
            st = self.net.kind_stats(kind)
            for delay, batch in groups.items():
                st.sent += len(batch)
                st.bytes += size * len(batch)
                self.env.call_later(delay, self.net.deliver_batch, batch)
        return n

    # -- receiving -------------------------------------------------------
    def receive(self, msg: Message) -> None:
        """Handle one arriving message now (issue 22: there is no inbox process;
        a queue in front of handlers that take no time only delayed them to a
        later event of the same instant)."""
        if msg.rid and self.reliable is not None and not self.reliable.accept(msg):
            return  # a retransmission we already handled
        handler = self.handlers.get(msg.kind)
        if handler is None:
            self.net.unhandled(msg)
            return
        result = handler(msg)
        if result is not None:
            self.start(result)

    # -- processes and timers -------------------------------------------
    def spawn(self, gen: Generator[Any, Any, Any]) -> Process:
        """Run ``gen`` as a process owned by this node (interrupted on removal)."""
        proc = self.env.process(gen)
        self._procs[proc] = None
        proc.callbacks.append(self._procs_discard)
        return proc

    def start(self, gen: Generator[Any, Any, Any]) -> None:
        """Run ``gen`` as a detached process of this node, starting now.

        For a handler's work, which nothing waits on: it runs to its first
        ``yield`` inside this call (not at a later Initialize event) and ends
        without an event of its own; an error it raises still stops the run,
        and :meth:`shutdown` interrupts it like any process of the node.
        Use :meth:`spawn` for a process that others wait on.
        """
        start_detached(self.env, gen, self._procs)

    def _procs_discard(self, proc: Process) -> None:
        self._procs.pop(proc, None)
        if not proc.ok and not isinstance(proc.value, Interrupt):
            return  # let simpy raise the real error
        proc.defused = True

    def call_later(self, delay: float, fn: Callable[[], None]) -> Event:
        """Call ``fn()`` after ``delay`` unless the node has been removed."""
        def fire(_ev: Event) -> None:
            if self.alive:
                fn()
        return self.env.call_later(delay, fire)

    def shutdown(self, cause: str = "removed") -> None:
        """Stop every process this node started (its handlers' work included)."""
        if not self.alive:
            return
        self.alive = False
        for proc in list(self._procs):
            if proc.is_alive:
                proc.interrupt(cause)

    def link_changed(self, peer: str, up: bool) -> None:
        """Called by the network when one of this node's links changes state."""
        for fn in list(self.link_listeners):
            fn(peer, up)

    def __repr__(self) -> str:
        return f"<Node {self.name}>"

