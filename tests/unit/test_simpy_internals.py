"""SimPy's private attributes are touched in one module, meshsim/core/sim.py (issue 31 item 4).

sim.py writes SimPy's ``Event()``, ``Timeout()``, ``Process()``, ``schedule`` and ``Process._resume`` out on the
hot paths (issue 22), and since issue 33 its clock (``Environment``), events (``Event``, ``Timeout``) and detached
processes are classes of its own with SimPy's attributes and behaviour, so that the compiled build makes them
native. These tests fail loudly, naming what moved, when the installed SimPy no longer has what those copies rely
on, and check on random models that the copies run events as SimPy does; pyproject's ``simpy`` range names the
versions they pass on. A last test keeps every other module of meshsim off SimPy's private attributes.
"""
from __future__ import annotations

import hashlib
import inspect
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import simpy
from simpy import core as simpy_core
from simpy import events as simpy_events
from simpy.events import NORMAL, PENDING

from meshsim.core import sim
from meshsim.core.sim import Environment, event_value, start_detached

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())  # (any tests/ depth)
PACKAGE = ROOT / "meshsim"
SIM = PACKAGE / "core" / "sim.py"

#: blake2b-64 of the source of each SimPy function sim.py copies or relies on, as of SimPy 4.1.x. A change
#: means sim.py's copy may no longer do what SimPy does: compare the two, update sim.py, then this digest.
SOURCE_DIGESTS = {
    "Environment.__init__": "2623ba499920e127",
    "Environment.peek": "e97b8f5cee85ba1e",
    "Environment.run": "5734be13686b94c1",
    "Environment.schedule": "d30e1d5ab4884c30",
    "Environment.step": "e4d0446cd6661e25",
    "Event.__and__": "b105032a05743983",
    "Event.__init__": "e9721128a6593c77",
    "Event.__or__": "cc8675d734265cec",
    "Event._desc": "9fb63d2f18c699f3",
    "Event.fail": "ee4ef3560022e391",
    "Event.succeed": "b9c0a97e668e82d7",
    "Event.trigger": "8a862acf311964ca",
    "Initialize.__init__": "17dd778f37fc6829",
    "Interruption._interrupt": "e152435f76e8d480",
    "Process.__init__": "a98e1dbe4c802cef",
    "Process._resume": "41f7adcde7ebd506",
    "Process.interrupt": "58ab59165345450f",
    "Timeout.__init__": "af0652aefaac0c7a",
    "Timeout._desc": "3145aee9af101315",
}


def _source(qualname: str):
    cls, name = qualname.split(".")
    owner = getattr(simpy_core, cls, None) or getattr(simpy_events, cls)
    return textwrap.dedent(inspect.getsource(vars(owner)[name]))


def _digest(qualname: str) -> str:
    return hashlib.blake2b(_source(qualname).encode(), digest_size=8).hexdigest()


def _loud(what: str) -> str:
    return (f"SimPy {simpy.__version__} changed {what}: meshsim/core/sim.py writes SimPy's internals out "
            "(issue 22) and relies on them; compare its copy with SimPy's, update it, then this test "
            "and pyproject's simpy range")


@pytest.mark.parametrize("qualname", sorted(SOURCE_DIGESTS))
def test_copied_simpy_code_is_unchanged(qualname):
    assert _digest(qualname) == SOURCE_DIGESTS[qualname], _loud(f"{qualname}")


def test_private_attributes_are_where_sim_expects_them():
    env = simpy.Environment()
    missing = [f"Environment.{a}" for a in sim.SIMPY_INTERNALS["Environment"] if not hasattr(env, a)]
    ev = simpy_events.Event(env)
    if getattr(ev, "_value", None) is not PENDING:
        missing.append("Event._value (PENDING before it triggers)")
    ev.succeed(7)
    if getattr(ev, "_ok", None) is not True or getattr(ev, "_value", None) != 7:
        missing.append("Event._ok / Event._value (set by succeed)")
    ev.defused = True
    if getattr(ev, "_defused", None) is not True:
        missing.append("Event._defused (set by the defused setter)")
    t = env.timeout(3, "v")
    if getattr(t, "_delay", None) != 3:
        missing.append("Timeout._delay")

    def gen():
        yield env.timeout(1)

    p = env.process(gen())
    for a in sim.SIMPY_INTERNALS["Process"]:
        if not hasattr(p, a):
            missing.append(f"Process.{a}")
    assert not missing, _loud("where it keeps " + ", ".join(missing))


def test_schedule_pushes_time_priority_id_event():
    """sim.py pushes ``(time, priority, event id, event)`` onto ``_queue`` itself, ids from ``next(_eid)``."""
    env = simpy.Environment(5)
    ev = simpy_events.Event(env)
    env.schedule(ev, NORMAL, 2)
    entry = env._queue[-1]
    assert isinstance(env._queue, list) and len(entry) == 4, _loud("the shape of its event queue")
    assert entry[0] == 7 and entry[1] == NORMAL and entry[3] is ev, _loud("the entries of its event queue")
    assert next(env._eid) == entry[2] + 1, _loud("how event ids are drawn (_eid)")


def _model(env) -> list:
    """A small model that uses every path sim.py writes out: timeouts, processes, callback events, failures."""
    log: list = []

    def cb(ev):
        log.append(("cb", env.now, ev.value))

    def child(i):
        log.append(("child", i, env.now))
        yield env.timeout(0.5 * i)
        return i * 10

    def parent():
        for i in range(3):
            v = yield env.process(child(i))
            log.append(("got", v, env.now))
        ev = simpy_events.Event(env)
        ev._ok, ev._value = True, "late"
        ev.callbacks.append(cb)
        env.schedule(ev, NORMAL, 1.25)
        try:
            yield env.timeout(0.25) & env.timeout(0.5)
        except Exception as exc:  # pragma: no cover - the condition holds
            log.append(("err", exc))
        log.append(("both", env.now))

    env.process(parent())
    for k in range(4):
        if isinstance(env, Environment):
            env.call_later(0.1 * k, cb, k)
        else:
            e = simpy_events.Event(env)
            e._ok, e._value = True, k
            e.callbacks.append(cb)
            env.schedule(e, NORMAL, 0.1 * k)
    env.run(until=10)
    log.append(("end", env.now, sorted((t, p, i) for t, p, i, _e in env._queue)))
    return log


def test_sim_environment_runs_events_as_simpy_does():
    assert _model(Environment(seed=1)) == _model(simpy.Environment()), \
        _loud("the order in which it runs events")


def test_failed_event_raises_like_simpy():
    def boom(env):
        yield env.timeout(1)
        raise KeyError("x")

    for env in (Environment(seed=0), simpy.Environment()):
        env.process(boom(env))
        with pytest.raises(KeyError):
            env.run()


def test_start_detached_runs_now_and_leaves_its_table():
    env = Environment(seed=0)
    table: dict = {}
    seen = []

    def work():
        seen.append(("start", env.now))
        v = yield env.timeout(2, "two")
        seen.append((v, env.now))

    proc = start_detached(env, work(), table)
    assert seen == [("start", 0)] and proc in table  # ran to its first yield inside the call
    assert env.active_process is None
    env.run()
    assert seen == [("start", 0), ("two", 2)] and table == {}
    assert not env._queue  # no end event of its own


def test_start_detached_interrupt_and_error():
    env = Environment(seed=0)
    table: dict = {}

    def sleeper():
        yield env.timeout(5)

    proc = start_detached(env, sleeper(), table)
    env.call_later(1, lambda _e: proc.interrupt("stop"))
    env.run()
    assert table == {} and not proc.is_alive  # interrupted at 1: it left its table at once

    def failing():
        yield env.timeout(1)
        raise ValueError("bad")

    start_detached(env, failing(), table)
    with pytest.raises(ValueError, match="bad"):
        env.run()


def test_event_value_reads_the_value():
    env = Environment(seed=0)
    got = []
    env.call_later(1, lambda ev: got.append(event_value(ev)), ("m", 3))
    env.run()
    assert got == [("m", 3)] and env.now == 1


def _simpy_modules() -> list:
    return [simpy_core, simpy_events] + [getattr(simpy.resources, m) for m in ("base", "container", "resource",
                                                                              "store")]


def _simpy_classes() -> set[str]:
    return {n for mod in _simpy_modules() for n, obj in vars(mod).items()
            if isinstance(obj, type) and obj.__module__.startswith("simpy")}


def _simpy_private_names() -> set[str]:
    """Every ``_``-prefixed (not dunder) attribute SimPy's classes and objects have."""
    names: set[str] = set()
    for mod in _simpy_modules():
        for obj in vars(mod).values():
            if isinstance(obj, type) and obj.__module__.startswith("simpy"):
                for klass in obj.__mro__:
                    if klass.__module__.startswith("simpy"):
                        names |= set(vars(klass))
    env = simpy.Environment()
    ev = env.event()
    ev.succeed()
    ev.defused = True
    names |= set(vars(env)) | set(vars(ev)) | set(vars(env.timeout(1)))
    names |= set(vars(env.process(x for x in ())))
    # namedtuple's own API (SimPy's ConditionValue and friends), not SimPy's state
    names -= {"_asdict", "_make", "_replace", "_fields", "_field_defaults", "_abc_impl"}
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _violations(text: str) -> list[tuple[int, str]]:
    """``obj._name`` (``obj`` not ``self``/``cls``) or ``getattr(obj, "_name")`` with ``_name`` one of SimPy's
    private attributes; ``self._name`` too in a module that subclasses one of SimPy's classes."""
    names = _simpy_private_names()
    alt = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    attr = re.compile(rf"(\w*)[)\]]?\.({alt})\b")
    by_name = re.compile(rf"\b(?:get|set|has|del)attr\([^,]+,\s*['\"]({alt})['\"]")
    subclass = re.compile(rf"^\s*class \w+\([^)]*\b({'|'.join(sorted(_simpy_classes()))})\b", re.M)
    own_too = subclass.search(text) is not None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        if by_name.search(code) or any(m.group(1) not in ("self", "cls") or own_too for m in attr.finditer(code)):
            out.append((n, line.strip()))
    return out


def test_the_scan_finds_private_use():
    assert {"_now", "_queue", "_eid", "_ok", "_value", "_resume", "_generator"} <= _simpy_private_names()
    found = _violations("t = self.env._now\nev._value = 1\nx = getattr(ev, '_ok', None)\nf()._queue\n"
                        "self._delay = 3\nself._now = 1\n")
    assert [n for n, _ in found] == [1, 2, 3, 4]  # a class of its own may name its attributes as it likes
    assert [n for n, _ in _violations("class P(Process):\n    def f(self):\n        self._resume(e)\n")] == [3]


def test_no_simpy_private_attribute_outside_sim():
    bad = []
    for f in sorted(PACKAGE.rglob("*.py")):
        if f != SIM:
            bad += [f"{f.relative_to(ROOT)}:{n}: {line}" for n, line in _violations(f.read_text())]
    assert not bad, ("SimPy's private attributes outside meshsim/core/sim.py (put the access behind a named "
                     "function there, guarded by this file's tests):\n" + "\n".join(bad))


# -- sim.py's own clock and events (issue 33): SimPy's, written out as classes of meshsim -------------------

def _random_model(env, script) -> list:
    """Processes that wait on timeouts, on events others succeed or fail, on ``|`` and ``&`` of them, and get
    interrupted; the same ``script`` gives the same log on SimPy's clock and on sim.Environment."""
    log: list = []
    events = [env.event() for _ in range(4)]
    procs: list = []

    def worker(i, steps):
        for kind, x in steps:
            try:
                if kind == "sleep":
                    v = yield env.timeout(x, ("t", i))
                elif kind == "wait":
                    v = yield events[x % 4]
                elif kind == "any":
                    v = yield events[x % 4] | env.timeout(x)
                    v = sorted(repr(type(e).__name__) for e in v)
                elif kind == "all":
                    v = yield env.timeout(x / 2) & env.timeout(x)
                    v = sorted(v.values(), key=repr)
                elif kind == "fire":
                    ev = events[x % 4]
                    if not ev.triggered:
                        ev.succeed((i, env.now)) if x % 3 else ev.fail(KeyError(i))
                    v = ev.triggered
                else:  # interrupt another worker
                    p = procs[x % len(procs)]
                    if p.is_alive and p is not env.active_process:
                        p.interrupt(("by", i))
                    v = None
                log.append((i, kind, env.now, v))
            except simpy.Interrupt as irq:
                log.append((i, "interrupted", env.now, irq.cause))
            except KeyError as exc:
                log.append((i, "failed", env.now, exc.args))
        return i

    for i, steps in enumerate(script):
        procs.append(env.process(worker(i, steps)))
    for k in range(3):
        if isinstance(env, Environment):
            env.call_later(0.5 * k, lambda e: log.append(("cb", env.now, e.value)), k)
        else:
            e = simpy_events.Event(env)
            e._ok, e._value = True, k
            e.callbacks.append(lambda e: log.append(("cb", env.now, e.value)))
            env.schedule(e, NORMAL, 0.5 * k)
    try:
        env.run(until=env.all_of(procs))
    except (RuntimeError, KeyError) as exc:  # a worker left waiting on an event nobody fires; a failure nobody
        log.append(("raised", type(exc).__name__, str(exc)[:40]))  # waited on (the run stops with it)
    log.append(("end", env.now, len(env._queue)))
    return log


_op = st.tuples(st.sampled_from(["sleep", "wait", "any", "all", "fire", "fire", "interrupt"]),
                st.integers(0, 6))


@settings(max_examples=120, deadline=None)
@given(script=st.lists(st.lists(_op, max_size=6), min_size=1, max_size=5))
def test_sim_clock_and_events_run_as_simpy_does(script):
    assert _random_model(Environment(seed=1), script) == _random_model(simpy.Environment(), script), \
        _loud("what its events do")


def test_sim_event_api_matches_simpy():
    for env in (Environment(seed=0), simpy.Environment()):
        ev = env.event()
        assert not ev.triggered and not ev.processed and not ev.defused
        with pytest.raises(AttributeError, match="not yet available"):
            ev.value
        ev.succeed(3)
        with pytest.raises(RuntimeError, match="already been triggered"):
            ev.succeed(4)
        with pytest.raises(TypeError):
            env.event().fail("not an exception")
        with pytest.raises(ValueError, match="Negative delay"):
            env.timeout(-1)
        assert env.peek() == 0
        env.step()
        assert ev.processed and ev.ok and ev.value == 3
        assert env.peek() == float("inf")
        with pytest.raises(simpy_core.EmptySchedule):
            env.step()
        late = env.event()
        env.timeout(2).callbacks.append(lambda _e: late.succeed("x"))
        assert env.run(until=late) == "x" and env.now == 2
        with pytest.raises(ValueError, match="must be greater"):
            env.run(until=1)
        assert repr(env.timeout(1, "v")).startswith("<Timeout(1, value=v) object at")
