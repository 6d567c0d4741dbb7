"""What the issue-22 speed-ups must keep: a task state's copy is the whole
state and shares no list, and the fake backend's per-task memo changes no
draw (a task it forgot reads the same as before)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.backends import make_backend
from meshsim.core.calls import Request, TaskRef
from meshsim.backends.fake import FakeBackend
from meshsim.protocols.execution import Output, TaskState

ROOT = Path(__file__).resolve().parents[2]


def test_task_state_copy_is_every_field_and_shares_no_container():
    t = TaskRef(index=3, id="t3", type="algebra", required=("a", "b")).info()
    X = TaskState(task=t, R=("a", "b"), C={"a"}, Y=[Output("A1", ("a",), "contribute", "x")], P=["A1"],
                  probe=True, leg_hops=2, visits=["A1", "A2"], actions=[("A1", "infer")])
    Y = X.copy()
    assert Y == X and [f.name for f in dataclasses.fields(Y)] == [f.name for f in dataclasses.fields(X)]
    for name in ("C", "Y", "P", "visits", "actions"):
        assert getattr(Y, name) is not getattr(X, name), name


_PROTO = make_backend({"kind": "fake", "profile": "fake-default"}, 7, ROOT)


@settings(max_examples=15, deadline=None)
@given(seeds=st.lists(st.integers(0, 2 ** 62), min_size=1, max_size=6), forget_between=st.booleans())
def test_fake_memo_changes_no_draw(seeds, forget_between):
    task = TaskRef(index=1, id="t1", type="algebra", answer="42", required=("algebra", "arithmetic"),
                   dataset="math")

    def reqs():
        for k, s in enumerate(seeds):
            for kind, ctx in (("contribute", {}), ("review", {"action": "finalize", "output_text": "?"})):
                yield Request(kind=kind, agent=f"A{k % 3}", model="strong" if k % 2 else "weak", task=task,
                              abilities=("algebra",), context=ctx, sample=k % 3, seed=s)

    fresh = []
    for r in reqs():  # a new backend per call: nothing memoized
        b = FakeBackend(_PROTO.profile, _PROTO.seed)
        fresh.append(b.complete_sync(r))
    b = FakeBackend(_PROTO.profile, _PROTO.seed)
    memo = []
    for r in reqs():
        memo.append(b.complete_sync(r))
        if forget_between:
            b.forget(task.id)
    assert [(x.fields.get("score"), x.correct, x.completion_tokens) for x in memo] == \
           [(x.fields.get("score"), x.correct, x.completion_tokens) for x in fresh]


# -- lazily queued deadlines (meshsim.core.sim.Deadlines) fire exactly where timers would ---------------

_step = st.tuples(st.sampled_from(["add", "add", "cancel", "other", "wait"]),
                  st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0]), st.integers(0, 40))


def _deadline_run(script, lazy: bool) -> list:
    from meshsim.core.sim import Deadlines, Environment

    env = Environment(1)
    log: list = []
    handles: list = []

    def fired(v):
        log.append((env.now, "deadline", v))
        if v < 1000 and v % 5 == 0:  # a deadline that sets another (a retransmission's new timeout)
            add(1.0, v + 1000)

    # two owners (two agents' acks): their deadlines of one delay share a line
    owners = [Deadlines(env, fired), Deadlines(env, fired)]

    def add(delay, v):
        if lazy:
            handles.append(owners[v % 2].add(delay, v))
        else:
            ev = env.call_later(delay, lambda e: fired(e.value), v)
            handles.append(ev)

    def cancel(k):
        if handles:
            h = handles[k % len(handles)]
            if lazy:
                Deadlines.cancel(h)
            elif h.callbacks:
                h.callbacks.clear()

    def driver():
        for n, (op, delay, k) in enumerate(script):
            if op == "add":
                add(delay if k % 7 else 1.0, n)
            elif op == "cancel":
                cancel(k)
            elif op == "other":
                env.call_later(delay, lambda e, n=n: log.append((env.now, "other", n)))
            else:
                yield env.timeout(delay / 2)

    env.process(driver())
    env.run()
    return log


@settings(max_examples=150, deadline=None)
@given(script=st.lists(_step, max_size=60))
def test_lazy_deadlines_fire_where_timers_would(script):
    assert _deadline_run(script, lazy=True) == _deadline_run(script, lazy=False)


class _StubNode:
    def __init__(self):
        from meshsim.core.sim import Environment

        self.env = Environment(1)
        self.alive = True
        self.reliable = None
        self.links: dict = {}  # no link: Reliable falls back to send()

    def on(self, *a, **kw):
        pass

    def send(self, *a, **kw):
        return True


@settings(max_examples=200, deadline=None)
@given(arrivals=st.lists(st.tuples(st.sampled_from(["A1", "A2"]), st.integers(1, 30)), max_size=80))
def test_reliable_dedup_is_a_set(arrivals):
    """The receiver's memory of handled request ids (sorted arrays, issue 22) answers as a set would,
    whatever order copies arrive in."""
    from meshsim.net.messages import Message
    from meshsim.net.reliable import Reliable

    r = Reliable(_StubNode())
    seen: set = set()
    for src, rid in arrivals:
        first = (src, rid) not in seen
        seen.add((src, rid))
        assert r.accept(Message("task", src, "B", None, 64, 0.0, rid)) is first
