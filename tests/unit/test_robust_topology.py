"""SAC App. A generators: gamma-MERG, PA built r-robust, ER verified r-robust, k-circulant."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshsim.cli import main
from meshsim.core.errors import TopologyError
from meshsim.graphs import GENERATORS, build
from meshsim.graphs.robustness import robustness

ROOT = Path(__file__).resolve().parents[2]


def test_registered():
    for kind in ("merg", "pa_robust", "er_robust", "k_circulant"):
        assert kind in GENERATORS


@pytest.mark.parametrize("n", range(2, 15))
def test_merg_has_maximum_robustness(n):
    gamma = math.ceil(n / 2)
    for seed in range(4):
        G = build("merg", {"n": n}, seed)
        assert list(G.nodes) == [f"A{i}" for i in range(1, n + 1)]
        assert robustness(G, method="exact") == gamma
        if n >= 5:
            assert G.number_of_edges() < n * (n - 1) // 2  # sparser than K_n at the same robustness
    # odd n: clique of gamma+1 plus gamma-2 nodes of degree gamma; even n: gamma hubs minus ceil((gamma-2)/2) edges
    if n % 2:
        assert G.number_of_edges() == (gamma + 1) * gamma // 2 + (n - gamma - 1) * gamma
    else:
        assert G.number_of_edges() == gamma * (gamma - 1) // 2 + gamma * gamma - math.ceil((gamma - 2) / 2)


def test_merg_shuffle_moves_the_core():
    plain = build("merg", {"n": 7}, 3)
    assert plain.degree("A7") == 4 and plain.degree("A1") >= 5  # construction order: A6, A7 peripheral
    degs = {tuple(d for _, d in build("merg", {"n": 7, "shuffle": True}, s).degree()) for s in range(6)}
    assert len(degs) > 1
    assert all(robustness(build("merg", {"n": 7, "shuffle": True}, s)) == 4 for s in range(6))


@pytest.mark.parametrize("n,r", [(5, 3), (7, 2), (9, 4), (12, 3), (14, 4)])
def test_pa_robust_is_r_robust(n, r):
    for seed in range(3):
        G = build("pa_robust", {"n": n, "r": r}, seed)
        core = [f"A{i}" for i in range(1, 2 * r)]
        assert all(G.has_edge(u, v) for i, u in enumerate(core) for v in core[i + 1:])
        assert min(d for _, d in G.degree()) >= r
        assert robustness(G, method="exact") >= r


def test_pa_robust_is_preferential():
    # hubs: the degree spread of a large PA graph is far above a regular graph's
    G = build("pa_robust", {"n": 60, "r": 2}, 1)
    degs = sorted(d for _, d in G.degree())
    assert degs[0] >= 2 and degs[-1] >= 4 * degs[0]


@pytest.mark.parametrize("n,r", [(7, 4), (9, 4), (10, 3), (12, 2)])
def test_er_robust_is_verified(n, r):
    edges = set()
    for seed in range(3):
        G = build("er_robust", {"n": n, "r": r}, seed)
        assert G.number_of_nodes() == n
        assert robustness(G, method="exact") >= r
        edges.add(tuple(sorted(G.edges)))
    assert len(edges) > 1  # resampled per seed
    assert build("er_robust", {"n": n, "r": r}, 0).edges == build("er_robust", {"n": n, "r": r}, 0).edges


@pytest.mark.parametrize("n,k", [(9, 2), (12, 3), (14, 4)])
def test_k_circulant(n, k):
    G = build("k_circulant", {"n": n, "k": k}, 0)
    assert {d for _, d in G.degree()} == {2 * k}
    assert G.has_edge("A1", f"A{n}") and G.has_edge("A1", f"A{k + 1}") and not G.has_edge("A1", f"A{k + 2}")
    assert robustness(G, method="exact") == k


@pytest.mark.parametrize("kind,params,field", [
    ("merg", {"n": 1}, "network.topology.n"),
    ("merg", {"n": 7, "r": 3}, "network.topology.r"),
    ("pa_robust", {"n": 5, "r": 4}, "network.topology.n"),
    ("er_robust", {"n": 7, "r": 5}, "network.topology.r"),
    ("er_robust", {"n": 9, "r": 4, "p": 0.05, "max_tries": 5}, "network.topology.max_tries"),
    ("k_circulant", {"n": 8, "k": 4}, "network.topology.k"),
    ("k_circulant", {"n": 8}, "network.topology.k"),
])
def test_bad_parameters_name_the_field(kind, params, field):
    with pytest.raises(TopologyError) as err:
        build(kind, params, 0)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_cli_topology_prints_robustness(tmp_path):
    sc = tmp_path / "g.yaml"
    sc.write_text("name: g\nduration: 1s\nnetwork:\n  topology: {kind: merg, n: 9}\n")
    res = CliRunner().invoke(main, ["topology", str(sc), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["r_robustness"] == 5 and info["nodes"] == 9
