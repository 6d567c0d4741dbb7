"""The fakes' per-call stream is the same on the pure and the compiled path (issue 33 item 3).

``profiles.SplitMix64`` is the reference; ``_rng64.MachineSplitMix64`` computes it in wrapping 64-bit integers and
is taken only where its module is compiled (tests/benchmarks/build_compiled.py). Interpreted, these tests check the
reference and the choice; compiled (``build_compiled.py --check`` runs this file with the build in place and
MESHSIM_REQUIRE_COMPILED=1), they check the machine stream draw for draw against the reference.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings, strategies as st

from meshsim.backends import _rng64
from meshsim.backends.profiles import SplitMix64, new_rng

COMPILED = _rng64.machine_arithmetic()
needs_build = pytest.mark.skipif(not COMPILED and not os.environ.get("MESHSIM_REQUIRE_COMPILED"),
                                 reason="the compiled build is not in place (tests/benchmarks/build_compiled.py)")


def test_reference_is_splitmix64():
    # SplitMix64's published outputs for seed 1234567 (Vigna's splitmix64.c), as random() sees them: the top 53 bits
    r = SplitMix64(1234567)
    assert [int(r.random() * 2 ** 53) for _ in range(3)] == [
        6457827717110365317 >> 11, 3203168211198807973 >> 11, 9817491932198370423 >> 11]


def test_the_fakes_draw_from_the_machine_stream_only_where_it_is_compiled():
    assert (new_rng is _rng64.MachineSplitMix64) == COMPILED
    assert (new_rng is SplitMix64) == (not COMPILED)


@needs_build
def test_compiled_build_wraps_at_64_bits():
    assert COMPILED, "MESHSIM_REQUIRE_COMPILED is set but meshsim.backends._rng64 is not compiled"


@needs_build
@settings(max_examples=300, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2 ** 70), n=st.integers(min_value=1, max_value=10 ** 6),
       mu=st.floats(-10, 10), sigma=st.floats(0, 10))
def test_machine_stream_is_the_reference_draw_for_draw(seed, n, mu, sigma):
    ref, fast = SplitMix64(seed), _rng64.MachineSplitMix64(seed)
    for _ in range(5):
        assert fast.random() == ref.random()
        assert fast.gauss(mu, sigma) == ref.gauss(mu, sigma)
        assert fast.randrange(n) == ref.randrange(n)
