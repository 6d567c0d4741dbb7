"""Tests for meshsim.graphs.robustness (r-robustness, SAC paper Def. 3.3; F-local model)."""
from __future__ import annotations

import itertools
import math
import random

import networkx as nx
import pytest

from meshsim.core.errors import InputError, MeshsimError
from meshsim.graphs.robustness import (
    EXACT_MAX_N,
    byzantine_neighbour_counts,
    f_local_violations,
    is_f_local,
    is_r_robust,
    min_reach,
    robustness,
    robustness_bounds,
    violating_pair,
)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def _reach(G, S):
    return max(sum(1 for u in G.adj[v] if u != v and u not in S) for v in S)


def _naive_min_reach(G):
    """Literal Def. 3.3: all 3^n assignments of nodes to (neither, S1, S2)."""
    nodes = list(G.nodes)
    if len(nodes) < 2:
        return 0
    best = math.inf
    for assign in itertools.product((0, 1, 2), repeat=len(nodes)):
        s1 = {v for v, a in zip(nodes, assign) if a == 1}
        s2 = {v for v, a in zip(nodes, assign) if a == 2}
        if s1 and s2:
            best = min(best, max(_reach(G, s1), _reach(G, s2)))
    return best


def _random_graphs(count, n_max, seed):
    """Seeded G(n, p) graphs with varied n and p (every generator seeded)."""
    rng = random.Random(seed)
    graphs = []
    for k in range(count):
        n = rng.randint(2, n_max)
        p = rng.choice([0.15, 0.3, 0.45, 0.6, 0.75, 0.9, rng.random()])
        graphs.append(nx.gnp_random_graph(n, p, seed=seed * 1000 + k))
    return graphs


def _check_witness(G, pair, r):
    s1, s2 = pair
    assert s1 and s2 and not (s1 & s2)
    assert s1 <= set(G.nodes) and s2 <= set(G.nodes)
    assert _reach(G, s1) < r and _reach(G, s2) < r


# --------------------------------------------------------------------------
# known values
# --------------------------------------------------------------------------

@pytest.mark.parametrize("n", range(2, 13))
def test_complete_graph_is_ceil_half_robust(n):
    G = nx.complete_graph(n)
    r = math.ceil(n / 2)
    assert robustness(G) == r
    assert min_reach(G, method="exact") == r
    assert is_r_robust(G, r)
    assert not is_r_robust(G, r + 1)
    assert not is_r_robust(G, r + 1, method="exact")


@pytest.mark.parametrize("n", [2, 3, 4, 7, 10, 12])
def test_complete_graph_milp(n):
    G = nx.complete_graph(n)
    r = math.ceil(n / 2)
    assert min_reach(G, method="milp") == r
    assert robustness(G, method="milp") == r
    assert is_r_robust(G, r, method="milp")
    assert not is_r_robust(G, r + 1, method="milp")
    # violating_pair(heuristic=False) always runs the solver (no bound shortcuts)
    assert violating_pair(G, r, method="milp", heuristic=False) is None
    _check_witness(G, violating_pair(G, r + 1, method="milp", heuristic=False), r + 1)


@pytest.mark.parametrize("n", range(3, 11))
@pytest.mark.parametrize("make", [nx.path_graph, nx.cycle_graph,
                                  lambda n: nx.star_graph(n - 1)],
                         ids=["path", "ring", "star"])
def test_sparse_connected_families_are_1_robust(make, n):
    G = make(n)
    assert G.number_of_nodes() == n
    if make is nx.cycle_graph and n == 3:
        # the 3-ring is K_3, which is ceil(3/2) = 2-robust
        assert robustness(G, method="exact") == robustness(G, method="milp") == 2
        return
    for method in ("auto", "exact", "milp"):
        assert robustness(G, method=method) == 1
        assert min_reach(G, method=method) == 1
        assert is_r_robust(G, 1, method=method)
        assert not is_r_robust(G, 2, method=method)
    _check_witness(G, violating_pair(G, 2, method="exact"), 2)
    _check_witness(G, violating_pair(G, 2, method="milp"), 2)


def test_k2_and_small_cases():
    assert robustness(nx.path_graph(2)) == 1
    assert robustness(nx.empty_graph(0)) == 0
    assert robustness(nx.empty_graph(1)) == 0      # convention: one node -> 0
    assert min_reach(nx.empty_graph(1), method="milp") == 0
    assert not is_r_robust(nx.empty_graph(1), 1)
    assert is_r_robust(nx.empty_graph(1), 0)
    assert violating_pair(nx.empty_graph(1), 1) is None


@pytest.mark.parametrize("method", ["auto", "exact", "milp"])
def test_disconnected_is_0_robust(method):
    G = nx.disjoint_union(nx.complete_graph(5), nx.complete_graph(6))
    assert robustness(G, method=method) == 0
    assert min_reach(G, method=method) == 0
    assert not is_r_robust(G, 1, method=method)
    assert is_r_robust(G, 0, method=method)
    _check_witness(G, violating_pair(G, 1, method=method), 1)
    assert robustness(nx.empty_graph(4), method=method) == 0


def test_every_graph_is_0_robust():
    for G in _random_graphs(10, 8, seed=7):
        assert is_r_robust(G, 0)


def test_arbitrary_hashable_labels_and_multigraph():
    G = nx.relabel_nodes(nx.complete_graph(7), {i: ("agent", str(i)) for i in range(7)})
    assert robustness(G, method="exact") == robustness(G, method="milp") == 4
    pair = violating_pair(G, 5, method="milp")
    _check_witness(G, pair, 5)
    assert all(isinstance(v, tuple) for v in pair[0] | pair[1])
    # parallel edges and self-loops do not change neighbourhoods
    M = nx.MultiGraph(nx.cycle_graph(6))
    M.add_edges_from([(0, 1), (2, 3), (4, 4)])
    assert robustness(M, method="exact") == robustness(M, method="milp") == 1
    H = nx.complete_graph(6)
    H.add_edges_from((v, v) for v in H)
    assert robustness(H, method="exact") == robustness(H, method="milp") == 3


def test_circulant_graphs():
    # k-circulant C_n(1..k) is 2k-regular; small cases checked against brute force
    for n, k in [(7, 1), (8, 2), (9, 2), (9, 3)]:
        G = nx.circulant_graph(n, range(1, k + 1))
        expected = _naive_min_reach(G)
        assert robustness(G, method="exact") == expected
        assert robustness(G, method="milp") == expected


# --------------------------------------------------------------------------
# cross-checks
# --------------------------------------------------------------------------

def test_exact_matches_literal_definition():
    for G in _random_graphs(60, 7, seed=1):
        expected = _naive_min_reach(G)
        assert min_reach(G, method="exact") == expected, nx.to_dict_of_lists(G)
        assert robustness(G, method="exact") == expected


# chunk 0 in the default run; the other three with the slow checks (README's 2-minute budget)
@pytest.mark.parametrize("chunk", [0, *(pytest.param(c, marks=pytest.mark.slow) for c in (1, 2, 3))])
def test_exact_and_milp_agree_on_random_graphs(chunk):
    # 4 x 50 = 200 seeded G(n, p) graphs with n <= 10
    for G in _random_graphs(50, 10, seed=100 + chunk):
        info = nx.to_dict_of_lists(G)
        value = min_reach(G, method="exact")
        assert min_reach(G, method="milp") == value, info
        assert robustness(G, method="milp") == value, info
        assert robustness(G, method="milp", heuristic=False) == value, info
        assert robustness(G) == value, info
        lo, hi = robustness_bounds(G)
        assert lo <= value <= hi, info
        # the feasibility form of the MILP alone: no bound shortcuts, no heuristic
        assert violating_pair(G, value, method="milp", heuristic=False) is None, info
        pair = violating_pair(G, value + 1, method="milp", heuristic=False)
        _check_witness(G, pair, value + 1)
        assert violating_pair(G, value, method="milp") is None, info
        _check_witness(G, violating_pair(G, value + 1, method="milp"), value + 1)
        _check_witness(G, violating_pair(G, value + 1, method="exact"), value + 1)
        for r in (value, value + 1):
            assert is_r_robust(G, r, method="milp") == is_r_robust(G, r, method="exact") \
                == (r <= value), info


def test_milp_on_medium_graphs():
    for G in [nx.circulant_graph(16, [1, 2, 3]), nx.gnp_random_graph(16, 0.5, seed=4),
              nx.random_regular_graph(5, 16, seed=5)]:
        value = robustness(G, method="exact")
        assert robustness(G, method="milp") == value
        assert robustness(G, method="milp", heuristic=False) == value
        assert is_r_robust(G, value, method="milp") and not is_r_robust(G, value + 1, method="milp")


def test_heuristic_witnesses_are_valid():
    # the heuristic may miss pairs but must never return an invalid one
    from meshsim.graphs.robustness import _heuristic_pair, _pair_value, _prepare
    for G in _random_graphs(40, 12, seed=9):
        _, adj = _prepare(G)
        for r in range(1, 5):
            pair = _heuristic_pair(adj, r)
            if pair is not None:
                s1, s2 = pair
                assert s1 and s2 and not set(s1) & set(s2)
                assert _pair_value(adj, s1, s2) < r


def test_bounds():
    assert robustness_bounds(nx.complete_graph(9)) == (5, 5)
    assert robustness_bounds(nx.path_graph(5)) == (1, 1)
    assert robustness_bounds(nx.empty_graph(3)) == (0, 0)
    assert robustness_bounds(nx.empty_graph(1)) == (0, 0)


def test_time_limit_without_proof_raises():
    G = nx.gnp_random_graph(50, 0.5, seed=0)
    with pytest.raises(MeshsimError, match="time limit"):
        min_reach(G, method="milp", time_limit=0.05)


# --------------------------------------------------------------------------
# F-local model
# --------------------------------------------------------------------------

def test_f_local_star():
    G = nx.star_graph(5)  # centre 0
    assert is_f_local(G, {0}, 1)
    assert not is_f_local(G, {0}, 0)
    assert f_local_violations(G, {0}, 0) == {v: 1 for v in range(1, 6)}
    # the centre sees every Byzantine leaf
    assert f_local_violations(G, {1, 2, 3}, 2) == {0: 3}
    assert is_f_local(G, {1, 2, 3}, 3)


def test_f_local_counts_byzantine_nodes_own_neighbours():
    G = nx.path_graph(3)
    assert byzantine_neighbour_counts(G, [0, 1]) == {0: 1, 1: 1, 2: 1}
    assert f_local_violations(G, [0, 1], 0) == {0: 1, 1: 1, 2: 1}
    assert is_f_local(G, [0, 1], 1)


def test_f_local_ring_and_edge_cases():
    G = nx.cycle_graph(6)
    assert f_local_violations(G, {0, 2}, 1) == {1: 2}
    assert is_f_local(G, {0, 3}, 1)
    assert is_f_local(G, set(), 0)
    assert f_local_violations(G, [], 0) == {}
    G.add_edge(0, 0)  # a self-loop is not a Byzantine neighbour
    assert is_f_local(G, {0}, 1)
    assert f_local_violations(G, {0}, 0) == {1: 1, 5: 1}
    H = nx.relabel_nodes(nx.complete_graph(4), dict(zip(range(4), "abcd")))
    assert f_local_violations(H, ["a", "b"], 1) == {"c": 2, "d": 2}


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------

@pytest.mark.parametrize("r", [-1, 1.5, 2.0, True, "2", None])
def test_bad_r(r):
    with pytest.raises(InputError):
        is_r_robust(nx.complete_graph(4), r)
    with pytest.raises(InputError):
        violating_pair(nx.complete_graph(4), r)


@pytest.mark.parametrize("fn", [robustness, min_reach, robustness_bounds,
                                lambda G: is_r_robust(G, 1), lambda G: is_f_local(G, [], 0)])
def test_directed_or_non_graph_rejected(fn):
    with pytest.raises(InputError):
        fn(nx.DiGraph([(0, 1), (1, 0)]))
    with pytest.raises(InputError):
        fn({0: [1], 1: [0]})


def test_bad_method_and_time_limit():
    G = nx.complete_graph(4)
    with pytest.raises(InputError):
        robustness(G, method="brute")
    with pytest.raises(InputError):
        is_r_robust(G, 1, method="MILP")
    with pytest.raises(InputError):
        robustness(nx.complete_graph(EXACT_MAX_N + 1), method="exact")
    for bad in (0, -1, "10", True):
        with pytest.raises(InputError):
            robustness(G, method="milp", time_limit=bad)


def test_bad_f_local_input():
    G = nx.cycle_graph(4)
    for F in (-1, 0.5, True):
        with pytest.raises(InputError):
            is_f_local(G, [0], F)
    with pytest.raises(InputError):
        is_f_local(G, [7], 1)        # not a node
    with pytest.raises(InputError):
        f_local_violations(G, 3, 1)  # not an iterable
    with pytest.raises(InputError):
        is_f_local(nx.DiGraph([(0, 1)]), [0], 1)
