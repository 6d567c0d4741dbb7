"""What the issue-22 speed-ups must keep: a task state's copy is the whole
state and shares no list, and the fake backend's per-task memo changes no
draw (a task it forgot reads the same as before)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.backends import make_backend
from meshsim.backends.base import Request, TaskRef
from meshsim.backends.fake import FakeBackend
from meshsim.protocols.execution import Output, TaskState

ROOT = Path(__file__).resolve().parents[1]


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
