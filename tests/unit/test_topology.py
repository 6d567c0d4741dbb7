"""Topology generators, file readers (GraphML / edge list) and describe()."""
from __future__ import annotations

import functools

import networkx as nx
import pytest

from meshsim import graphs as topology
from meshsim.core.errors import InputError, TopologyError
from meshsim.graphs import GENERATORS, build, describe, from_file

N = 12
# parameters for the built-in generators
PARAMS = {
    "complete": {"n": N},
    "gnp": {"n": N, "p": 0.4},
    "erdos_renyi": {"n": N, "p": 0.4},
    "gnm": {"n": N, "m": 20},
    "regular": {"n": N, "d": 4},
    "ring": {"n": N},
    "path": {"n": N},
    "star": {"n": N},
}
# for generators registered later: the first of these that builds is used
FALLBACK_PARAMS = [{"n": N}, {"n": N, "p": 0.4}, {"n": N, "m": 20}, {"n": N, "d": 4},
                   {"n": N, "r": 2}, {"n": N, "k": 4, "p": 0.3}, {"n": N, "m": 2}, {"n": N, "k": 4}]
RANDOM_KINDS = ["gnp", "erdos_renyi", "gnm", "regular"]


@functools.lru_cache(maxsize=None)
def params_for(kind: str) -> dict:
    if kind in PARAMS:
        return PARAMS[kind]
    for p in FALLBACK_PARAMS:
        try:
            build(kind, dict(p), 0)
        except (InputError, TypeError, KeyError, ValueError, nx.NetworkXError):
            continue
        return p
    pytest.fail(f"generator {kind!r} builds with none of the fallback parameters; add it to PARAMS")


def snapshot(G: nx.Graph):
    return (list(G.nodes), sorted((u, v, tuple(sorted(d.items()))) for u, v, d in G.edges(data=True)))


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_generator_builds_reproducibly_with_agent_names(kind):
    params = params_for(kind)
    G = build(kind, dict(params), 7)
    n = G.number_of_nodes()
    assert n >= 1
    if "n" in params:
        assert n == params["n"]
    assert set(G.nodes) == {f"A{i}" for i in range(1, n + 1)}
    assert list(G.nodes) == [f"A{i}" for i in range(1, n + 1)]  # natural order: A2 before A10
    assert not G.is_directed() and not G.is_multigraph()
    assert nx.number_of_selfloops(G) == 0
    assert snapshot(build(kind, dict(params), 7)) == snapshot(G)


@pytest.mark.parametrize("kind", [k for k in RANDOM_KINDS if k in GENERATORS])
def test_random_generators_depend_on_seed(kind):
    params = PARAMS[kind]
    first = snapshot(build(kind, dict(params), 0))
    assert any(snapshot(build(kind, dict(params), s)) != first for s in range(1, 6))


def test_generator_sizes():
    assert build("complete", {"n": 5}, 0).number_of_edges() == 10
    assert build("ring", {"n": 7}, 0).number_of_edges() == 7
    assert build("path", {"n": 7}, 0).number_of_edges() == 6
    star = build("star", {"n": 6}, 0)
    assert star.number_of_edges() == 5 and star.degree("A1") == 5
    assert build("gnm", {"n": 10, "m": 17}, 3).number_of_edges() == 17
    assert all(d == 3 for _, d in build("regular", {"n": 10, "d": 3}, 3).degree())


def test_unknown_kind_and_bad_params():
    with pytest.raises(TopologyError, match="unknown topology kind"):
        build("hypercube", {"n": 4}, 0)
    with pytest.raises(TopologyError) as exc:
        build("gnm", {"n": 5, "m": 11}, 0)
    assert exc.value.field == "network.topology.m"
    with pytest.raises(TopologyError) as exc:
        build("ring", {}, 0)
    assert exc.value.field == "network.topology.n"


# ---------------------------------------------------------------- files


def _weighted() -> nx.Graph:
    G = nx.Graph()
    G.add_edge("A1", "A2", latency=0.02, loss=0.1)
    G.add_edge("A2", "A3", latency=0.5)
    G.add_edge("A3", "A4", loss=0.25)
    G.add_edge("A4", "A1")
    return G


def _assert_same(G: nx.Graph, H: nx.Graph) -> None:
    assert set(H.nodes) == set(G.nodes)
    assert {frozenset(e) for e in H.edges} == {frozenset(e) for e in G.edges}
    for u, v, d in G.edges(data=True):
        got = H.edges[u, v]
        for key in ("latency", "loss"):
            if key in d:
                assert isinstance(got[key], float)
                assert got[key] == pytest.approx(d[key])
            else:
                assert key not in got


def test_graphml_round_trip(tmp_path):
    G = _weighted()
    path = tmp_path / "net.graphml"
    nx.write_graphml(G, path)
    H = from_file(path)
    _assert_same(G, H)


def test_edgelist_round_trip_networkx_writer(tmp_path):
    G = _weighted()
    path = tmp_path / "net.edgelist"
    nx.write_edgelist(G, path)  # "u v {'latency': ..}" lines
    _assert_same(G, from_file(path))


def test_edgelist_key_value_form_and_comments(tmp_path):
    path = tmp_path / "net.txt"
    path.write_text("# agents and links\n"
                    "A1 A2 latency=0.02 loss=0.1   # a slow, lossy link\n"
                    "A2 A3 latency=0.5\n"
                    "\n"
                    "A3 A4 loss=0.25\n"
                    "A4 A1\n"
                    "A5\n")
    H = from_file(path)
    G = _weighted()
    G.add_node("A5")
    _assert_same(G, H)
    assert list(H.nodes) == ["A1", "A2", "A3", "A4", "A5"]


def test_file_kind_resolves_relative_to_base_dir(tmp_path):
    (tmp_path / "g.edgelist").write_text("A1 A2 latency=0.03\nA2 A3\n")
    G = build("file", {"path": "g.edgelist"}, 0, base_dir=tmp_path)
    assert G.number_of_edges() == 2
    assert G.edges["A1", "A2"]["latency"] == pytest.approx(0.03)


@pytest.mark.parametrize("text, match", [
    ("A1 A2\nA3 A3\n", "self-loop"),
    ("A1 A2 loss=2\n", "loss must be in"),
    ("A1 A2 loss=-0.1\n", "loss must be in"),
    ("A1 A2 latency=fast\n", "'latency' must be a number"),
    ("A1 A2 latency=-1\n", "latency must be >= 0"),
    ("A1 A2 slow\n", "expected key=value"),
    ("A1 A2 {'latency': \n", "bad attribute dict"),
    ("# nothing here\n\n", "no nodes"),
])
def test_bad_edgelist_raises_topology_error(tmp_path, text, match):
    path = tmp_path / "bad.edgelist"
    path.write_text(text)
    with pytest.raises(TopologyError, match=match) as exc:
        from_file(path)
    assert "\n" not in str(exc.value)
    assert exc.value.exit_code == 2


def test_bad_graphml_and_missing_file(tmp_path):
    path = tmp_path / "broken.graphml"
    path.write_text("<graphml><graph><node id='a'></graph>")
    with pytest.raises(TopologyError, match="cannot read topology"):
        from_file(path)
    with pytest.raises(TopologyError, match="not found"):
        from_file(tmp_path / "absent.graphml")


# ---------------------------------------------------------------- describe


def test_describe_ring():
    info = describe(build("ring", {"n": 6}, 0))
    assert info["nodes"] == 6
    assert info["edges"] == 6
    assert info["edge_fraction"] == pytest.approx(6 / 15)
    assert info["diameter"] == 3
    assert (info["degree_min"], info["degree_max"]) == (2, 2)
    assert info["degree_mean"] == pytest.approx(2.0)
    assert info["degree_median"] == 2
    assert info["connected"] is True
    assert info["components"] == 1
    assert info["node_connectivity"] == 2


def test_describe_complete_k5():
    info = describe(topology.relabel(nx.complete_graph(5)))
    assert info["nodes"] == 5
    assert info["edges"] == 10
    assert info["edge_fraction"] == pytest.approx(1.0)
    assert info["diameter"] == 1
    assert (info["degree_min"], info["degree_max"]) == (4, 4)
    assert info["degree_mean"] == pytest.approx(4.0)
    assert info["degree_median"] == 4
    assert info["connected"] is True
    assert info["components"] == 1
    assert info["node_connectivity"] == 4


def test_describe_disconnected_and_star():
    G = topology.relabel(nx.disjoint_union(nx.path_graph(3), nx.path_graph(2)))
    info = describe(G)
    assert (info["nodes"], info["edges"]) == (5, 3)
    assert info["connected"] is False
    assert info["components"] == 2
    assert info["diameter"] is None
    star = describe(build("star", {"n": 5}, 0))
    assert (star["degree_min"], star["degree_max"], star["degree_median"]) == (1, 4, 1)
    assert star["diameter"] == 2
