"""What a conservative parallel DES would see on meshsim's sparse scale runs (issue 22, docs/scaling.md).

For the sparse MeshHeal scale topologies (576, 2,304 and 5,760 agents, the
project's own ``ability_sparse`` builder, seed 1, as the scenarios build them)
this script

1. runs a short stretch of each scenario (``--tasks`` tasks, half healthy and
   half degraded, A3/A5 copies degrading at the midpoint) in this process with
   a hook on ``Environment.step`` that records every SimPy event's time and the
   agent it belongs to (a message delivery belongs to its receiver, a process
   or timer to the agent that owns it, the task driver to a global logical
   process), and every delivery's sender and receiver;
2. takes the lookahead L as the smallest measured link delay (sent -> delivered);
3. partitions the graph into k = 2, 4, 8, 16 parts with METIS (``pymetis``,
   the ``scaling`` extra; vertex weight = the agent's events, edge weight = the
   link's messages), or, without it, by recursive Kernighan-Lin bisection
   (networkx), and counts cut links and cross-partition messages;
4. replays the recorded events through YAWNS-style conservative windows (each
   window starts at the earliest pending event and covers [t, t + L): no
   message sent inside it can land inside it) and bounds the speed-up:

       T_serial = c_e * sum_w E_w
       T_k      = sum_w (c_e * max_p E_wp + c_x * max_p X_wp + c_sync)

   where E_wp are partition p's events in window w, X_wp the messages it sends
   to other partitions in w, c_e the measured CPU per event of this run, c_x
   the measured pickle round trip of a recorded message, and c_sync one
   barrier: ``S0`` takes c_sync = c_x = 0 (the ceiling no engine can beat),
   ``Slocal`` the two-process pipe round trip measured here, ``Slan`` an
   assumed 100 us (``--lan-sync``) for machines on an Ethernet LAN;
5. counts what Chandy-Misra-Bryant null messages would cost: one per
   inter-partition channel per L of simulated time when a channel is idle.

Run (needs ``pip install -e '.[scaling]'`` for METIS):

    nice python tests/benchmarks/partition.py [--tasks 2880] [--sizes 576,2304,5760]
        [--arrival sequential|'poisson(1)'] [--json out.json]

Prints one table per size. Only networkx, numpy and (optionally) pymetis
besides meshsim; never collected by pytest (no ``test_`` prefix).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import pickle
import sys
import time
from pathlib import Path
from typing import Iterable, Sequence

import networkx as nx
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SCEN = ROOT / "scenarios" / "meshheal"
KS = (2, 4, 8, 16)

#: size -> (scenario file, overrides): 2,304 agents are the 576-agent file at
#: 384 replicas with ability_sparse's default edge count (round(2304 * 1454 / 576)).
SIZES = {
    576: ("scale-576-sparse.yaml", []),
    2304: ("scale-576-sparse.yaml", ["network.topology.n=2304", "network.topology.m=5816", "agents.replicas=384"]),
    5760: ("scale-5760-sparse.yaml", []),
}

DRIVER = -1  # the task driver / observer: one global logical process
NOOP = -2  # an event nobody waits for any more (a cancelled timer): no work


# --------------------------------------------------------------------------
# partitioning and its metrics (pure functions; tests/unit/test_partition_metrics.py)


def cut_metrics(edges: Sequence[tuple[int, int]], parts: Sequence[int],
                weights: Sequence[float] | None = None) -> dict:
    """Edges whose ends lie in different parts, and their weight.

    ``edges`` are (u, v) node indices, ``parts[v]`` the part of node v,
    ``weights`` one per edge (default 1). Returns ``cut`` (edges cut),
    ``cut_weight``, ``total_weight``, ``cut_share`` (cut_weight / total) and
    ``channels``: the ordered part pairs (p, q), p != q, joined by a cut edge.
    """
    if weights is None:
        weights = [1.0] * len(edges)
    if len(weights) != len(edges):
        raise ValueError("one weight per edge")
    cut = 0
    cw = 0.0
    channels: set[tuple[int, int]] = set()
    for (u, v), w in zip(edges, weights):
        pu, pv = parts[u], parts[v]
        if pu != pv:
            cut += 1
            cw += w
            channels.add((pu, pv))
            channels.add((pv, pu))
    total = float(sum(weights))
    return {"cut": cut, "cut_weight": cw, "total_weight": total,
            "cut_share": cw / total if total else 0.0, "channels": len(channels)}


def imbalance(parts: Sequence[int], load: Sequence[float], k: int) -> float:
    """max part load / mean part load (1 = perfectly balanced)."""
    per = np.bincount(np.asarray(parts), weights=np.asarray(load, dtype=float), minlength=k)
    mean = per.sum() / k
    return float(per.max() / mean) if mean > 0 else 1.0


def partition(n: int, edges: Sequence[tuple[int, int]], k: int, vweights: Sequence[int] | None = None,
              eweights: Sequence[int] | None = None, seed: int = 1) -> tuple[list[int], str]:
    """Split nodes 0..n-1 into k parts; returns (part of each node, method used).

    METIS k-way (pymetis) when installed, else recursive Kernighan-Lin
    bisection (networkx; k a power of two), both seeded.
    """
    try:
        import pymetis
    except ImportError:
        pymetis = None
    if pymetis is not None:
        adj: list[list[int]] = [[] for _ in range(n)]
        wadj: list[list[int]] = [[] for _ in range(n)]
        for i, (u, v) in enumerate(edges):
            w = 1 if eweights is None else int(eweights[i])
            adj[u].append(v)
            adj[v].append(u)
            wadj[u].append(w)
            wadj[v].append(w)
        xadj = [0]
        adjncy: list[int] = []
        ew: list[int] = []
        for u in range(n):
            order = sorted(range(len(adj[u])), key=lambda j: adj[u][j])
            adjncy.extend(adj[u][j] for j in order)
            ew.extend(wadj[u][j] for j in order)
            xadj.append(len(adjncy))
        opts = pymetis.Options(seed=seed)
        csr = getattr(pymetis, "CSRAdjacency", None)
        graph = {"adjacency": csr(xadj, adjncy)} if csr is not None else {"xadj": xadj, "adjncy": adjncy}
        _cut, parts = pymetis.part_graph(k, **graph, vweights=list(vweights) if vweights else None,
                                         eweights=ew if eweights is not None else None, options=opts)
        return list(parts), "METIS k-way (pymetis)"
    if k & (k - 1):
        raise ValueError("Kernighan-Lin bisection needs k a power of two")
    G = nx.Graph()
    G.add_nodes_from(range(n))
    for i, (u, v) in enumerate(edges):
        G.add_edge(u, v, weight=1 if eweights is None else eweights[i])
    parts = [0] * n
    groups = [list(range(n))]
    while len(groups) < k:
        nxt = []
        for g in groups:
            a, b = nx.algorithms.community.kernighan_lin_bisection(G.subgraph(g), weight="weight", seed=seed)
            nxt.extend([sorted(a), sorted(b)])
        groups = nxt
    for p, g in enumerate(groups):
        for v in g:
            parts[v] = p
    return parts, "recursive Kernighan-Lin bisection (networkx)"


def windows(times: np.ndarray, lookahead: float) -> np.ndarray:
    """Window index of each event time (sorted ascending) under conservative
    synchronous windows: a window opens at the earliest pending event t and
    holds every event before t + lookahead."""
    idx = np.empty(len(times), dtype=np.int64)
    i = w = 0
    n = len(times)
    while i < n:
        j = int(np.searchsorted(times, times[i] + lookahead, side="left"))
        j = max(j, i + 1)
        idx[i:j] = w
        w += 1
        i = j
    return idx


# --------------------------------------------------------------------------
# the measured run


def _cell(c):
    try:
        return c.cell_contents
    except ValueError:  # an empty cell
        return None


def _owner_of(names: dict[str, int]):
    """A function event -> list of owning agent indices (see the module doc)."""
    from meshsim.net.links import Link
    from meshsim.net.network import Network

    arrive = Link._arrive
    batch = Network.deliver_batch

    def owner(ev) -> tuple[list[int], list[tuple[int, int]]]:
        cbs = ev.callbacks
        if not cbs:
            return [NOOP], []
        cb = cbs[0]
        fn = getattr(cb, "__func__", None)
        if fn is arrive:
            msg = ev._value[0]
            s, d = names[msg.src], names[msg.dst]
            return [d], [(s, d)]
        if fn is batch:
            out, sends = [], []
            for _link, dst, msg, _ep in ev._value:
                s, d = names[msg.src], names[dst]
                out.append(d)
                sends.append((s, d))
            return out, sends
        obj = getattr(cb, "__self__", None)
        gen = getattr(obj, "_generator", None)
        if gen is not None and gen.gi_frame is not None:
            obj = gen.gi_frame.f_locals.get("self")
        elif obj is None:
            cells = getattr(cb, "__closure__", None) or ()
            obj = next((v for v in map(_cell, cells) if hasattr(v, "name")), None)
        name = getattr(obj, "name", None)
        if isinstance(name, str) and name in names:
            return [names[name]], []
        return [DRIVER], []

    return owner


def measure(size: int, tasks: int, arrival: str, seed: int = 1) -> dict:
    """Run ``tasks`` tasks of the size's scenario with the step hook; return the recording."""
    import tempfile

    import meshsim
    from meshsim.core import sim
    from meshsim.scenario.model import build_graph

    fname, over = SIZES[size]
    half = tasks // 2
    over = list(over) + [
        f"tasks.count={tasks}",
        f"phases=[{{name: healthy, tasks: {half}}}, {{name: degraded, tasks: {tasks - half}}}]",
        f"events=[{{at_task: {half + 1}, type: degrade, agents: targets}}]",
        "output.trace=none",
    ]
    if arrival != "sequential":
        over.append(f"tasks.arrival={arrival}")
    sc = meshsim.load_scenario(SCEN / fname, overrides=over)
    t0 = time.perf_counter()
    G = build_graph(sc)
    build_s = time.perf_counter() - t0
    order = list(G.nodes)
    names = {v: i for i, v in enumerate(order)}
    owner = _owner_of(names)
    t_ev: list[float] = []
    o_ev: list[int] = []
    sends: list[tuple[float, int, int]] = []
    delays: list[float] = []
    samples: list = []
    orig = sim.Environment.step

    def step(self):
        q = self._queue
        if q:
            t, _p, _id, ev = q[0]
            owners, snd = owner(ev)
            for o in owners:
                t_ev.append(t)
                o_ev.append(o)
            for s, d in snd:
                sends.append((t, s, d))
            if snd:
                v = ev._value
                msg = v[0] if isinstance(v, tuple) else v[0][2]
                delays.append(t - msg.sent_at)
                if len(delays) % 997 == 1 and len(samples) < 200:
                    samples.append(msg)
        orig(self)

    with tempfile.TemporaryDirectory() as tmp:
        # first without the hook: the CPU per event (run setup and writing included, so c_e errs high,
        # in PDES's favour); then the same run (deterministic: the same events) with it
        c0 = time.process_time()
        w0 = time.perf_counter()
        meshsim.run(sc, seed=seed, out=Path(tmp) / "plain")
        cpu = time.process_time() - c0
        wall = time.perf_counter() - w0
        sim.Environment.step = step
        try:
            res = meshsim.run(sc, seed=seed, out=Path(tmp) / "hooked")
        finally:
            sim.Environment.step = orig
    edges = [(names[u], names[v]) for u, v in G.edges]
    return {"size": size, "tasks": tasks, "arrival": arrival, "build_s": build_s, "cpu_s": cpu, "wall_s": wall,
            "n": G.number_of_nodes(), "edges": edges, "times": np.asarray(t_ev), "owners": np.asarray(o_ev),
            "sends": np.asarray(sends) if sends else np.zeros((0, 3)), "min_delay": float(min(delays)),
            "samples": samples, "sim_time": float(res.summary["sim_time"]),
            "messages": int(res.summary["messages"]["total"]["delivered"])}


def pickle_cost(msgs: Iterable) -> tuple[float, int, int]:
    """Mean seconds to pickle and unpickle one message; how many pickled, how many failed."""
    ok, bad = [], 0
    for m in msgs:
        try:
            pickle.loads(pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL))
            ok.append(m)
        except Exception:
            bad += 1
    if not ok:
        return float("nan"), 0, bad
    reps = max(1, 2000 // len(ok))
    t0 = time.perf_counter()
    for _ in range(reps):
        for m in ok:
            pickle.loads(pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL))
    return (time.perf_counter() - t0) / (reps * len(ok)), len(ok), bad


def _picklable(m) -> bool:
    try:
        pickle.dumps(m)
        return True
    except Exception:
        return False


def _echo(conn) -> None:
    while True:
        x = conn.recv()
        if x is None:
            return
        conn.send(x)


def sync_cost(rounds: int = 2000) -> float:
    """Median seconds of a two-process pipe round trip on this machine (a barrier's floor)."""
    a, b = mp.Pipe()
    p = mp.get_context("spawn").Process(target=_echo, args=(b,), daemon=True)
    p.start()
    a.send(0)
    a.recv()
    ts = []
    for i in range(rounds):
        t0 = time.perf_counter()
        a.send(i)
        a.recv()
        ts.append(time.perf_counter() - t0)
    a.send(None)
    p.join(5)
    return float(np.median(ts))


# --------------------------------------------------------------------------
# the table


def analyse(rec: dict, ks: Sequence[int], c_sync_local: float, c_sync_lan: float, warmup: float = 1.0) -> dict:
    """The table's numbers for one recording; events before ``warmup`` simulated
    seconds (the hello / distance-vector start-up flood) are counted apart."""
    n = rec["n"]
    times, owners = rec["times"], rec["owners"]
    L = rec["min_delay"]
    c_e = rec["cpu_s"] / int((owners != NOOP).sum())
    early = times < warmup
    start_events = int(((owners != NOOP) & early).sum())
    start_windows = len(np.unique(windows(times[early & (owners != NOOP)], L))) if start_events else 0
    work = (owners != NOOP) & ~early
    t, o = times[work], owners[work]
    win = windows(t, L)
    nwin = int(win[-1]) + 1 if len(win) else 0
    per_win = np.bincount(win, minlength=nwin)
    pc, npk, nbad = pickle_cost(rec["samples"])
    # load per agent (the driver counts as an extra vertex placed with agent 0's part)
    load = np.bincount(np.where(o == DRIVER, 0, o), minlength=n)
    sends = rec["sends"]
    sends = sends[sends[:, 0] >= warmup]
    s_t, s_src, s_dst = sends[:, 0], sends[:, 1].astype(int), sends[:, 2].astype(int)
    eidx = {}
    for i, (u, v) in enumerate(rec["edges"]):
        eidx[(u, v)] = eidx[(v, u)] = i
    ecount = np.zeros(len(rec["edges"]), dtype=np.int64)
    off_graph = 0
    for s, d in zip(s_src, s_dst):
        j = eidx.get((int(s), int(d)))
        if j is None:
            off_graph += 1
        else:
            ecount[j] += 1
    s_win = windows_of(s_t, t, win)
    rows = []
    sim_span = float(t[-1] - t[0]) if len(t) else 0.0
    for k in ks:
        parts, method = partition(n, rec["edges"], k, vweights=[int(x) + 1 for x in load],
                                  eweights=[int(x) + 1 for x in ecount])
        parts_a = np.asarray(parts)
        cm = cut_metrics(rec["edges"], parts, None)
        cw = cut_metrics(rec["edges"], parts, ecount.tolist())
        ep = parts_a[np.where(o == DRIVER, 0, o)]
        E = np.zeros((nwin, k), dtype=np.int64)
        np.add.at(E, (win, ep), 1)
        cross = parts_a[s_src] != parts_a[s_dst]
        X = np.zeros((nwin, k), dtype=np.int64)
        np.add.at(X, (s_win[cross], parts_a[s_src[cross]]), 1)
        emax = E.max(axis=1).sum()
        xmax = X.max(axis=1).sum()
        serial = c_e * len(t)
        s0 = len(t) / emax
        s_loc = serial / (c_e * emax + pc * xmax + c_sync_local * nwin)
        s_lan = serial / (c_e * emax + pc * xmax + c_sync_lan * nwin)
        nulls = cm["channels"] * sim_span / L
        rows.append({"k": k, "method": method, "cut_links": cm["cut"], "cut_links_share": cm["cut"] / len(rec["edges"]),
                     "cross_msgs_share": cw["cut_share"], "cross_msgs_per_sim_s": cw["cut_weight"] / sim_span,
                     "channels": cm["channels"], "imbalance": imbalance(parts, load, k),
                     "events_per_window_per_part": len(t) / nwin / k,
                     "S0": s0, "Slocal": s_loc, "Slan": s_lan, "cmb_nulls_per_msg": nulls / max(1, len(s_t))})
    return {"size": rec["size"], "tasks": rec["tasks"], "arrival": rec["arrival"], "agents": n,
            "links": len(rec["edges"]), "build_s": rec["build_s"], "run_cpu_s": rec["cpu_s"],
            "sim_time_s": rec["sim_time"], "lookahead_s": L, "events": int(len(t)), "warmup_s": warmup,
            "startup_events": start_events, "startup_windows": start_windows,
            "noop_events": int(((owners == NOOP) & ~early).sum()), "driver_events": int((o == DRIVER).sum()),
            "deliveries": int(len(s_t)), "off_graph_deliveries": off_graph,
            "events_per_sim_s": len(t) / sim_span, "msgs_per_sim_s": len(s_t) / sim_span,
            "windows": nwin, "events_per_window_mean": float(per_win.mean()),
            "events_per_window_median": float(np.median(per_win)),
            "events_per_window_p90": float(np.percentile(per_win, 90)),
            "events_per_window_max": int(per_win.max()),
            "windows_with_1_event": float((per_win == 1).mean()),
            "c_event_us": c_e * 1e6, "c_pickle_us": pc * 1e6, "pickled": npk, "unpicklable": nbad,
            "c_sync_local_us": c_sync_local * 1e6, "c_sync_lan_us": c_sync_lan * 1e6, "rows": rows}


def windows_of(ts: np.ndarray, t: np.ndarray, win: np.ndarray) -> np.ndarray:
    """The window of each time in ``ts`` given events ``t`` (sorted) and their windows ``win``."""
    j = np.searchsorted(t, ts, side="right") - 1
    return win[np.clip(j, 0, len(win) - 1)]


def print_table(a: dict, out=sys.stdout) -> None:
    p = lambda *x: print(*x, file=out)  # noqa: E731
    p(f"## {a['agents']} agents, {a['links']} links: {a['tasks']} tasks, arrivals {a['arrival']}")
    p(f"graph build {a['build_s']:.2f} s; run CPU {a['run_cpu_s']:.1f} s (no hook); simulated {a['sim_time_s']:.0f} s")
    p(f"lookahead L = {a['lookahead_s'] * 1e3:.1f} ms (smallest measured link delay)")
    p(f"start-up (t < {a['warmup_s']:g} s, hello and distance-vector flood): {a['startup_events']} events in "
      f"{a['startup_windows']} windows, left out below")
    p(f"events {a['events']} ({a['events_per_sim_s']:.2f} per simulated s; {a['noop_events']} cancelled timers "
      f"left out, {a['driver_events']} of the global task driver), deliveries {a['deliveries']} "
      f"({a['msgs_per_sim_s']:.2f} per simulated s; {a['off_graph_deliveries']} not on a graph link)")
    p(f"windows {a['windows']}: events per window mean {a['events_per_window_mean']:.2f}, median "
      f"{a['events_per_window_median']:.0f}, p90 {a['events_per_window_p90']:.0f}, max {a['events_per_window_max']}; "
      f"{a['windows_with_1_event'] * 100:.0f} % of windows hold one event")
    p(f"per-event CPU c_e = {a['c_event_us']:.1f} us; message pickle round trip c_x = {a['c_pickle_us']:.1f} us "
      f"({a['pickled']} sampled, {a['unpicklable']} unpicklable); barrier: local pipe {a['c_sync_local_us']:.0f} us, "
      f"LAN (assumed) {a['c_sync_lan_us']:.0f} us")
    p("")
    p("| k | cut links | cut share | cross-partition msgs | cross msgs / sim s | channels | imbalance "
      "| events / window / part | S0 (free sync) | S local | S LAN | CMB nulls per msg |")
    p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in a["rows"]:
        p(f"| {r['k']} | {r['cut_links']} | {r['cut_links_share'] * 100:.1f} % | {r['cross_msgs_share'] * 100:.1f} % "
          f"| {r['cross_msgs_per_sim_s']:.2f} | {r['channels']} | {r['imbalance']:.2f} "
          f"| {r['events_per_window_per_part']:.2f} | {r['S0']:.2f} | {r['Slocal']:.3f} | {r['Slan']:.3f} "
          f"| {r['cmb_nulls_per_msg']:.0f} |")
    p(f"\npartitioner: {a['rows'][0]['method']}\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="576,2304,5760", help="comma-separated agent counts (576, 2304, 5760)")
    ap.add_argument("--tasks", type=int, default=2880, help="tasks per measured run (default 2880)")
    ap.add_argument("--arrival", default="sequential", help="'sequential' (the papers') or 'poisson(RATE)'")
    ap.add_argument("--lan-sync", type=float, default=100e-6, help="assumed LAN barrier seconds (default 1e-4)")
    ap.add_argument("--warmup", type=float, default=1.0, help="simulated seconds of start-up left out (default 1)")
    ap.add_argument("--cache", help="keep each size's recording here (a .pkl per size) and reuse it")
    ap.add_argument("--json", help="also write the numbers here")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    for s in sizes:
        if s not in SIZES:
            ap.error(f"--sizes: {s} is not one of {sorted(SIZES)}")
    local = sync_cost()
    out = []
    for s in sizes:
        cache = Path(args.cache) / f"rec-{s}-{args.tasks}-{args.arrival}.pkl" if args.cache else None
        if cache is not None and cache.exists():
            rec = pickle.loads(cache.read_bytes())
        else:
            rec = measure(s, args.tasks, args.arrival)
            if cache is not None:
                cache.parent.mkdir(parents=True, exist_ok=True)
                rec["samples"] = [m for m in rec["samples"] if _picklable(m)]
                cache.write_bytes(pickle.dumps(rec, protocol=pickle.HIGHEST_PROTOCOL))
        a = analyse(rec, KS, local, args.lan_sync, args.warmup)
        print_table(a)
        sys.stdout.flush()
        out.append(a)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
