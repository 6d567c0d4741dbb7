"""``meshsim.core.sim.randbelow`` and ``shuffle`` draw exactly what ``random.Random.randrange`` and ``shuffle`` do
(issue 33: written out so that the compiled build runs them natively; a run's outputs depend on every draw).
``build_compiled.py --check`` runs this file on the build too."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.core.sim import randbelow, shuffle


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**64), sizes=st.lists(st.integers(1, 2**70), min_size=1, max_size=40))
def test_randbelow_is_randrange_draw_for_draw(seed, sizes):
    ours, theirs = random.Random(seed), random.Random(seed)
    assert [randbelow(ours, n) for n in sizes] == [theirs.randrange(n) for n in sizes]
    assert ours.getstate() == theirs.getstate()  # the stream goes on from the same place


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**64), items=st.lists(st.integers(), max_size=60), again=st.integers(0, 3))
def test_shuffle_is_random_shuffle(seed, items, again):
    ours, theirs = random.Random(seed), random.Random(seed)
    a, b = list(items), list(items)
    for _ in range(again + 1):
        shuffle(ours, a)
        theirs.shuffle(b)
    assert a == b and ours.getstate() == theirs.getstate()


def test_an_empty_range_is_refused_as_randrange_does():
    for n in (0, -3):
        with pytest.raises(ValueError):
            random.Random(1).randrange(n)
        with pytest.raises(ValueError, match="empty range"):
            randbelow(random.Random(1), n)
