"""MeshHeal rules, one test each, named after the paper line they check.

Paper: shared/papers/meshheal-2609.29015.md (Sec. 4, Alg. 1-2, App. B.5).
"""
from __future__ import annotations

import pytest

from meshsim.protocols.meshheal.detector import (DetectorParams, PeerSummary, RelativeDetector, median,
                                                 percentile)
from meshsim.protocols.meshheal.review import committee_triggers, median3, sample_sd
from meshsim.core.types import RoutingState

N, W, I = RoutingState.NORMAL, RoutingState.WATCHED, RoutingState.ISOLATED
T = "algebra"


def peers_example():
    """Two normal neighbours: j1 and j2 with μ for (T, s) and x̄ for several abilities of T."""
    return {
        "j1": {(T, "s"): PeerSummary(mu=0.9, xbar=0.0, n=5), (T, "s2"): PeerSummary(mu=0.8, xbar=0.1, n=5)},
        "j2": {(T, "s"): PeerSummary(mu=0.8, xbar=-0.1, n=5), (T, "s3"): PeerSummary(mu=0.7, xbar=0.05, n=5),
               ("geometry", "s"): PeerSummary(mu=0.2, xbar=9.0, n=5)},  # other type: not pooled
    }


def test_sec422_hand_computed_detector_example():
    """Sec. 4.2.2 / App. B.5, worked by hand.

    reference q̄ = (0.9 + 0.8)/2 = 0.85; scores 0.85, 0.35, 0.15, 0.15 give shortfalls
    0, 0.5, 0.7, 0.7. Pool of normal neighbours' x̄ for type T: [0.0, 0.1, -0.1, 0.05]
    -> m = 0.025, p25 = -0.025, spread = max(0.05, 0.10) = 0.10.
    After 3 matched observations x̄ = 0.4 -> z = 3.75 >= α and >= β (first crossing):
    normal -> watched. Next: x̄ = 0.475 -> z = 4.5, second consecutive crossing -> isolated.
    """
    d = RelativeDetector(DetectorParams(shortfall_scope="key", count_scope="key"))
    peers = peers_example()
    u1 = d.update(T, "s", 0.85, peers)
    assert u1.shortfall == pytest.approx(0.0) and u1.z is None and d.state is N  # < 3 observations
    u2 = d.update(T, "s", 0.35, peers)
    assert u2.shortfall == pytest.approx(0.5) and u2.z is None
    u3 = d.update(T, "s", 0.15, peers)
    assert u3.xbar == pytest.approx(0.4)
    assert u3.m == pytest.approx(0.025) and u3.p25 == pytest.approx(-0.025)
    assert u3.z == pytest.approx(3.75)
    assert d.state is W and u3.changed
    u4 = d.update(T, "s", 0.15, peers)
    assert u4.xbar == pytest.approx(0.475) and u4.z == pytest.approx(4.5)
    assert d.state is I and u4.changed


def test_sec422_percentile_and_median_are_linear_interpolation():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert percentile([-0.1, 0.0, 0.05, 0.1], 25) == pytest.approx(-0.025)
    assert percentile([1.0], 25) == 1.0


def _detector(**kw):
    return RelativeDetector(DetectorParams(**kw))


def _feed(d, scores, peers):
    return [d.update(T, "s", q, peers) for q in scores]


def _flat_peers(xbars=(0.0, 0.0, 0.0, 0.0), mu=0.9):
    # median 0, p25 0 -> spread floor 0.10: z = 10 * x̄ (reference 0.9)
    return {f"j{k}": {(T, "s"): PeerSummary(mu=mu, xbar=x, n=9)} for k, x in enumerate(xbars)}


def test_sec422_fewer_than_three_observations_leave_state_unchanged():
    d = _detector()
    ups = _feed(d, [0.0, 0.0], _flat_peers())
    assert all(u.z is None for u in ups) and d.state is N


def test_sec422_empty_peer_set_leaves_state_unchanged():
    d = _detector()
    ups = _feed(d, [0.0] * 5, {})
    assert all(not u.matched and u.z is None for u in ups) and d.state is N
    # peers with a reference but no x̄ yet: the pool C_{i,T} is empty
    peers = {"j": {(T, "s"): PeerSummary(mu=0.9, xbar=None, n=1)}}
    ups = _feed(d, [0.0] * 5, peers)
    assert all(u.z is None for u in ups) and d.state is N


@pytest.mark.parametrize("scope", ["key", "agent"])
def test_sec422_normal_to_watched_at_alpha_and_back_below_alpha(scope):
    # reference 0.9, shortfalls x = 0.9 - q; z = 10 * x̄
    d = _detector(shortfall_scope=scope, count_scope=scope)
    peers = _flat_peers()
    _feed(d, [0.9, 0.9], peers)
    u = d.update(T, "s", 0.9 - 0.45, peers)  # x̄ = 0.15 -> z = 1.5: alpha <= z < beta
    assert u.z == pytest.approx(1.5) and d.state is W
    u = d.update(T, "s", 0.9 + 0.15, peers)  # x̄ = 0.075 -> z = 0.75 < alpha
    assert u.z == pytest.approx(0.75) and d.state is N


def test_sec422_two_consecutive_beta_crossings_isolate_and_counter_resets():
    d = _detector()
    peers = _flat_peers()
    _feed(d, [0.9, 0.9], peers)
    d.update(T, "s", 0.0, peers)  # x̄ = 0.3, z = 3 >= beta: first crossing (watched)
    assert d.state is W
    d.update(T, "s", 1.9, peers)  # x = -1 -> x̄ = -0.025: below beta, count resets
    assert d.state is N
    d.update(T, "s", 0.0, peers)  # x̄ = 0.16 -> z = 1.6: watched, count still 0
    assert d.state is W
    u = d.update(T, "s", 0.0, peers)  # x̄ = 1.7/6 -> z = 2.83: one crossing only
    assert u.z == pytest.approx(10 * 1.7 / 6) and d.state is W
    u = d.update(T, "s", 0.0, peers)  # second consecutive crossing
    assert d.state is I and u.changed


def test_sec422_isolated_to_watched_after_one_update_below_beta_then_normal_below_alpha():
    d = _detector(window=4)
    peers = _flat_peers()
    _feed(d, [0.0, 0.0, 0.0, 0.0], peers)
    assert d.state is I
    # recovery probes: good outputs flush the window of 4
    states = [d.update(T, "s", 0.9, peers) for _ in range(6)]
    zs = [u.z for u in states]
    # isolated until z < beta once, then watched; normal at a later update with z < alpha
    first_below_beta = next(k for k, z in enumerate(zs) if z < 2.0)
    assert states[first_below_beta].state is W
    later = [u for u in states[first_below_beta + 1:] if u.z < 1.2]
    assert later and later[0].state is N


def test_sec422_window_keeps_latest_eight_shortfalls():
    d = _detector(shortfall_scope="key")
    peers = _flat_peers()
    _feed(d, [0.9] * 20 + [0.0], peers)
    assert len(d.shortfalls[(T, "s")]) == 8
    assert d.xbar((T, "s")) == pytest.approx(0.9 / 8)


def test_alg2_line3_median_and_sample_sd_of_three_calls():
    assert median3([0.2, 0.9, 0.8]) == 0.8
    # sample sd (n - 1), App. B.5
    assert sample_sd([0.0, 1.0, 1.0]) == pytest.approx(0.57735, rel=1e-4)


@pytest.mark.parametrize("q0,s_u,watched,probe,expected", [
    (0.40, 0.0, False, False, ["low_score"]),  # q0 <= tau_to (boundary included)
    (0.41, 0.0, False, False, []),
    (0.90, 0.55, False, False, ["disagreement"]),  # s_u >= sigma_com (boundary included)
    (0.90, 0.54, False, False, []),
    (0.90, 0.0, True, False, ["watched"]),
    (0.90, 0.0, False, True, ["probe"]),
    (0.10, 0.60, True, True, ["low_score", "disagreement", "watched", "probe"]),
])
def test_alg2_line4_committee_triggers(q0, s_u, watched, probe, expected):
    assert committee_triggers(q0, s_u, watched, probe, tau=0.40, sigma=0.55) == expected
