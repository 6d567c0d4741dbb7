"""Ability-aware sparse graphs (MeshHeal App. B.7, Tab. B12)."""
from __future__ import annotations

import networkx as nx
import pytest

from meshsim import graphs as topology
from meshsim.graphs.ability import (DEFAULT_PROFILE, ability_distance, ability_sparse_graph,
                                      check_ability_graph, default_edges, default_profile,
                                      replicate_profile)
from meshsim.core.errors import TopologyError

TABLE = [(96, 228), (288, 705), (576, 1454)]


@pytest.fixture(scope="module")
def built():
    out = {}
    for n, m in TABLE:
        ab, tg = default_profile(n)
        out[n] = (ab, tg, ability_sparse_graph(ab, tg, m=m, seed=0))
    return out


def test_default_profile_replication():
    ab, tg = default_profile(96)
    assert len(ab) == 96 and len(tg) == 32
    assert ab["A9"] == DEFAULT_PROFILE["A3"] and "A9" in tg and "A11" in tg and "A10" not in tg
    ab, tg = default_profile(576)
    assert len(tg) == 576 // 3


@pytest.mark.parametrize("n,m", TABLE)
def test_table_graphs_meet_all_conditions(built, n, m):
    ab, tg, G = built[n]
    assert G.number_of_nodes() == n
    assert list(G.nodes) == [f"A{i}" for i in range(1, n + 1)]
    assert G.number_of_edges() == m
    assert check_ability_graph(G, ab, tg) == []
    assert ability_distance(G, ab, exclude=tg)["max"] <= 3
    assert nx.is_connected(G)
    assert G.graph["min_edges"] <= m
    # spot-check (a) and (b) directly
    for v, ks in ab.items():
        need = 2 if v in tg else 1
        for s in ks:
            assert sum(1 for u in G[v] if u not in tg and s in ab[u]) >= need, (v, s)


@pytest.mark.parametrize("n,m", TABLE)
def test_seeded(built, n, m):
    ab, tg, G = built[n]
    again = ability_sparse_graph(ab, tg, m=m, seed=0)
    assert list(again.edges) == list(G.edges)
    other = ability_sparse_graph(ab, tg, m=m, seed=1)
    assert set(map(frozenset, other.edges)) != set(map(frozenset, G.edges))
    assert check_ability_graph(other, ab, tg) == []


def test_infeasible_m_names_minimum():
    ab, tg = default_profile(96)
    with pytest.raises(TopologyError) as exc:
        ability_sparse_graph(ab, tg, m=10, seed=0)
    assert exc.value.field == "network.topology.m"
    assert "smallest graph found" in str(exc.value)
    minimum = exc.value.min_edges
    assert f"has {minimum} edges" in str(exc.value) and 96 <= minimum <= 228
    # the reported minimum is achievable with the same seed; one fewer is not
    G = ability_sparse_graph(ab, tg, m=minimum, seed=0)
    assert G.number_of_edges() == minimum and check_ability_graph(G, ab, tg) == []
    with pytest.raises(TopologyError):
        ability_sparse_graph(ab, tg, m=minimum - 1, seed=0)
    with pytest.raises(TopologyError):
        ability_sparse_graph(ab, tg, m=96 * 95 // 2 + 1)


def test_exact_minimum_and_default_m():
    ab, tg = default_profile(96)
    G = ability_sparse_graph(ab, tg, seed=3)
    assert G.number_of_edges() == default_edges(96) == 228
    low = G.graph["min_edges"]
    H = ability_sparse_graph(ab, tg, m=low, seed=3)
    assert H.number_of_edges() == low and check_ability_graph(H, ab, tg) == []


def test_dense_fill():
    ab, tg = default_profile(12)
    G = ability_sparse_graph(ab, tg, m=60, seed=0)
    assert G.number_of_edges() == 60 and check_ability_graph(G, ab, tg) == []
    G = ability_sparse_graph(ab, tg, m=66, seed=0)
    assert G.number_of_edges() == 66


def test_check_detects_violations():
    ab, tg = default_profile(96)
    P = nx.path_graph([f"A{i}" for i in range(1, 97)])
    problems = check_ability_graph(P, ab, tg)
    assert any(p.startswith("target A3:") for p in problems)
    assert any("within 3 hops" in p for p in problems)
    assert ability_distance(P, ab, exclude=tg)["max"] > 3
    capped = check_ability_graph(P, ab, tg, limit=2)
    assert len(capped) < len(problems) and any("more like the above" in p for p in capped)
    # disconnected + missing agent
    ab6, tg6 = default_profile(6)
    G = nx.Graph()
    G.add_nodes_from(["A1", "A2"])
    problems = check_ability_graph(G, ab6, tg6)
    assert any("A6 is not in the graph" in p for p in problems)
    assert any("disconnected" in p for p in problems)


def test_distance_condition_is_enforced():
    # an ability held by only two healthy agents: most agents are far from it at first
    ab, tg = default_profile(96)
    ab = {k: list(v) for k, v in ab.items()}
    ab["A1"] = ab["A1"] + ["rare"]
    ab["A7"] = ab["A7"] + ["rare"]
    G = ability_sparse_graph(ab, tg, m=240, seed=5, max_distance=2)
    assert check_ability_graph(G, ab, tg, max_distance=2) == []
    assert ability_distance(G, ab, exclude=tg)["per_ability"]["rare"] <= 2


def test_impossible_maps_rejected():
    with pytest.raises(TopologyError):  # target needs two healthy holders of 'x'
        ability_sparse_graph({"A1": ["x"], "A2": ["x"], "A3": []}, {"A2"})
    with pytest.raises(TopologyError):  # no healthy holder at all
        ability_sparse_graph({"A1": ["x"], "A2": []}, {"A1"})
    with pytest.raises(TopologyError):
        ability_sparse_graph({"A1": ["x"]}, {"A9"})


def test_default_edges():
    assert [default_edges(n) for n, _ in TABLE] == [m for _, m in TABLE]
    assert 228 < default_edges(192) < 705
    assert default_edges(1152) == pytest.approx(1152 * 2.52, rel=0.01)
    assert default_edges(6) <= 15 and default_edges(1) == 0


def test_registered_kind():
    G = topology.build("ability_sparse", {"n": 96, "m": 228}, seed=7)
    assert G.number_of_edges() == 228 and list(G.nodes)[:3] == ["A1", "A2", "A3"]
    ab, tg = default_profile(96)
    assert check_ability_graph(G, ab, tg) == []
    assert list(topology.build("ability_sparse", {"n": 96, "m": 228}, seed=7).edges) == list(G.edges)
    # no m: Tab. B12 count
    assert topology.build("ability_sparse", {"n": 288}, seed=1).number_of_edges() == 705
    # custom profile replicated, targets given by profile name
    prof = {"A1": ["a", "b"], "A2": ["a", "b"], "A3": ["a", "b"], "A4": ["a"]}
    G = topology.build("ability_sparse", {"n": 40, "abilities": prof, "targets": ["A4"]}, seed=2)
    full, tg = replicate_profile(prof, ["A4"], 40)
    assert G.number_of_nodes() == 40 and check_ability_graph(G, full, tg) == []
    with pytest.raises(TopologyError) as exc:
        topology.build("ability_sparse", {"n": 100}, seed=0)
    assert exc.value.field == "network.topology.n"
    with pytest.raises(TopologyError):
        topology.build("ability_sparse", {"m": 5}, seed=0)
    with pytest.raises(TopologyError):
        topology.build("ability_sparse", {"n": 96, "m": 10}, seed=0)
