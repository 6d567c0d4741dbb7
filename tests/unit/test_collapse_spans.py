"""The span counter behind every span of the collapse summary (docs/outputs.md, ``collapse``).

A span is the half-open run of tasks [start, end) during which a condition
holds; ``Spans.set(key, on, k)`` reports the condition at task k."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from meshsim.observe.collapse import Spans


def test_a_span_opens_once_closes_once_and_counts_its_tasks():
    s = Spans()
    s.set("x", True, 3)
    s.set("x", True, 5)  # still holding: the span started at 3 stays open
    assert s.open == {"x": 3} and s.total() == 0
    s.set("x", False, 7)
    s.set("x", False, 8)  # already off: nothing to close
    s.set("y", False, 2)  # never on: nothing recorded
    assert s.closed == [("x", 3, 7)] and s.tasks == {"x": 4} and not s.open
    s.set("x", True, 10)
    s.close_all(12)
    assert s.closed == [("x", 3, 7), ("x", 10, 12)]
    assert s.tasks == {"x": 6} and s.first == {"x": 3} and s.total() == 6


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.booleans()), max_size=30))
def test_counts_equal_the_tasks_the_condition_held(reports):
    """Report (key, on) at tasks 1, 2, ...; the condition holds until reported otherwise."""
    s = Spans()
    holds = {"a": False, "b": False}
    held = {"a": set(), "b": set()}
    for k, (key, on) in enumerate(reports, start=1):
        holds[key] = on
        s.set(key, on, k)
        for x in holds:
            if holds[x]:
                held[x].add(k)
    end = len(reports) + 1
    s.close_all(end)
    assert not s.open
    for x in "ab":
        assert s.tasks.get(x, 0) == len(held[x])
        assert s.first.get(x) == (min(held[x]) if held[x] else None)
        covered = {t for key, k0, k1 in s.closed if key == x for t in range(k0, k1)}
        assert covered == held[x]
    assert s.total() == len(held["a"]) + len(held["b"])
