"""Reliable delivery over lossy links: acknowledgement, timeout, bounded retries.

``Reliable(node).send(...)`` returns a SimPy event whose value is ``True``
once the neighbour acknowledged, or ``False`` after ``retries`` retransmissions
timed out (the caller then re-routes or gives up). The receiver acknowledges
every copy but hands only the first to its handler, so a lost ack never makes
a request run twice (SPEC §1: handoffs and review requests are acknowledged
with timeout, retry and re-route).
"""
from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import Any

from ..core.sim import Event

from ..core.sim import Deadlines
from .messages import HEADER_BYTES, Message
from .node import Node

__all__ = ["Reliable", "ACK"]

ACK = "ack"


class Reliable:
    def __init__(self, node: Node, timeout: float = 1.0, retries: int = 3):
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.node = node
        self.timeout = timeout
        self.retries = retries
        self._next_rid = 1
        self._pending: dict[int, list[Any]] = {}
        # ack timeouts: nearly every one is cancelled by its ack, so they are
        # queued lazily (meshsim.core.sim.Deadlines; the same firing order as timers)
        self._deadlines = Deadlines(node.env, self._expire)
        # per sender, every request id handled, sorted: ids from one sender mostly arrive
        # in increasing order, so this is an append (8 bytes each, not a set's ~60: a
        # 483,840-task run handles ~6M requests; issue 22)
        self._seen: dict[str, array[int]] = {}
        self.retransmissions = 0
        self.failures = 0
        node.reliable = self
        node.on(ACK, self._on_ack)

    def send(self, dst: str, kind: str, payload: Any = None, size: int | None = None,
             timeout: float | None = None, retries: int | None = None, wait: bool = True) -> Event | None:
        """Send reliably; the returned event's value is True once acknowledged, False after
        the last retry timed out. ``wait=False`` (nobody will wait on the outcome: adverts,
        review requests and replies, whose callers have their own deadlines): no event is
        made, saving one queued event per message and changing no other event's order."""
        rid = self._next_rid
        self._next_rid += 1
        done = Event(self.node.env) if wait else None
        state = [dst, kind, payload, size, self.retries if retries is None else retries,
                 self.timeout if timeout is None else timeout, done, None]
        self._pending[rid] = state
        self._transmit(rid, state)
        return done

    def _transmit(self, rid: int, state: list[Any]) -> None:
        dst, kind, payload, size, _left, timeout, _done, _timer = state
        self.node.send(dst, kind, payload, size, rid=rid)
        state[7] = self._deadlines.add(timeout, rid)

    def _expire(self, rid: int) -> None:
        state = self._pending.get(rid)
        if state is None or not self.node.alive:
            return
        if state[4] > 0:
            state[4] -= 1
            self.retransmissions += 1
            self._transmit(rid, state)
        else:
            del self._pending[rid]
            self.failures += 1
            if state[6] is not None:
                state[6].succeed(False)

    def _on_ack(self, msg: Message) -> None:
        state = self._pending.pop(msg.payload, None)
        if state is None:
            return  # duplicate ack, or ack after we gave up
        timer = state[7]
        if timer is not None:
            Deadlines.cancel(timer)
        if state[6] is not None:
            state[6].succeed(True)

    def accept(self, msg: Message) -> bool:
        """Acknowledge ``msg``; True when it is the first copy to handle."""
        self.node.send(msg.src, ACK, msg.rid, size=HEADER_BYTES + 8)
        rid = msg.rid
        seen = self._seen.get(msg.src)
        if seen is None:
            seen = self._seen[msg.src] = array("q")
        if not seen or rid > seen[-1]:
            seen.append(rid)
            return True
        i = bisect_left(seen, rid)
        if i < len(seen) and seen[i] == rid:
            return False
        seen.insert(i, rid)  # overtaken by a later request (a lognormal link, a retry)
        return True
