"""Links own delay, loss and up/down state (like ns.py's ``Wire``).

Delivery is scheduled with a bare callback event (no process per message).
A link that goes down bumps its epoch, so messages already on the wire arrive
to find a different epoch and are dropped and counted as ``dropped_down``.
"""
from __future__ import annotations

import math
import random
from functools import partial
from typing import Any, Callable

from ..core.sim import Event

from ..core.errors import InputError
from ..core.sim import event_value
from ..core.types import LatencySpec
from .fabric import Fabric
from .messages import Message

__all__ = ["Link", "make_delay"]


def make_delay(spec: LatencySpec, source: Any) -> Callable[[], float]:
    """A zero-argument sampler of one link traversal delay (seconds).

    ``source`` is a ``random.Random`` or an object whose ``_rnd`` is one.
    """
    if spec.dist == "constant":
        value = float(spec.value)
        return lambda: value
    rnd = source if isinstance(source, random.Random) else source._rnd
    if spec.dist == "uniform":
        return partial(rnd.uniform, spec.low, spec.high)
    if spec.dist == "lognormal":
        return partial(rnd.lognormvariate, math.log(spec.median), spec.sigma)
    raise InputError("unknown latency distribution", field="latency.dist", value=spec.dist)


class Link:
    """An undirected link between two agents, with per-direction queues.

    ``bandwidth`` (bytes/s) adds serialization time and FIFO queueing per
    direction; ``None`` means infinite.
    """

    __slots__ = ("u", "v", "net", "env", "latency", "_loss", "_bandwidth", "up", "epoch", "batchable",
                 "_delay", "_fixed", "_rnd_factory", "_rnd_obj", "_busy", "_stats", "_nodes", "_traced")

    def __init__(self, net: Fabric, u: str, v: str, latency: LatencySpec, loss: float,
                 bandwidth: float | None, rnd: "random.Random | Callable[[], random.Random]"):
        self.net = net
        self.env = net.env
        self.u, self.v = u, v
        # The link's random stream is made on first use: a 165k-link complete
        # graph with constant latency and no loss never needs one.
        self._rnd_obj = rnd if isinstance(rnd, random.Random) else None
        self._rnd_factory: Callable[[], random.Random] | None = None if isinstance(rnd, random.Random) else rnd
        self.up = True
        self.epoch = 0
        self._busy = {u: 0.0, v: 0.0}
        self._stats = net.stats
        # the network's node table and trace switch, read on every arrival (neither is ever replaced)
        self._nodes: dict[str, Any] = net.nodes
        self._traced: bool = net.trace_messages
        self.latency = latency
        self._delay = make_delay(latency, self) if latency.dist != "constant" else make_delay(latency, None)
        self._loss = float(loss)
        self._bandwidth = bandwidth
        self._refresh()

    def _refresh(self) -> None:
        # constant delay, lossless, no queueing: deliveries can share one event
        self.batchable = self.latency.dist == "constant" and not self._loss and not self._bandwidth
        # a constant delay is read, not sampled (no call per message)
        self._fixed = float(self.latency.value) if self.latency.dist == "constant" else None

    @property
    def loss(self) -> float:
        return self._loss

    @loss.setter
    def loss(self, value: float) -> None:
        self._loss = float(value)
        self._refresh()

    @property
    def bandwidth(self) -> float | None:
        return self._bandwidth

    @bandwidth.setter
    def bandwidth(self, value: float | None) -> None:
        self._bandwidth = value
        self._refresh()

    @property
    def _rnd(self) -> random.Random:
        r = self._rnd_obj
        if r is None:
            assert self._rnd_factory is not None  # (one of the two is set)
            r = self._rnd_obj = self._rnd_factory()
        return r

    def set_latency(self, spec: LatencySpec) -> None:
        self.latency = spec
        self._delay = make_delay(spec, self if spec.dist != "constant" else None)
        self._refresh()

    def other(self, node: str) -> str:
        return self.v if node == self.u else self.u

    def set_up(self, up: bool) -> None:
        if up == self.up:
            return
        self.up = up
        if not up:
            self.epoch += 1  # invalidates everything in flight
            self._busy = {self.u: 0.0, self.v: 0.0}

    def transmit(self, msg: Message) -> bool:
        """Put ``msg`` on the wire; returns False when it is dropped at once."""
        st = self._stats.get(msg.kind)
        if st is None:
            st = self.net.kind_stats(msg.kind)
        st.sent += 1
        st.bytes += msg.size
        if not self.up:
            st.dropped_down += 1
            self.net.on_drop(msg, "down")
            return False
        if self._loss and self._rnd.random() < self._loss:
            st.dropped_loss += 1
            self.net.on_drop(msg, "loss")
            return True  # sent, lost on the way: the sender cannot tell
        delay = self._fixed
        if delay is None:
            delay = self._delay()
        if self._bandwidth:
            env = self.env
            now = env.now
            start = self._busy[msg.src]
            if start < now:
                start = now
            done = start + msg.size / self._bandwidth
            self._busy[msg.src] = done
            delay += done - now
        # one bare callback event per message (sim.Environment.call_later writes SimPy's Event() and
        # schedule out: issue 22)
        self.env.call_later(delay, self._arrive, (msg, self.epoch))
        return True

    def _arrive(self, ev: Event) -> None:
        sent: tuple[Message, int] = event_value(ev)  # (typed: the compiled build reads the message natively)
        msg, epoch = sent
        if epoch != self.epoch or not self.up:
            self._stats[msg.kind].dropped_down += 1
            self.net.on_drop(msg, "down")
            return
        if self._traced:
            self.net.deliver(msg)
            return
        # Network.deliver, inline (every message's path): deliberate repetition, a call per message costs time
        node = self._nodes.get(msg.dst)
        st = self._stats[msg.kind]
        if node is None or not node.alive:
            st.dropped_down += 1
            return
        st.delivered += 1
        node.receive(msg)
