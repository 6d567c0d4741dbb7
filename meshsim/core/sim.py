"""The simulation environment: SimPy's clock plus the run's seeded RNG streams.

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

The clock (:class:`Environment`), the events (:class:`Event`, :class:`Timeout`)
and the detached processes are SimPy's written out as classes of this module
(issue 33): the same attributes, queue entries, event ids and errors, so
SimPy's own ``Process``, ``Condition`` and ``Interruption`` run on them
unchanged, while the compiled build (docs/scaling.md) makes them native
classes whose fields are C struct fields rather than dictionary entries. The
test file above checks on random models that they run events as SimPy does.
"""
from __future__ import annotations

import gc
import hashlib
import random
from collections import deque
from contextlib import contextmanager
from heapq import heappop, heappush
from itertools import count
from typing import Any, Callable, Generator, Iterator, cast

import numpy as np
import simpy
from simpy.core import EmptySchedule, Infinity, StopSimulation
from simpy.events import (NORMAL, PENDING, URGENT, AllOf, AnyOf, Condition, EventPriority, Initialize, Interruption,
                          Process)
from simpy.exceptions import Interrupt

__all__ = ["Environment", "Event", "Timeout", "Deadlines", "randbelow", "shuffle", "stream_key", "long_run_gc", "event_value", "start_detached",
           "SIMPY_INTERNALS"]

_new = object.__new__

#: what this module relies on, by SimPy class: the attributes it reads and writes directly
#: (tests/unit/test_simpy_internals.py checks each against the installed SimPy)
SIMPY_INTERNALS: dict[str, tuple[str, ...]] = {
    "Environment": ("_now", "_queue", "_eid", "_active_proc"),
    "Event": ("_ok", "_value", "_defused"),
    "Process": ("_generator", "_resume", "_target"),
}

def stream_key(*names: Any) -> tuple[int, ...]:
    """A stable spawn key for a stream name (independent of Python's hash seed)."""
    key = []
    for name in names:
        digest = hashlib.blake2b(str(name).encode(), digest_size=8).digest()
        key.append(int.from_bytes(digest, "little"))
    return tuple(key)


def randbelow(rnd: random.Random, n: int) -> int:
    """``rnd.randrange(n)``: the same draw from the same stream (CPython's ``Random._randbelow``, written out so
    that the compiled build runs it natively; tests/unit/test_sim_draws.py checks it draw for draw)."""
    if n <= 0:
        raise ValueError(f"empty range in randrange({n})")
    k = n.bit_length()
    r = rnd.getrandbits(k)
    while r >= n:
        r = rnd.getrandbits(k)
    return r


def shuffle(rnd: random.Random, x: list[Any]) -> None:
    """``rnd.shuffle(x)``: the same order from the same stream (CPython's, written out as :func:`randbelow`)."""
    for i in range(len(x) - 1, 0, -1):
        j = randbelow(rnd, i + 1)
        x[i], x[j] = x[j], x[i]


class Event:
    """SimPy's ``Event``, as a class of this module (issue 33).

    The same attributes (``env``, ``callbacks``, ``_ok``, ``_value``, ``_defused``) and the same
    API (``succeed``, ``fail``, ``trigger``, ``triggered``, ``processed``, ``ok``, ``value``,
    ``defused``, ``&`` and ``|``), so SimPy's processes and conditions take it as one of
    theirs; in the compiled build (docs/scaling.md) it is native, its fields read as struct
    fields, where SimPy's are looked up by name in a dict on every event.
    """

    __slots__ = ("env", "callbacks", "_ok", "_value", "_defused")

    env: Environment
    callbacks: Any  # a list of callbacks, None once processed (SimPy's types)
    _ok: bool  # unset until triggered, as SimPy's
    _value: Any
    _defused: bool  # set only when defused (SimPy reads it with hasattr)

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.callbacks = []
        self._value = PENDING

    def __repr__(self) -> str:
        return f"<{self._desc()} object at {id(self):#x}>"

    def _desc(self) -> str:
        return f"{type(self).__name__}()"

    @property
    def triggered(self) -> bool:
        return self._value is not PENDING

    @property
    def processed(self) -> bool:
        return self.callbacks is None

    @property
    def ok(self) -> bool:
        return self._ok

    @property
    def defused(self) -> bool:
        return hasattr(self, "_defused")

    @defused.setter
    def defused(self, value: bool) -> None:
        self._defused = True

    @property
    def value(self) -> Any:
        if self._value is PENDING:
            raise AttributeError(f"Value of {self} is not yet available")
        return self._value

    def trigger(self, event: Any) -> None:
        self._ok = event._ok
        self._value = event._value
        self.env.schedule(self)

    def succeed(self, value: Any = None) -> "Event":
        if self._value is not PENDING:
            raise RuntimeError(f"{self} has already been triggered")
        self._ok = True
        self._value = value
        env = self.env  # env.schedule(self), written out: once per reply and per closed task
        heappush(env._queue, (env._now, NORMAL, next(env._eid), self))
        return self

    def fail(self, exception: BaseException) -> "Event":
        if self._value is not PENDING:
            raise RuntimeError(f"{self} has already been triggered")
        if not isinstance(exception, BaseException):
            raise TypeError(f"{exception} is not an exception.")
        self._ok = False
        self._value = exception
        self.env.schedule(self)
        return self

    def __and__(self, other: Any) -> Condition:
        return Condition(cast(Any, self.env), Condition.all_events, [cast(Any, self), other])

    def __or__(self, other: Any) -> Condition:
        return Condition(cast(Any, self.env), Condition.any_events, [cast(Any, self), other])


class Timeout(Event):
    """SimPy's ``Timeout`` (see :class:`Event`): triggered when it is made, processed after ``delay``."""

    __slots__ = ("_delay",)

    _delay: Any

    def __init__(self, env: Environment, delay: Any, value: Any = None) -> None:
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        self.env = env
        self.callbacks = []
        self._value = value
        self._delay = delay
        self._ok = True
        heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), self))  # env.schedule, written out

    def _desc(self) -> str:
        value_str = "" if self._value is None else f", value={self._value}"
        return f"{type(self).__name__}({self._delay}{value_str})"


def _scheduled(env: Environment, at: Any, callback: Callable[[Event], None], value: Any, eid: int = -1) -> Event:
    """A triggered event with one callback, queued at time ``at`` with priority NORMAL and event id ``eid``
    (one reserved earlier: a deadline line's), else the next one."""
    ev = Event(env)
    ev.callbacks = [callback]
    ev._ok = True
    ev._value = value
    heappush(env._queue, (at, NORMAL, eid if eid >= 0 else next(env._eid), ev))
    return ev


class Environment:
    """SimPy's ``Environment`` with the run seed and named random streams.

    ``rng("links", "A1-A2")`` returns a :class:`numpy.random.Generator` and
    ``pyrandom(...)`` a :class:`random.Random`; both are cached per name, so a
    component asking twice gets the same stream. ``random.Random`` is the one
    to use on per-event hot paths (a numpy scalar draw costs ~10x more).

    The clock is SimPy's, written out (issue 33): the same queue of ``(time, priority, event
    id, event)``, the same attributes (``_now``, ``_queue``, ``_eid``, ``_active_proc``) and
    methods, so SimPy's processes, conditions and events run on it unchanged; in the
    compiled build it is a native class (docs/scaling.md).
    """

    _now: Any  # SimPy's time: whatever the run schedules with (a float here), never converted
    _queue: list[tuple[Any, Any, int, Any]]
    _eid: Iterator[int]
    _active_proc: Any
    seed: int
    deadline_lines: dict[float, _Line]
    _started: Event

    def __init__(self, seed: int, initial_time: float = 0.0):
        self._now = initial_time
        self._queue = []
        self._eid = count()
        self._active_proc = None
        self.seed = int(seed)
        self._rngs: dict[tuple[str, ...], np.random.Generator] = {}
        self._pyrngs: dict[tuple[str, ...], random.Random] = {}
        #: the deadline lines of every :class:`Deadlines` on this clock, by delay
        self.deadline_lines = {}
        #: the value a detached process starts with (what SimPy's Initialize event carries)
        self._started = Event(self)
        self._started._ok = True
        self._started._value = None

    @property
    def now(self) -> Any:
        return self._now

    @property
    def active_process(self) -> Any:
        return self._active_proc

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

    # -- SimPy's Environment -------------------------------------------------------------
    def schedule(self, event: Any, priority: Any = NORMAL, delay: Any = 0) -> None:
        heappush(self._queue, (self._now + delay, priority, next(self._eid), event))

    def peek(self) -> Any:
        return self._queue[0][0] if self._queue else Infinity

    def step(self) -> None:
        """Process the next event (SimPy's ``step``); :class:`simpy.core.EmptySchedule` if there is none."""
        if not self._queue:
            raise EmptySchedule()
        self._now, _, _, event = heappop(self._queue)
        self._process(event)

    def _process(self, event: Any) -> None:
        callbacks, event.callbacks = event.callbacks, None
        try:
            for callback in callbacks:
                callback(event)
        except StopSimulation:
            # the rest of this event's callbacks run when the simulation resumes (as simpy does)
            event.callbacks = callbacks[callbacks.index(callback) + 1:]
            self.schedule(event, EventPriority(-1))
            raise
        if not event._ok:
            self._failed(event)

    def run(self, until: Any = None) -> Any:
        """``simpy.Environment.run`` with ``step()`` written into its loop: the
        same events in the same order and the same errors, without a method
        call per event (issue 22)."""
        if until is not None:
            if not isinstance(until, (Event, simpy.Event)):
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
                if isinstance(event, Event):  # ours (nearly every event): its fields read directly
                    callbacks = event.callbacks
                    if len(callbacks) == 1:  # the usual case (one waiter): _process, written out
                        event.callbacks = None
                        try:
                            callbacks[0](event)
                        except StopSimulation:
                            event.callbacks = []
                            self.schedule(event, EventPriority(-1))
                            raise
                        if not event._ok:
                            self._failed(event)
                        continue
                self._process(event)
        except StopSimulation as exc:
            return exc.args[0]
        if until is not None:
            raise RuntimeError(f'No scheduled events left but "until" event was not triggered: {until}')
        return None

    @staticmethod
    def _failed(event: Any) -> None:
        """A failed event, processed: unless it was defused (someone handled it), the run stops with a copy of
        its exception (SimPy's ``step``)."""
        if not hasattr(event, "_defused"):
            raise _failure(event)

    def event(self) -> Event:
        return Event(self)

    def all_of(self, events: Any) -> Any:  # a SimPy AllOf (Any: it takes our events too)
        return AllOf(cast(Any, self), events)

    def any_of(self, events: Any) -> Any:  # a SimPy AnyOf
        return AnyOf(cast(Any, self), events)

    def timeout(self, delay: Any = 0, value: Any = None) -> Timeout:
        return Timeout(self, delay, value)

    # ``process`` builds the same objects as simpy's and schedules them the same way (same time,
    # priority and event id), with the constructors written out: once per handler process (issue 22)
    def process(self, generator: Any) -> Process:
        if not hasattr(generator, "throw"):
            raise ValueError(f"{generator} is not a generator.")
        proc = _new(Process)
        proc.env = cast(Any, self)
        proc.callbacks = []
        proc._generator = generator
        init = _new(Initialize)
        init.env = cast(Any, self)
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
        return _scheduled(self, self._now + delay, callback, value)


def event_value(ev: Event) -> Any:
    """``event.value`` without the pending check: an event's value when it is processed (its callbacks
    run), on the per-message paths (net.links, net.network)."""
    return ev._value


def start_detached(env: "Environment", gen: Generator[Any, Any, Any], table: dict[Any, None]) -> "_Detached":
    """Run ``gen`` as a process that nothing waits on, starting now (see ``Node.start``).

    It runs to its first ``yield`` inside this call (not at a later
    Initialize event), is entered in ``table`` (its owner's processes) and
    leaves it when it ends, without an end event of its own; an error it
    raises is scheduled as a failed event, so the run stops with it as
    SimPy's would; it can be interrupted like any process.
    """
    proc = _Detached(env, gen, table)
    table[proc] = None
    active = env._active_proc
    proc._resume(env._started)
    env._active_proc = active
    return proc


class _Detached:
    """A process that nothing waits on (see :func:`start_detached`).

    ``_resume`` is SimPy's ``Process._resume`` with a different end: a
    finished (or interrupted) process leaves its owner's table at once instead
    of scheduling its own end event for nobody; one that failed is scheduled
    as a failed event, so the run stops with its error as SimPy's would. It
    has a SimPy process's attributes (``env``, ``callbacks``, ``_generator``,
    ``_target``, ``_ok``, ``_value``), so SimPy interrupts it as one of its
    own; a class of this module rather than a subclass of SimPy's ``Process``,
    so that the compiled build makes it native (issue 33).
    """

    __slots__ = ("env", "callbacks", "_generator", "_target", "_ok", "_value", "_defused", "table")

    env: Environment
    callbacks: Any
    _generator: Any
    _target: Any
    _ok: bool
    _value: Any
    _defused: bool
    table: dict[Any, None]

    def __init__(self, env: Environment, gen: Generator[Any, Any, Any], table: dict[Any, None]) -> None:
        self.env = env
        self.callbacks = []
        self._generator = gen
        self._target = None
        self._value = PENDING
        self.table = table

    @property
    def is_alive(self) -> bool:
        return self._value is PENDING

    @property
    def target(self) -> Any:
        return self._target

    def interrupt(self, cause: Any = None) -> None:
        """SimPy's ``Process.interrupt``: an :class:`~simpy.exceptions.Interrupt` is thrown into it now."""
        Interruption(cast(Any, self), cause)

    def __repr__(self) -> str:
        return f"<Process({getattr(self._generator, '__name__', '?')}) object at {id(self):#x}>"

    def _resume(self, event: Any) -> None:  # Any: ours or SimPy's (an Interruption)
        env = self.env
        env._active_proc = self
        gen = self._generator
        while True:
            try:
                if isinstance(event, Event):  # ours (nearly always): fields read directly
                    if event._ok:
                        event = gen.send(event._value)
                    else:
                        event = gen.throw(_thrown(event))
                elif event._ok:
                    event = gen.send(event._value)
                else:
                    event = gen.throw(_thrown(event))
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
            if isinstance(event, Event):
                if event.callbacks is not None:
                    event.callbacks.append(self._resume)
                    break
            else:
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
            self._target = None
            self.table.pop(self, None)


def _thrown(event: Any) -> Any:
    """What a process that waited on a failed event has thrown at it (SimPy's): a copy of the failure; the
    event is defused (the process handles it)."""
    event._defused = True
    return _failure(event)


def _failure(event: Any) -> Any:
    """A copy of a failed event's exception, caused by it (SimPy raises a copy, with a traceback of its own)."""
    exc = type(event._value)(*event._value.args)
    exc.__cause__ = event._value
    return exc


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
        _scheduled(self.env, e[0], self._fire, e, e[1])
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
