"""Build times and statistics of ability-aware sparse graphs (MeshHeal Tab. B12).

For 96 / 288 / 576 agents (the built-in six-agent profile replicated, one
third degraded targets) builds ``ability_sparse_graph`` with the table's edge
counts and prints build time, the edge count before random fill, edges, edge
fraction, degree min/mean/max, diameter, the ability distance and whether
``check_ability_graph`` found violations.

Run: python tests/benchmarks/bench_ability_topology.py [--seeds 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

import networkx as nx

from meshsim.graphs.ability import (ability_distance, ability_sparse_graph, check_ability_graph,
                                      default_edges, default_profile)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5, help="seeds per size (default 5)")
    args = ap.parse_args()
    header = (f"{'agents':>6} {'edges':>6} {'min':>5} {'build s':>8} {'max s':>7} {'frac':>7} "
              f"{'deg min/mean/max':>17} {'diam':>4} {'abil.dist':>9} {'violations':>10}")
    print(header)
    print("-" * len(header))
    for n in (96, 288, 576):
        m = default_edges(n)
        ab, tg = default_profile(n)
        times, mins, diams, dists, viol = [], [], [], [], 0
        degs: list[int] = []
        for seed in range(args.seeds):
            t0 = time.perf_counter()
            G = ability_sparse_graph(ab, tg, m=m, seed=seed)
            times.append(time.perf_counter() - t0)
            mins.append(G.graph["min_edges"])
            degs.extend(d for _, d in G.degree())
            diams.append(nx.diameter(G))
            dists.append(ability_distance(G, ab, exclude=tg)["max"])
            viol += len(check_ability_graph(G, ab, tg))
        frac = m / (n * (n - 1) / 2)
        deg = f"{min(degs)}/{statistics.mean(degs):.2f}/{max(degs)}"
        print(f"{n:>6} {m:>6} {min(mins):>5} {statistics.mean(times):>8.4f} {max(times):>7.4f} "
              f"{frac:>7.4f} {deg:>17} {max(diams):>4} {max(dists):>9} {viol:>10}")


if __name__ == "__main__":
    main()
