"""Links, node runtime, counters, reliable delivery (SPEC §1)."""
from __future__ import annotations

import networkx as nx
import pytest

from tests.helpers import build_net
from meshsim.net.reliable import Reliable
from meshsim.core.types import LatencySpec


def _collect(net):
    got = {v: [] for v in net.nodes}
    for v, node in net.nodes.items():
        node.on("x", lambda m, v=v: got[v].append((net.env.now, m.payload)))
    return got


def test_constant_latency_and_counters():
    env, net = build_net(nx.path_graph(2), latency=LatencySpec("constant", 0.25))
    got = _collect(net)
    net.nodes["A1"].send("A2", "x", "hello")
    env.run()
    assert got["A2"] == [(0.25, "hello")]
    st = net.stats["x"]
    assert (st.sent, st.delivered, st.dropped_loss, st.dropped_down) == (1, 1, 0, 0)
    assert st.bytes == 64 + 5


def test_link_down_mid_flight_drops_and_counts():
    env, net = build_net(nx.path_graph(2), latency=LatencySpec("constant", 1.0))
    got = _collect(net)
    for i in range(5):
        net.nodes["A1"].send("A2", "x", i)
    env.run(until=0.5)
    net.set_link_up("A1", "A2", False)
    net.nodes["A1"].send("A2", "x", "while-down")  # refused at once
    env.run(until=0.6)
    net.set_link_up("A1", "A2", True)  # back up before the old messages were due
    env.run()
    assert got["A2"] == []
    st = net.stats["x"]
    assert st.sent == 6 and st.delivered == 0 and st.dropped_down == 6


def test_remove_link_and_agent_drop_in_flight():
    env, net = build_net(nx.path_graph(3), latency=LatencySpec("constant", 1.0))
    got = _collect(net)
    net.nodes["A1"].send("A2", "x", 1)
    net.nodes["A3"].send("A2", "x", 2)
    env.run(until=0.5)
    net.remove_node("A2")
    env.run()
    assert got == {"A1": [], "A2": [], "A3": []}
    assert "A2" not in net.nodes
    assert net.stats["x"].dropped_down == 2
    assert not net.nodes["A1"].neighbors


def test_loss_rate_is_respected():
    env, net = build_net(nx.path_graph(2), seed=4, loss=0.3, latency=LatencySpec("constant", 0.01))
    got = _collect(net)
    for i in range(4000):
        net.nodes["A1"].send("A2", "x", i)
    env.run()
    st = net.stats["x"]
    assert st.dropped_loss + st.delivered == 4000
    assert 0.27 < st.dropped_loss / 4000 < 0.33
    assert len(got["A2"]) == st.delivered


def test_bandwidth_serialises_messages_fifo():
    env, net = build_net(nx.path_graph(2), latency=LatencySpec("constant", 0.1))
    net.links[("A1", "A2")].bandwidth = 1000.0  # bytes/s
    got = _collect(net)
    for i in range(3):
        net.nodes["A1"].send("A2", "x", i, size=500)
    env.run()
    assert [round(t, 9) for t, _ in got["A2"]] == [0.6, 1.1, 1.6]
    assert [p for _, p in got["A2"]] == [0, 1, 2]


@pytest.mark.parametrize("dist,kw", [("uniform", dict(low=0.01, high=0.02)),
                                     ("lognormal", dict(median=0.05, sigma=0.5))])
def test_latency_distributions(dist, kw):
    env, net = build_net(nx.path_graph(2), latency=LatencySpec(dist, **kw))
    got = _collect(net)
    for i in range(500):
        net.nodes["A1"].send("A2", "x", i)
    env.run()
    times = sorted(t for t, _ in got["A2"])
    assert len(times) == 500
    if dist == "uniform":
        assert 0.01 <= times[0] and times[-1] <= 0.02
    else:
        med = times[250]
        assert 0.04 < med < 0.06


def test_reliable_delivery_under_30_percent_loss_never_hangs():
    env, net = build_net(nx.path_graph(2), seed=9, loss=0.3, latency=LatencySpec("constant", 0.05))
    a, b = (Reliable(net.nodes[v], timeout=0.2, retries=8) for v in ("A1", "A2"))
    handled = []
    net.nodes["A2"].on("req", lambda m: handled.append(m.payload))
    outcomes = []

    def sender():
        for i in range(300):
            ok = yield a.send("A2", "req", i)
            outcomes.append(ok)

    net.nodes["A1"].spawn(sender())
    env.run(until=10_000)
    assert len(outcomes) == 300  # every request ended: acked or given up
    acked = [i for i, ok in enumerate(outcomes) if ok]
    # an attempt fails if the request or its ack is lost: 1 - 0.7**2 = 0.51;
    # nine straight failures: 0.51**9 = 0.0024 per request
    assert len(acked) >= 295
    # each request handled at most once even when acks were lost and it was resent
    assert len(handled) == len(set(handled))
    assert set(acked) <= set(handled)
    assert a.retransmissions > 0


def test_reliable_gives_up_when_link_is_down():
    env, net = build_net(nx.path_graph(2), latency=LatencySpec("constant", 0.05))
    a = Reliable(net.nodes["A1"], timeout=0.1, retries=2)
    Reliable(net.nodes["A2"])
    net.set_link_up("A1", "A2", False)
    ev = a.send("A2", "req", 1)
    env.run()
    assert ev.value is False and a.failures == 1
    assert env.now == pytest.approx(0.3)


def test_handler_generators_run_as_processes_and_do_not_block_others():
    env, net = build_net(nx.path_graph(2), latency=LatencySpec("constant", 0.01))
    log = []

    def slow(m):
        yield env.timeout(5)
        log.append(("slow-done", env.now))

    net.nodes["A2"].on("slow", slow)
    net.nodes["A2"].on("fast", lambda m: log.append(("fast", env.now)))
    net.nodes["A1"].send("A2", "slow")
    net.nodes["A1"].send("A2", "fast")
    env.run()
    assert log == [("fast", 0.01), ("slow-done", 5.01)]


def test_a_handler_process_starts_on_arrival_and_leaves_no_trace():
    from meshsim.net.messages import Message

    env, net = build_net(nx.path_graph(2), latency=LatencySpec("constant", 0.5))
    node = net.nodes["A2"]
    log = []

    def work(m):
        log.append(("start", env.now))
        yield env.timeout(1)
        log.append(("end", env.now))
        return "value nobody reads"

    node.on("w", work)
    queued = len(env._queue)
    node.receive(Message("w", "A1", "A2", None, 64, 0.0, 0))
    # run to its first yield inside the arrival: no start event, just its own timeout queued
    assert log == [("start", 0.0)] and len(env._queue) == queued + 1
    assert len(node._procs) == 1
    env.run()
    assert log[-1] == ("end", 1.0)
    assert node._procs == {}  # finished: gone from the node, with no end event
    assert len(env._queue) == 0


def test_a_failing_handler_process_stops_the_run_with_its_error():
    env, net = build_net(nx.path_graph(2), latency=LatencySpec("constant", 0.1))

    def boom(m):
        yield env.timeout(1)
        raise ZeroDivisionError("in a handler's process")

    net.nodes["A2"].on("b", boom)
    net.nodes["A1"].send("A2", "b")
    with pytest.raises(ZeroDivisionError, match="in a handler's process"):
        env.run()
    assert env.now == pytest.approx(1.1)


def test_shutdown_interrupts_handler_processes():
    env, net = build_net(nx.path_graph(2), latency=LatencySpec("constant", 0.1))
    node = net.nodes["A2"]
    log = []

    def long(m):
        try:
            yield env.timeout(10)
            log.append("finished")
        finally:
            log.append(("stopped", env.now))

    node.on("l", long)
    net.nodes["A1"].send("A2", "l")
    env.run(until=1)
    node.shutdown("removed")
    env.run()
    assert log == [("stopped", 1)] and node._procs == {}


def test_unknown_kind_is_counted_not_fatal():
    env, net = build_net(nx.path_graph(2))
    net.nodes["A1"].send("A2", "mystery")
    env.run()
    assert net.unhandled_count == 1


def test_named_streams_are_independent_of_creation_order():
    from meshsim.core.sim import Environment

    e1, e2 = Environment(7), Environment(7)
    x1 = e1.pyrandom("link", "A1", "A2").random()
    e2.pyrandom("something", "else").random()
    x2 = e2.pyrandom("link", "A1", "A2").random()
    assert x1 == x2
    assert Environment(8).pyrandom("link", "A1", "A2").random() != x1
    assert e1.rng("a").integers(1 << 30) != e1.rng("b").integers(1 << 30)


def test_broadcast_counts_and_drops_like_separate_sends():
    env, net = build_net(nx.star_graph(4), latency=LatencySpec("constant", 0.5))
    got = _collect(net)
    net.links[("A1", "A5")].loss = 1.0  # lossy link: not batched, always lost
    n = net.nodes["A1"].broadcast("x", "hi")
    assert n == 4
    env.run(until=0.2)
    net.set_link_up("A1", "A3", False)  # goes down while the batch is in flight
    env.run()
    st = net.stats["x"]
    assert (st.sent, st.delivered, st.dropped_loss, st.dropped_down) == (4, 2, 1, 1)
    assert got["A2"] == [(0.5, "hi")] and got["A4"] == [(0.5, "hi")] and got["A3"] == []
    assert st.bytes == 4 * (64 + 2)


def test_message_pickles_and_prints_with_every_field():
    """A message crosses process boundaries (tests/benchmarks/partition.py pickles recorded ones): a plain
    class with __slots__ since issue 33, it must round-trip field for field, compiled or not."""
    import pickle

    from meshsim.net.messages import Message

    m = Message("review_req", "A1", "A2", {"task": 3, "text": "x"}, 96, 1.25, 7)
    back = pickle.loads(pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL))
    fields = ("kind", "src", "dst", "payload", "size", "sent_at", "rid")
    assert [getattr(back, f) for f in fields] == ["review_req", "A1", "A2", {"task": 3, "text": "x"}, 96, 1.25, 7]
    assert Message("ack", "A2", "A1", None, 64, 0.5).rid == 0  # rid defaults to 0: sent unreliably
    assert repr(m) == ("Message(kind='review_req', src='A1', dst='A2', payload={'task': 3, 'text': 'x'}, "
                       "size=96, sent_at=1.25, rid=7)")


def test_totals_sum_every_kind_counter():
    env, net = build_net(nx.path_graph(3), latency=LatencySpec("constant", 0.25))
    _collect(net)
    net.nodes["A1"].send("A2", "x", "hello")
    net.nodes["A2"].send("A3", "x", "hi")
    net.nodes["A2"].send("A1", "y", None)
    net.nodes["A1"].send("A3", "y", None)  # no link: dropped before it leaves
    env.run()
    tot = net.totals()
    assert tot["by_kind"]["x"] == {"sent": 2, "delivered": 2, "dropped_loss": 0, "dropped_down": 0, "bytes": 64 * 2 + 7}
    assert tot["total"] == {k: sum(v[k] for v in tot["by_kind"].values()) for k in tot["total"]}
    assert tot["total"]["delivered"] == 3 and list(tot["total"]) == ["sent", "delivered", "dropped_loss",
                                                                      "dropped_down", "bytes"]
