"""The simulation environment: a SimPy clock plus the run's seeded RNG streams.

Every random draw in a run comes from a *named* stream derived from the run
seed, so adding a component (or a link, or an agent) never shifts the draws of
another, and the same seed always replays the same run.
"""
from __future__ import annotations

import gc
import hashlib
import random
from collections import deque
from contextlib import contextmanager
from heapq import heappush
from typing import Any, Callable, Iterator

import numpy as np
import simpy
from simpy.events import NORMAL, Event

__all__ = ["Environment", "Deadlines", "stream_key", "long_run_gc"]


def stream_key(*names: Any) -> tuple[int, ...]:
    """A stable spawn key for a stream name (independent of Python's hash seed)."""
    key = []
    for name in names:
        digest = hashlib.blake2b(str(name).encode(), digest_size=8).digest()
        key.append(int.from_bytes(digest, "little"))
    return tuple(key)


class Environment(simpy.Environment):
    """``simpy.Environment`` with the run seed and named random streams.

    ``rng("links", "A1-A2")`` returns a :class:`numpy.random.Generator` and
    ``pyrandom(...)`` a :class:`random.Random`; both are cached per name, so a
    component asking twice gets the same stream. ``random.Random`` is the one
    to use on per-event hot paths (a numpy scalar draw costs ~10x more).
    """

    def __init__(self, seed: int, initial_time: float = 0.0):
        super().__init__(initial_time)
        self.seed = int(seed)
        self._rngs: dict[tuple, np.random.Generator] = {}
        self._pyrngs: dict[tuple, random.Random] = {}

    def seed_sequence(self, *names: Any) -> np.random.SeedSequence:
        return np.random.SeedSequence(self.seed, spawn_key=stream_key(*names))

    def rng(self, *names: Any) -> np.random.Generator:
        key = tuple(str(n) for n in names)
        gen = self._rngs.get(key)
        if gen is None:
            gen = self._rngs[key] = np.random.default_rng(self.seed_sequence(*key))
        return gen

    def pyrandom(self, *names: Any) -> random.Random:
        key = tuple(str(n) for n in names)
        gen = self._pyrngs.get(key)
        if gen is None:
            # A keyed hash of (seed, names): as independent as SeedSequence for
            # this purpose and ~50x cheaper (thousands of agents and links).
            digest = hashlib.blake2b("\x1f".join(key).encode(), digest_size=32,
                                     key=self.seed.to_bytes(16, "little", signed=True)).digest()
            gen = self._pyrngs[key] = random.Random(int.from_bytes(digest, "little"))
        return gen

    def call_later(self, delay: float, callback: Callable[[Event], None], value: Any = None) -> Event:
        """Run ``callback(event)`` after ``delay`` without a process.

        Cheaper than ``env.timeout`` + callback: one event, no Timeout init.
        ``event.value`` is ``value``.
        """
        ev = Event(self)
        ev._ok = True
        ev._value = value
        ev.callbacks.append(callback)
        self.schedule(ev, NORMAL, delay)
        return ev


class Deadlines:
    """Timeouts that are nearly always cancelled (an ack's, a review's), at the
    cost of one queued event per *live* chain instead of one per timeout (issue 22).

    ``add(delay, value)`` sets a deadline and ``cancel(handle)`` drops it;
    ``callback(value)`` runs at a deadline that was not cancelled, at exactly
    the point of the run where a timer scheduled by ``add`` would have fired:
    the deadline takes its event id from the clock's counter when it is set (so
    every other event keeps its id), and only the earliest pending deadline is
    in the event queue; when it fires (or passes, cancelled) the next live one
    goes in with its reserved id. That keeps the queue's order exact because
    deadlines here are set in order (same delay, a clock that never goes back);
    one that would end before an earlier one is scheduled as a plain timer.
    """

    __slots__ = ("env", "callback", "_q", "_armed", "_last")

    def __init__(self, env: "Environment", callback: Callable[[Any], None]):
        self.env = env
        self.callback = callback
        self._q: deque = deque()  # [time, eid, value, live], in (time, eid) order
        self._armed = False
        self._last = float("-inf")

    def add(self, delay: float, value: Any) -> list:
        env = self.env
        at = env._now + delay
        if at < self._last:  # out of order (another delay): a timer of its own
            entry = [at, -1, value, True]
            env.call_later(delay, self._fire_alone, entry)
            return entry
        self._last = at
        entry = [at, next(env._eid), value, True]
        self._q.append(entry)
        if not self._armed:
            self._arm()
        return entry

    @staticmethod
    def cancel(entry: list) -> None:
        entry[3] = False

    def _arm(self) -> None:
        q = self._q
        while q and not q[0][3]:
            q.popleft()  # cancelled before its turn: never queued
        if not q:
            self._armed = False
            return
        e = q[0]
        ev = Event(self.env)
        ev._ok = True
        ev._value = e
        ev.callbacks.append(self._fire)
        heappush(self.env._queue, (e[0], NORMAL, e[1], ev))
        self._armed = True

    def _fire(self, ev: Event) -> None:
        e = ev._value
        q = self._q
        if q and q[0] is e:
            q.popleft()
        self._armed = False
        if e[3]:
            e[3] = False
            self.callback(e[2])
        if not self._armed:
            self._arm()

    def _fire_alone(self, ev: Event) -> None:
        e = ev._value
        if e[3]:
            e[3] = False
            self.callback(e[2])


#: first-generation threshold of the cyclic collector while a run simulates (CPython's default is 700)
GC_THRESHOLD0 = 20_000


@contextmanager
def long_run_gc(threshold0: int = GC_THRESHOLD0) -> Iterator[None]:
    """The cyclic garbage collector tuned for one long simulation (issue 22).

    A run keeps its records (a dict with lists per task and per review) alive
    to its end, so a full collection walks an ever larger heap: at 48,384
    tasks it was ~18 % of the run's CPU time, the main reason the cost per
    task grew along the stream. Inside this block every object that survives
    a full collection is moved to the permanent generation (``gc.freeze``), so
    it is not walked again, and young collections run 30x less often (the
    simulation's garbage is mostly acyclic, freed by reference counting).
    Everything is restored on exit (``gc.unfreeze``: cycles among the frozen
    objects are collected afterwards as usual). Outcomes never depend on when
    the collector runs. A process that froze objects itself, or turned the
    collector off, is left as it is.
    """
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    old = gc.get_threshold()

    def freeze_survivors(phase: str, info: dict) -> None:
        if phase == "stop" and info.get("generation") == 2:
            gc.freeze()

    gc.set_threshold(max(old[0], threshold0), *old[1:])
    gc.callbacks.append(freeze_survivors)
    try:
        yield
    finally:
        gc.callbacks.remove(freeze_survivors)
        gc.set_threshold(*old)
        gc.unfreeze()
