"""The simulation environment: a SimPy clock plus the run's seeded RNG streams.

Every random draw in a run comes from a *named* stream derived from the run
seed, so adding a component (or a link, or an agent) never shifts the draws of
another, and the same seed always replays the same run.

This is the one module that touches SimPy's private attributes (``_now``,
``_queue``, ``_eid``, ``_ok``, ``_value``, ``_generator``, ``_resume``,
``_active_proc``, ...): the hot paths of a run write SimPy's constructors and
``schedule`` out (issue 22), and the rest of meshsim reaches them only through
the named functions here (:func:`event_value`, :func:`start_detached`,
:meth:`Environment.call_later`, ``env.now``). ``tests/unit/test_simpy_internals.py``
fails loudly if SimPy changes what they rely on, and pyproject's ``simpy``
range names the versions it was checked on.
"""
from __future__ import annotations

import gc
import hashlib
import random
from collections import deque
from contextlib import contextmanager
from heapq import heappop, heappush
from operator import attrgetter
from typing import Any, Callable, Generator, Iterator

import numpy as np
import simpy
from simpy.core import StopSimulation
from simpy.events import NORMAL, PENDING, URGENT, Event, EventPriority, Initialize, Process, Timeout
from simpy.exceptions import Interrupt

__all__ = ["Environment", "Deadlines", "stream_key", "long_run_gc", "event_value", "start_detached",
           "SIMPY_INTERNALS"]

_new = object.__new__

#: what this module relies on, by SimPy class: the attributes it reads and writes directly
#: (tests/unit/test_simpy_internals.py checks each against the installed SimPy)
SIMPY_INTERNALS: dict[str, tuple[str, ...]] = {
    "Environment": ("_now", "_queue", "_eid", "_active_proc"),
    "Event": ("_ok", "_value", "_defused"),
    "Timeout": ("_delay",),
    "Process": ("_generator", "_resume", "_target"),
}

#: ``event.value`` without the pending check, as a C call: an event's value when it is processed (its
#: callbacks run), on the per-message paths (net.links, net.network)
event_value: Callable[[Event], Any] = attrgetter("_value")


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
        self._rngs: dict[tuple[str, ...], np.random.Generator] = {}
        self._pyrngs: dict[tuple[str, ...], random.Random] = {}
        #: the deadline lines of every :class:`Deadlines` on this clock, by delay
        self.deadline_lines: dict[float, _Line] = {}

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

    def run(self, until: Any = None) -> Any:
        """``simpy.Environment.run`` with ``step()`` written into its loop: the
        same events in the same order and the same errors, without a method
        call per event (issue 22)."""
        if until is not None:
            if not isinstance(until, Event):
                at = until if isinstance(until, int) else float(until)
                if at <= self._now:
                    raise ValueError(f"until ({at}) must be greater than the current simulation time")
                until = Event(self)
                until._ok = True
                until._value = None
                self.schedule(until, URGENT, at - self._now)
            elif until.callbacks is None:
                return until.value  # already processed
            until.callbacks.append(StopSimulation.callback)
        queue = self._queue
        try:
            while queue:
                self._now, _, _, event = heappop(queue)
                callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
                try:
                    for callback in callbacks:
                        callback(event)
                except StopSimulation:
                    # the rest of this event's callbacks run when the simulation resumes (as simpy does)
                    event.callbacks = callbacks[callbacks.index(callback) + 1:]
                    self.schedule(event, EventPriority(-1))
                    raise
                if not event._ok and not hasattr(event, "_defused"):
                    # a failed event nobody handled: crash with a copy of its exception
                    exc = type(event._value)(*event._value.args)
                    exc.__cause__ = event._value
                    raise exc
        except StopSimulation as exc:
            return exc.args[0]
        if until is not None:
            raise RuntimeError(f'No scheduled events left but "until" event was not triggered: {until}')
        return None

    # ``timeout`` and ``process`` build the same objects as simpy's and schedule them the
    # same way (same time, priority and event id), with the constructors written out:
    # they run once per LLM call and per handler process (issue 22)
    def timeout(self, delay: float = 0, value: Any = None) -> Timeout:
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        ev = _new(Timeout)
        ev.env = self
        ev.callbacks = []
        ev._value = value
        ev._delay = delay
        ev._ok = True
        heappush(self._queue, (self._now + delay, NORMAL, next(self._eid), ev))
        return ev

    def process(self, generator: Any) -> Process:
        if not hasattr(generator, "throw"):
            raise ValueError(f"{generator} is not a generator.")
        proc = _new(Process)
        proc.env = self
        proc.callbacks = []
        proc._generator = generator
        init = _new(Initialize)
        init.env = self
        init.callbacks = [proc._resume]
        init._value = None
        init._ok = True
        proc._target = init
        heappush(self._queue, (self._now, URGENT, next(self._eid), init))
        return proc

    def call_later(self, delay: float, callback: Callable[[Event], None], value: Any = None) -> Event:
        """Run ``callback(event)`` after ``delay`` without a process.

        Cheaper than ``env.timeout`` + callback: one event, no Timeout init.
        ``event.value`` is ``value``.
        """
        # Event() and self.schedule(ev, NORMAL, delay), written out: once per message on a link (issue 22)
        ev = _new(Event)
        ev.env = self
        ev.callbacks = [callback]
        ev._ok = True
        ev._value = value
        heappush(self._queue, (self._now + delay, NORMAL, next(self._eid), ev))
        return ev



# the current simulation time (SimPy's ``now``) read by a C getter: it is read once per message. Set after the
# class body, as the compiled build (docs/scaling.md) would otherwise keep the property object as a plain value.
setattr(Environment, "now", property(attrgetter("_now")))

def start_detached(env: "Environment", gen: Generator[Any, Any, Any], table: dict[Any, None]) -> Process:
    """Run ``gen`` as a process that nothing waits on, starting now (see ``Node.start``).

    It runs to its first ``yield`` inside this call (not at a later
    Initialize event), is entered in ``table`` (its owner's processes) and
    leaves it when it ends, without an end event of its own; an error it
    raises is scheduled as a failed event, so the run stops with it as
    SimPy's would; it can be interrupted like any process.
    """
    proc = _Detached.__new__(_Detached)
    proc.env = env
    proc.callbacks = []
    proc._generator = gen
    proc.table = table
    table[proc] = None
    active = env._active_proc
    proc._resume(_STARTED)
    env._active_proc = active
    return proc


#: the value a detached process starts with (what SimPy's Initialize event carries)
_STARTED = _new(Event)
_STARTED._ok = True
_STARTED._value = None


class _Detached(Process):
    """A process that nothing waits on (see :func:`start_detached`).

    ``_resume`` is SimPy's ``Process._resume`` with a different end: a
    finished (or interrupted) process leaves its owner's table at once instead
    of scheduling its own end event for nobody; one that failed is scheduled
    as a failed event, so the run stops with its error as SimPy's would.
    """

    table: dict[Any, None]

    def _resume(self, event: Any) -> None:  # Any: its callbacks are None once processed (SimPy types them a list)
        env = self.env
        env._active_proc = self
        gen = self._generator
        while True:
            try:
                if event._ok:
                    event = gen.send(event._value)
                else:
                    event._defused = True
                    exc = type(event._value)(*event._value.args)
                    exc.__cause__ = event._value
                    event = gen.throw(exc)
            except StopIteration as e:
                self._ok = True
                self._value = e.args[0] if e.args else None
                break
            except BaseException as e:
                self._ok = False
                self._value = e
                if not isinstance(e, Interrupt):  # an error nobody defuses: the run raises it
                    e.__traceback__ = e.__traceback__.tb_next  # type: ignore[union-attr]
                    env.schedule(self)
                break
            try:
                if event.callbacks is not None:
                    event.callbacks.append(self._resume)
                    break
            except AttributeError:
                raise RuntimeError(f'Invalid yield value "{event}" in {self._generator!r}') from None
            # an event that has already happened: go on with its value at once (as SimPy does)
        env._active_proc = None
        if self._value is PENDING:
            self._target = event
        else:  # ended: it leaves its owner (no end event: nothing waits on it)
            self._target = None  # type: ignore[assignment]
            self.table.pop(self, None)


class Deadlines:
    """Timeouts that are nearly always cancelled (an ack's, a review's), at the
    cost of one queued event per *live* chain instead of one per timeout (issue 22).

    ``add(delay, value)`` sets a deadline and ``cancel(handle)`` drops it;
    ``callback(value)`` runs at a deadline that was not cancelled, at exactly
    the point of the run where a timer scheduled by ``add`` would have fired:
    the deadline takes its event id from the clock's counter when it is set (so
    every other event keeps its id), and only the earliest pending deadline of
    its line is in the event queue; when it fires (or passes, cancelled) the
    next live one goes in with its reserved id. A line holds the deadlines of
    one delay set through every ``Deadlines`` of the clock (every agent's acks
    share one: by the time its head fires, nearly all behind it were cancelled
    and never reach the event queue). That keeps the queue's order exact
    because a line's deadlines are set in order (same delay, a clock that never
    goes back); one that would end before an earlier one of its line (a delay
    that changed, a rounding step) is scheduled as a plain timer.
    """

    __slots__ = ("env", "callback", "_lines")

    def __init__(self, env: "Environment", callback: Callable[[Any], None]):
        self.env = env
        self.callback = callback
        self._lines: dict[float, _Line] = env.deadline_lines

    def add(self, delay: float, value: Any) -> list[Any]:
        line = self._lines.get(delay)
        if line is None:
            line = self._lines[delay] = _Line(self.env)
        return line.add(delay, value, self.callback)

    @staticmethod
    def cancel(entry: list[Any]) -> None:
        entry[3] = False


class _Line:
    """The deadlines of one delay on one clock, in (time, event id) order (see :class:`Deadlines`)."""

    __slots__ = ("env", "_q", "_armed", "_last")

    def __init__(self, env: "Environment"):
        self.env = env
        self._q: deque[list[Any]] = deque()  # [time, eid, value, live, callback], in (time, eid) order
        self._armed = False
        self._last = float("-inf")

    def add(self, delay: float, value: Any, callback: Callable[[Any], None]) -> list[Any]:
        env = self.env
        at = env._now + delay
        if at < self._last:  # out of order: a timer of its own
            entry = [at, -1, value, True, callback]
            env.call_later(delay, _fire_alone, entry)
            return entry
        self._last = at
        entry = [at, next(env._eid), value, True, callback]
        self._q.append(entry)
        if not self._armed:
            self._arm()
        return entry

    def _arm(self) -> None:
        q = self._q
        while q and not q[0][3]:
            q.popleft()  # cancelled before its turn: never queued
        if not q:
            self._armed = False
            return
        e = q[0]
        ev = _new(Event)
        ev.env = self.env
        ev.callbacks = [self._fire]
        ev._ok = True
        ev._value = e
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
            e[4](e[2])
        if not self._armed:
            self._arm()


def _fire_alone(ev: Event) -> None:
    e = ev._value
    if e[3]:
        e[3] = False
        e[4](e[2])


#: first-generation threshold of the cyclic collector while a run simulates (CPython's default is 700)
GC_THRESHOLD0 = 100_000


@contextmanager
def long_run_gc(threshold0: int = GC_THRESHOLD0) -> Iterator[None]:
    """The cyclic garbage collector tuned for one long simulation (issue 22).

    A run keeps its records (a dict with lists per task and per review) alive
    to its end, so a full collection walks an ever larger heap: at 48,384
    tasks it was ~18 % of the run's CPU time, the main reason the cost per
    task grew along the stream. Inside this block every object that survives
    a full collection is moved to the permanent generation (``gc.freeze``), so
    it is not walked again, and young collections run ~140x less often (the
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

    def freeze_survivors(phase: str, info: dict[str, Any]) -> None:
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
