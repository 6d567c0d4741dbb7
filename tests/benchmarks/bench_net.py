"""Network throughput: meshsim's node runtime vs a bare-SimPy model of the same thing.

576 agents on gnm_random_graph(576, 1454), each link with a fixed latency
drawn from U(5, 50) ms, 5 % loss. Tokens wander: an agent receiving one
forwards it to a random neighbour, plus one more token whenever the
network has lost more than were re-injected (the population stays constant). Both versions stop after the
same number of deliveries and print messages delivered per wall second.

Run: python tests/benchmarks/bench_net.py [--messages 1000000]
"""
from __future__ import annotations

import argparse
import random
import time

import networkx as nx
import simpy

N_AGENTS, N_EDGES, LOSS, TOKENS_PER_AGENT = 576, 1454, 0.05, 2


def graph(seed: int):
    G = nx.gnm_random_graph(N_AGENTS, N_EDGES, seed=seed)
    rnd = random.Random(seed)
    lat = {}
    for u, v in sorted(G.edges):
        lat[(u, v)] = lat[(v, u)] = rnd.uniform(0.005, 0.050)
    nbrs = {v: sorted(G.neighbors(v)) for v in G}
    return G, lat, nbrs


def bare_simpy(target: int, seed: int) -> tuple[int, float]:
    _G, lat, nbrs = graph(seed)
    return bare_simpy_on(nbrs, lat, target, seed, LOSS)


def bare_simpy_on(nbrs: dict, lat: dict, target: int, seed: int, loss: float = 0.0,
                  tokens_per_agent: int = TOKENS_PER_AGENT) -> tuple[int, float]:
    """The bare-SimPy model on any graph: ``nbrs`` node -> sorted neighbours,
    ``lat[(u, v)]`` seconds; returns (deliveries, wall seconds) once ``target``
    messages were delivered (bench_meshheal.py runs it on MeshHeal's graph)."""
    env = simpy.Environment()
    stores = {v: simpy.Store(env) for v in nbrs}
    rnd = random.Random(seed + 1)
    count = [0]
    lost = [0, 0]  # lost, re-injected
    done = env.event()

    def send(u, v, msg):
        if loss and rnd.random() < loss:
            lost[0] += 1
            return
        t = env.timeout(lat[(u, v)])
        t.callbacks.append(lambda _e: stores[v].put(msg))

    def node(v):
        store = stores[v]
        nb = nbrs[v]
        while True:
            msg = yield store.get()
            count[0] += 1
            if count[0] >= target and not done.triggered:
                done.succeed()
            if nb:
                send(v, rnd.choice(nb), msg)
                if lost[0] > lost[1]:
                    lost[1] += 1
                    send(v, rnd.choice(nb), msg)

    for v in nbrs:
        env.process(node(v))
        for _ in range(tokens_per_agent):
            if nbrs[v]:
                send(v, rnd.choice(nbrs[v]), "tok")
    t0 = time.perf_counter()
    env.run(until=done)
    return count[0], time.perf_counter() - t0


def meshsim_net(target: int, seed: int) -> tuple[int, float]:
    from meshsim.net.network import Network
    from meshsim.core.sim import Environment
    from meshsim.graphs import agent_name
    from meshsim.core.types import LatencySpec

    G, lat, nbrs = graph(seed)
    env = Environment(seed)
    net = Network(env, loss=LOSS)
    for v in G:
        net.add_node(agent_name(v))
    for u, v in sorted(G.edges):
        net.add_link(agent_name(u), agent_name(v), latency=LatencySpec("constant", lat[(u, v)]))
    count = [0]
    injected = [0]
    done = env.event()
    st = net.kind_stats("tok")

    for v in G:
        node = net.nodes[agent_name(v)]
        nb = [agent_name(w) for w in nbrs[v]]
        rnd = env.pyrandom("bench", node.name)

        def forward(msg, node=node, nb=nb, rnd=rnd):
            count[0] += 1
            if count[0] >= target and not done.triggered:
                done.succeed()
            if nb:
                node.send(rnd.choice(nb), "tok", None, 64)
                if st.dropped_loss > injected[0]:
                    injected[0] += 1
                    node.send(rnd.choice(nb), "tok", None, 64)

        node.on("tok", forward)
        for _ in range(TOKENS_PER_AGENT):
            if nb:
                node.send(rnd.choice(nb), "tok", None, 64)
    t0 = time.perf_counter()
    env.run(until=done)
    elapsed = time.perf_counter() - t0
    assert st.delivered == count[0], (st.delivered, count[0])
    return count[0], elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="best of N for each")
    args = ap.parse_args()
    best_b = best_m = 0.0
    for _ in range(args.repeat):
        n, t = bare_simpy(args.messages, args.seed)
        best_b = max(best_b, n / t)
        n, t = meshsim_net(args.messages, args.seed)
        best_m = max(best_m, n / t)
    print(f"bare simpy : {best_b:,.0f} msgs/s ({args.messages:,} messages, 576 agents, 1454 links, 5% loss)")
    print(f"meshsim    : {best_m:,.0f} msgs/s")
    print(f"ratio      : {best_m / best_b:.2f} (goal >= 0.80)")


if __name__ == "__main__":
    main()
