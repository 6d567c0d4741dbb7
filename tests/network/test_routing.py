"""Distance-vector routing converges to networkx shortest holder distances (SPEC §1-2)."""
from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import attach_routing, build_net, truth

ABILITIES = ["a", "b", "c"]


@st.composite
def world(draw, max_n=18):
    n = draw(st.integers(2, max_n))
    gseed = draw(st.integers(0, 10_000))
    p = draw(st.floats(0.1, 0.6))
    G = nx.gnp_random_graph(n, p, seed=gseed)
    # make it connected by chaining components (still a random sparse graph)
    comps = [sorted(c) for c in nx.connected_components(G)]
    for a, b in zip(comps, comps[1:]):
        G.add_edge(a[0], b[0])
    names = [f"A{i + 1}" for i in range(n)]
    holders = {s: set(draw(st.lists(st.sampled_from(names), min_size=0, max_size=3))) for s in ABILITIES}
    seed = draw(st.integers(0, 1000))
    return G, holders, seed


def assert_tables(net, dvs, holders, infinity=16):
    for s in ABILITIES:
        t = truth(net, holders, s, infinity)
        got = {v: dvs[v].distance(s) for v in net.nodes}
        assert got == t, (s, {v: (got[v], t[v]) for v in t if got[v] != t[v]})


@settings(max_examples=40)
@given(world())
def test_converges_to_shortest_holder_distance(w):
    G, holders, seed = w
    env, net = build_net(G, seed)
    dvs = attach_routing(net, holders, refresh=5.0)
    env.run(until=30)
    assert_tables(net, dvs, holders)
    # next_hop lies on a shortest path
    for v, dv in dvs.items():
        for s in ABILITIES:
            d = dv.distance(s)
            if 0 < d < 16:
                nh = dv.next_hop(s)
                assert nh in net.nodes[v].links
                assert dvs[nh].distance(s) == d - 1


@settings(max_examples=30)
@given(world(), st.data())
def test_reconverges_after_link_failures_and_withdrawals(w, data):
    G, holders, seed = w
    env, net = build_net(G, seed)
    dvs = attach_routing(net, holders, refresh=5.0)
    env.run(until=20)
    edges = sorted(net.links)
    down = data.draw(st.lists(st.sampled_from(edges), max_size=min(4, len(edges)), unique=True)) if edges else []
    for u, v in down:
        net.set_link_up(u, v, False)
    for s in ABILITIES:
        for h in sorted(holders[s]):
            if data.draw(st.booleans()):
                holders[s].discard(h)
                dvs[h].withdraw(s)
    env.run(until=120)
    assert_tables(net, dvs, holders)
    # links come back, a new holder appears
    for u, v in down:
        net.set_link_up(u, v, True)
    newbie = data.draw(st.sampled_from(sorted(net.nodes)))
    holders["a"].add(newbie)
    dvs[newbie].advertise("a")
    env.run(until=220)
    assert_tables(net, dvs, holders)


@settings(max_examples=20)
@given(world(max_n=14))
def test_converges_under_ten_percent_loss(w):
    G, holders, seed = w
    env, net = build_net(G, seed, loss=0.10)
    dvs = attach_routing(net, holders, refresh=5.0)
    env.run(until=90)
    assert_tables(net, dvs, holders)
    for s in ABILITIES:
        for h in sorted(holders[s]):
            holders[s].discard(h)
            dvs[h].withdraw(s)
            break
    env.run(until=300)
    assert_tables(net, dvs, holders)


def test_hop_limit_caps_distances_and_stops_count_to_infinity():
    G = nx.path_graph(12)
    env, net = build_net(G, 3)
    holders = {"a": {"A1"}, "b": set(), "c": set()}
    dvs = attach_routing(net, holders, refresh=2.0, infinity=5)
    env.run(until=20)
    assert [dvs[f"A{i}"].distance("a") for i in range(1, 13)] == [0, 1, 2, 3, 4] + [5] * 7
    dvs["A1"].withdraw("a")
    holders["a"] = set()
    env.run(until=60)
    assert all(dv.distance("a") == 5 for dv in dvs.values())


def test_partition_then_heal():
    G = nx.barbell_graph(5, 2)  # two cliques joined by a 2-node bridge
    env, net = build_net(G, 1)
    holders = {"a": {"A1"}, "b": {"A10"}, "c": set()}
    dvs = attach_routing(net, holders, refresh=3.0)
    env.run(until=10)
    bridge = ("A6", "A7") if ("A6", "A7") in net.links else sorted(net.links)[0]
    net.set_link_up(*bridge, False)
    env.run(until=60)
    assert_tables(net, dvs, holders)
    assert dvs["A10"].distance("a") == 16
    net.set_link_up(*bridge, True)
    env.run(until=80)
    assert_tables(net, dvs, holders)
    assert dvs["A10"].distance("a") < 16
