"""The agent node runtime: inbox, controller process, handlers, timers.

A node knows only its own links (whether each is up: its interface state)
and what arrives in its inbox. Handlers are plain callables run by the
controller; one that returns a generator is started as its own process so
that slow work (an LLM call) never blocks routing traffic.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable, Generator

from simpy import Interrupt
from simpy.events import NORMAL, Event, Process

from .fabric import Fabric, Wire
from .messages import HEADER_BYTES, Message, payload_size

__all__ = ["Node"]

_tuple_new = tuple.__new__

Handler = Callable[[Message], Any]


class Node:
    def __init__(self, net: Fabric, name: str):
        self.net = net
        self.env = net.env
        self.name = name
        self.links: dict[str, Wire] = {}
        self.handlers: dict[str, Handler] = {}
        self.inline: set[str] = set()
        self.link_listeners: list[Callable[[str, bool], None]] = []
        self.alive = True
        self.reliable = None  # set by net.reliable.Reliable
        self._queue: deque[Message] = deque()
        self._waiter: Event | None = None
        # insertion-ordered (a dict, not a set of objects hashed by address): shutdown
        # interrupts them in the order they started, the same in every run
        self._procs: dict[Process, None] = {}
        self.process = self.env.process(self._run())

    # -- local knowledge -------------------------------------------------
    @property
    def neighbors(self) -> list[str]:
        """Peers on this node's links that are up (its own interface state)."""
        return [p for p, link in self.links.items() if link.up]

    def on(self, kind: str, handler: Handler, inline: bool = False) -> None:
        """Dispatch messages of ``kind`` to ``handler``.

        ``inline=True`` runs the handler the moment the message arrives instead
        of queueing it for the controller process (like an interrupt handler):
        for bookkeeping that never blocks (acks, adverts, summaries). It saves
        the inbox round trip on the hot path; the outcome is the same because
        such handlers take no simulated time.
        """
        self.handlers[kind] = handler
        if inline:
            self.inline.add(kind)
        else:
            self.inline.discard(kind)

    # -- sending ---------------------------------------------------------
    def send(self, dst: str, kind: str, payload: Any = None, size: int | None = None,
             rid: int = 0) -> bool:
        """Send one message to neighbour ``dst``; False if it left no link."""
        if size is None:
            size = HEADER_BYTES + payload_size(payload)
        msg = _tuple_new(Message, (kind, self.name, dst, payload, size, self.env._now, rid))  # Message(...), inline
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
        now = self.env._now
        name = self.name
        links = self.links
        groups: dict[float, list] = {}
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
                groups.setdefault(link.latency.value, []).append((link, peer, msg, link.epoch))
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
        if msg.kind in self.inline:  # _dispatch, inline (on every message's path)
            if msg.rid and self.reliable is not None and not self.reliable.accept(msg):
                return
            result = self.handlers[msg.kind](msg)
            if result is not None:
                self.spawn(result)
            return
        w = self._waiter
        if w is not None:
            self._waiter = None
            w._ok = True
            w._value = msg
            self.env.schedule(w, NORMAL, 0)
        else:
            self._queue.append(msg)

    def _run(self) -> Generator[Event, Message, None]:
        queue = self._queue
        handlers = self.handlers
        env = self.env
        try:
            while True:
                if queue:
                    msg = queue.popleft()
                else:
                    ev = self._waiter = Event(env)
                    msg = yield ev
                if msg.rid and self.reliable is not None and not self.reliable.accept(msg):
                    continue  # a retransmission we already handled
                handler = handlers.get(msg.kind)
                if handler is None:
                    self.net.unhandled(msg)
                    continue
                result = handler(msg)
                if result is not None:
                    self.spawn(result)
        except Interrupt:
            return

    # -- processes and timers -------------------------------------------
    def spawn(self, gen: Generator) -> Process:
        """Run ``gen`` as a process owned by this node (interrupted on removal)."""
        proc = self.env.process(gen)
        self._procs[proc] = None
        proc.callbacks.append(self._procs_discard)
        return proc

    def _procs_discard(self, proc: Event) -> None:
        self._procs.pop(proc, None)  # type: ignore[call-overload]
        if not proc._ok and not isinstance(proc._value, Interrupt):
            return  # let simpy raise the real error
        proc._defused = True  # type: ignore[attr-defined]

    def call_later(self, delay: float, fn: Callable[[], None]) -> Event:
        """Call ``fn()`` after ``delay`` unless the node has been removed."""
        def fire(_ev: Event) -> None:
            if self.alive:
                fn()
        return self.env.call_later(delay, fire)

    def shutdown(self, cause: str = "removed") -> None:
        """Stop the controller and every process this node started."""
        if not self.alive:
            return
        self.alive = False
        for proc in list(self._procs):
            if proc.is_alive:
                proc.interrupt(cause)
        if self.process.is_alive:
            self.process.interrupt(cause)

    def link_changed(self, peer: str, up: bool) -> None:
        """Called by the network when one of this node's links changes state."""
        for fn in list(self.link_listeners):
            fn(peer, up)

    def __repr__(self) -> str:
        return f"<Node {self.name}>"
