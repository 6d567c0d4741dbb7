"""Run metrics computed by an outside observer (never visible to agents)."""
from __future__ import annotations

import math
import statistics
from collections import Counter, deque
from typing import TYPE_CHECKING, Any, Iterable, Optional

from .collapse import collapse_summary
from .ledger import ReviewLedger

if TYPE_CHECKING:  # pragma: no cover
    from ..net.network import Network
    from ..net.routing import DistanceVector

__all__ = ["true_distances", "routing_mismatches", "RoutingConvergence", "aggregate", "quantile",
           "detection_summary"]


def true_distances(net: "Network", tables: dict[str, "DistanceVector"], ability: str,
                   infinity: int) -> dict[str, int]:
    """Hop distance from every agent to the nearest eligible holder over *up* links.

    Capped at ``infinity`` (unreachable, or at least the hop limit away).
    """
    adj: dict[str, list[str]] = {v: [] for v in net.nodes}
    for (u, v), link in net.links.items():
        if link.up:
            adj[u].append(v)
            adj[v].append(u)
    dist = {v: 0 for v, t in tables.items() if ability in t.held}
    queue = deque(dist)
    while queue:
        u = queue.popleft()
        if dist[u] + 1 >= infinity:
            continue
        for w in adj[u]:
            if w not in dist:
                dist[w] = dist[u] + 1
                queue.append(w)
    return {v: dist.get(v, infinity) for v in net.nodes}


def routing_mismatches(net: "Network", tables: dict[str, "DistanceVector"]) -> list[tuple]:
    """(agent, ability, table distance, true distance) for every wrong entry."""
    if not tables:
        return []
    infinity = next(iter(tables.values())).infinity
    abilities = sorted({s for t in tables.values() for s in t.universe})
    bad = []
    for s in abilities:
        truth = true_distances(net, tables, s, infinity)
        for v in sorted(tables):
            d = tables[v].distance(s)
            if d != truth[v]:
                bad.append((v, s, d, truth[v]))
    return bad


class RoutingConvergence:
    """Per scenario event: when did routing tables stop changing, and were they right?

    A window opens at each event (and at t=0); it closes when the next event
    fires or the run ends. ``convergence_time`` is the last table change in
    the window minus its start; it is ``None`` if the tables were still wrong
    at the window's end.
    """

    def __init__(self, net: "Network", protocol: Any):
        self.net = net
        self.protocol = protocol
        self.windows: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._last_change = 0.0
        self.changes = 0

    def changed(self, agent: str, ability: str, distance: int) -> None:
        self._last_change = self.net.env.now
        self.changes += 1

    def open(self, label: str, t: float) -> None:
        self.close()
        self._open = {"event": label, "at": t}
        self._last_change = t

    def close(self) -> None:
        if self._open is None:
            return
        w = self._open
        self._open = None
        bad = routing_mismatches(self.net, self.protocol.routing_tables())
        w["closed_at"] = self.net.env.now
        w["wrong_entries"] = len(bad)
        w["correct"] = not bad
        w["convergence_time"] = (self._last_change - w["at"]) if not bad else None
        self.windows.append(w)

    def summary(self) -> dict[str, Any]:
        self.close()
        final = self.windows[-1] if self.windows else None
        times = [w["convergence_time"] for w in self.windows if w["convergence_time"] is not None]
        return {
            "windows": self.windows,
            "table_changes": self.changes,
            "tables_correct_at_end": bool(final and final["correct"]),
            "max_convergence_time": max(times) if times else None,
            "all_converged": all(w["correct"] for w in self.windows),
        }


def _leaves(obj: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, obj


def aggregate(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean, sample std, min, max and n for every numeric leaf across seeds.

    Booleans are aggregated as the count of ``true``; ``None`` (e.g. an
    undetected agent's delay) is left out of the mean and counted in
    ``missing``.
    """
    values: dict[str, list] = {}
    for s in summaries:
        for path, v in _leaves(s):
            values.setdefault(path, []).append(v)
    out: dict[str, Any] = {}
    for path in sorted(values):
        vals = values[path]
        if all(isinstance(v, bool) for v in vals):
            out[path] = {"true": sum(vals), "n": len(vals)}
            continue
        nums = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)
                and math.isfinite(v)]
        if not nums or len(nums) + sum(v is None for v in vals) != len(vals):
            continue
        entry = {"mean": statistics.fmean(nums), "std": statistics.stdev(nums) if len(nums) > 1 else 0.0,
                 "min": min(nums), "max": max(nums), "n": len(nums)}
        missing = sum(v is None for v in vals)
        if missing:
            entry["missing"] = missing
        out[path] = entry
    return out


# ---------------------------------------------------------------------------
# MeshHeal (Sec. 3.2, Sec. 6, App. C.5)


def _mean(xs: list) -> Any:
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def degradation_intervals(log: list[dict], n_tasks: int) -> dict[str, list[tuple[int, int]]]:
    """Per agent, [b_i, r_i) task intervals of injected degradation (r_i = N+1 if never recovered)."""
    out: dict[str, list[tuple[int, int]]] = {}
    open_: dict[str, int] = {}
    for rec in log:
        a, t = rec["agent"], rec["task"]
        if rec["degraded"] and a not in open_:
            open_[a] = t
        elif not rec["degraded"] and a in open_:
            out.setdefault(a, []).append((open_.pop(a), t))
    for a, b in open_.items():
        out.setdefault(a, []).append((b, n_tasks + 1))
    return out


def self_healing(states: list[dict], b: int, r: int, n_tasks: int, agent: str,
                 outputs: Optional[list[int]] = None) -> dict[str, Any]:
    """Detection delay, closure and reintegration for one degradation interval (Sec. 3.2).

    ``outputs``: the task index of each of the agent's own outputs (one entry
    per output, any order); with it, ``detection_delay_outputs`` counts those
    in [b_i, c_i): the delay in the agent's own outputs, which the detector
    sees, rather than in stream tasks, which grow with the network's size.

    A state change recorded at task k takes effect from task k (the update
    that made it ran while task k was being processed; Tab. C5 counts so).
    c_i = first k >= b_i with a change to isolated (or isolated already at b_i);
    closure: isolated for every c_i <= t < r_i (no change out of isolated in
    that span; probe work does not count as leaving); u_i = first task from
    which the agent stays normal to the end of the stream.
    """
    mine = [s for s in states if s["agent"] == agent]
    state_at_b = "normal"
    for s in mine:
        if s["task"] < b:
            state_at_b = s["new"]
    c = b if state_at_b == "isolated" else None
    if c is None:
        for s in mine:
            if b <= s["task"] < r and s["new"] == "isolated":
                c = s["task"]
                break
    out: dict[str, Any] = {"degraded_at": b, "recovered_at": r if r <= n_tasks else None,
                           "isolated_at": c, "detection_delay": (c - b) if c is not None else None}
    if outputs is not None:
        out["detection_delay_outputs"] = sum(1 for k in outputs if b <= k < c) if c is not None else None
        out["task_share"] = _frac(len(outputs), n_tasks)
    if c is None:
        out.update(closure=False, reintegrated_at=None, reintegration_delay=None)
        return out
    closure = not any(c < s["task"] < r and s["old"] == "isolated" for s in mine)
    # u_i: the first return to the normal state after the agent's last isolation,
    # provided it is never isolated again (Tab. C5: "move to watched at 422 and
    # return to normal routing at 430"). Later watched spells are not exclusions:
    # watched agents are routed as normal ones (Sec. 4.2). The strict variant
    # also requires the normal *state* to last to the end of the stream.
    u = u_strict = None
    if r <= n_tasks:
        last_iso = max((s["task"] for s in mine if s["new"] == "isolated"), default=None)
        after = [s for s in mine if s["new"] == "normal" and (last_iso is None or s["task"] > last_iso)]
        if after:
            u = max(r, after[0]["task"])
        if (mine[-1]["new"] if mine else "normal") == "normal":
            u_strict = max(r, max((s["task"] for s in mine if s["new"] == "normal"), default=r))
    out.update(closure=closure, reintegrated_at=u, reintegration_delay=(u - r) if u is not None else None,
               reintegration_delay_strict=(u_strict - r) if u_strict is not None else None)
    return out


def _frac(k: int, n: int) -> Any:
    return k / n if n else None


def review_audit(review_rows: Iterable[dict], task_rows: Iterable[dict], tau: float) -> dict[str, Any]:
    """MeshHeal App. C.5 / Tab. C8, as an outside observer measures it.

    Outputs of degraded agents (their injected condition at review time) are
    the positives, healthy agents' outputs the negatives: the rates measure
    discrimination between conditions, not detection of wrong answers. A
    decision is "flagged" when its score is at most ``tau`` (the initial median
    q0, or the final score q after any committee). Takeover outcomes of
    Finalize outputs are checked against the gold answer; a Contribute
    Takeover is followed to its task's final outcome. Counts are kept next to
    rates so that seeds can be pooled.

    The counts are kept row by row (:class:`meshsim.observe.ledger.ReviewLedger`):
    a run feeds them as its reviews are written, without keeping the rows.
    """
    ledger = ReviewLedger(tau)
    for r in review_rows:
        ledger.add(r)
    task_ok = {t["index"]: bool(t["correct"]) for t in task_rows}
    return ledger.audit(task_ok.get)


def quantile(xs: Iterable[float], q: float) -> Optional[float]:
    """The ``q`` quantile of ``xs`` by linear interpolation between order
    statistics (numpy's default, ``statistics.quantiles(method="inclusive")``);
    None for no values."""
    v = sorted(xs)
    if not v:
        return None
    pos = (len(v) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _delay_stats(prefix: str, xs: list) -> dict[str, Any]:
    return {f"{prefix}_mean": _mean(xs), f"{prefix}_median": quantile(xs, 0.5), f"{prefix}_p90": quantile(xs, 0.9),
            f"{prefix}_max": max(xs) if xs else None}


def detection_summary(episodes: list[dict[str, Any]], states: list[dict], agents: Iterable[str],
                      degraded_agents: Iterable[str], n_tasks: Optional[int] = None) -> dict[str, Any]:
    """Network-level detector performance (docs/outputs.md, ``detection``).

    ``episodes``: one :func:`self_healing` result per degradation interval of
    every degraded agent. Over them: how many were detected (isolated before
    recovery), the delay statistics (in stream tasks and in the agent's own
    outputs), the closure rate among the detected, and the reintegration
    delay statistics among the recovered.

    A *false isolation* is an isolation of an agent that is healthy (not
    degraded) at the task of the isolation; ``false_isolations`` counts the
    agents with at least one, ``false_isolation_events`` the isolations. The
    one definition the console, summaries and sweep tables share; every other
    count has its own name: ``never_degraded_isolated`` (agents never degraded
    in the run and ever isolated), ``degraded_isolated_while_healthy``
    (agents degraded at some point and isolated while healthy; the two add up
    to ``false_isolations``), ``isolated_before_degradation`` (of those, the
    agents isolated before their first degradation). ``degraded_agents`` may
    be a mapping agent -> [(b, r)] (from :func:`degradation_intervals`);
    without intervals an agent counts as degraded throughout. The rate divides
    by ``ever_healthy_agents``, the agents healthy at some task 1..``n_tasks``.
    Over the never
    degraded agents: the watched-but-not-isolated episodes (normal -> watched,
    then back to normal, or still watched at the end, without an isolation in
    between).
    """
    intervals: dict[str, list] = (dict(degraded_agents) if isinstance(degraded_agents, dict)
                                  else {a: [(-math.inf, math.inf)] for a in degraded_agents})
    degraded = set(intervals)
    everyone = set(agents) | degraded
    healthy = sorted(everyone - degraded)
    delays = [e["detection_delay"] for e in episodes if e["detection_delay"] is not None]
    delays_out = [e["detection_delay_outputs"] for e in episodes if e.get("detection_delay_outputs") is not None]
    detected = len(delays)
    recovered = [e for e in episodes if e["recovered_at"] is not None]
    rein = [e["reintegration_delay"] for e in recovered if e.get("reintegration_delay") is not None]
    n = len(episodes)
    out: dict[str, Any] = {"degraded_agents": len(degraded), "episodes": n, "detected": detected,
                           "missed": n - detected, "missed_rate": _frac(n - detected, n)}
    out.update(_delay_stats("delay", delays))
    out.update(_delay_stats("delay_outputs", delays_out))
    shares = [e["task_share"] for e in episodes if e.get("task_share") is not None]
    out["task_share_mean"] = _mean(shares)
    out["closure_rate"] = _frac(sum(1 for e in episodes if e["detection_delay"] is not None and e["closure"]),
                                detected)
    out.update(recovered=len(recovered), reintegrated=len(rein))
    out.update(_delay_stats("reintegration_delay", rein))

    def degraded_at(agent: str, k: int) -> bool:
        return any(b <= k < r for b, r in intervals.get(agent, ()))

    def first_b(agent: str) -> float:
        return min((b for b, _r in intervals.get(agent, ())), default=math.inf)

    healthy_set = set(healthy)
    false_events = 0
    false_agents: set[str] = set()
    before_b: set[str] = set()
    iso_healthy: set[str] = set()
    ever_healthy = set(healthy)
    watched_open: dict[str, bool] = {}
    watched_only = 0
    watched_agents: set[str] = set()
    for s in states:
        a = s["agent"]
        if s["new"] == "isolated" and not degraded_at(a, s["task"]):
            false_events += 1
            false_agents.add(a)
            if a in degraded and s["task"] < first_b(a):
                before_b.add(a)
        if a not in healthy_set:
            continue
        if s["new"] == "isolated":
            iso_healthy.add(a)
            watched_open.pop(a, None)
        elif s["new"] == "watched" and s["old"] == "normal":
            watched_open[a] = True
        elif s["new"] == "normal" and watched_open.pop(a, False):
            watched_only += 1
            watched_agents.add(a)
    for a in watched_open:  # still watched at the end, never isolated
        watched_only += 1
        watched_agents.add(a)
    # agents healthy at some task 1..N: every never-degraded one, and a degraded one whose
    # intervals leave a gap (before its first b_i, between intervals, after a recovery)
    for a, spans in intervals.items():
        cursor = 1
        for b, r in sorted(spans):
            if b > cursor:
                break
            cursor = max(cursor, r)
        else:
            if n_tasks is None or cursor > n_tasks:
                continue
        ever_healthy.add(a)
    out.update(healthy_agents=len(healthy), ever_healthy_agents=len(ever_healthy),
               false_isolations=len(false_agents),
               false_isolation_rate=_frac(len(false_agents), len(ever_healthy)),
               false_isolation_events=false_events,
               falsely_isolated=sorted(false_agents, key=_order),
               never_degraded_isolated=len(iso_healthy),
               never_degraded_isolated_rate=_frac(len(iso_healthy), len(healthy)),
               degraded_isolated_while_healthy=len(false_agents & degraded),
               isolated_before_degradation=len(before_b),
               watched_not_isolated=watched_only, watched_not_isolated_agents=len(watched_agents))
    return out


def _order(name: str) -> tuple:
    return (len(name), name)


def _outputs_by_agent(proto: Any) -> dict[str, Any]:
    """Task index of every output each agent produced that counts as evidence:
    MeshHeal, its reviewed outputs (a final score q, so a detector update;
    probes included; outputs accepted without a reviewer are left out), other
    methods, the producers the layer recorded per task (both kept as the rows
    went by: :mod:`meshsim.observe.ledger`)."""
    return proto.reviews.outputs if proto.reviews_are_evidence else proto.ledger.outputs


def execution_summary(proto: Any) -> dict[str, Any]:
    """summary.json fields every method on the shared execution layer has
    (MeshHeal App. B.4): accuracy per phase, tokens and calls per task as the
    layer counted them, unanswered tasks, and the self-healing criteria
    (Sec. 3.2) from the method's routing-state records: a method that never
    isolates an agent has detection delay ``None`` (infinite), closure false
    and reintegration undefined."""
    led = proto.ledger  # running counts over tasks.jsonl (issue 22): fmean of the rows, bit for bit
    mean = led.mean
    n = len(proto.stream)
    acc = {"overall": mean(led.correct, led.n)}
    by_phase = led.phases
    acc["by_phase"] = {k: mean(v[1], v[0]) for k, v in by_phase.items()}
    intervals = degradation_intervals(proto.degraded_log, n)
    states = proto.state_rows
    agents: dict[str, Any] = {}
    missed = 0
    episodes: list[dict[str, Any]] = []
    outputs = _outputs_by_agent(proto)
    # each agent's own state changes, in order: one pass instead of one per degraded agent
    own_states: dict[str, list[dict]] = {}
    for s in states:
        own_states.setdefault(s["agent"], []).append(s)
    for a in sorted(intervals, key=lambda x: (len(x), x)):
        per = [self_healing(own_states.get(a, []), b, r, n, a, outputs.get(a, [])) for b, r in intervals[a]]
        episodes += per
        missed += sum(1 for p in per if p["isolated_at"] is None)
        agents[a] = dict(per[0])
        if len(per) > 1:
            agents[a]["intervals"] = per

    isolated_end: dict[str, str] = {}
    for s in states:
        isolated_end[s["agent"]] = s["new"]
    return {
        "tasks": led.n,
        "accuracy": acc,
        "tokens_per_task": mean(led.tokens, led.n),
        "calls_per_task": mean(led.calls, led.n),
        "calls_per_task_by_phase": {k: mean(v[2], v[0]) for k, v in by_phase.items()},
        "tokens_per_task_by_phase": {k: mean(v[3], v[0]) for k, v in by_phase.items()},
        "unanswered": led.unanswered,
        "agents": agents,
        "missed": missed,
        "detection": detection_summary(episodes, states, getattr(proto, "K", {}), intervals, n),
        "collapse": collapse_summary(n, states, intervals, getattr(proto, "topology_rows", []),
                                     getattr(proto, "K", {})),
        "isolated_at_end": sorted((a for a, s in isolated_end.items() if s == "isolated"),
                                  key=lambda x: (len(x), x)),
        "state_changes": len(states),
        "backend": proto.ctx.backend.describe() if proto.ctx.backend is not None else None,
    }


def meshheal_summary(proto: Any) -> dict[str, Any]:
    out = execution_summary(proto)
    out["unreviewed_outputs"] = proto.unreviewed
    out["audit"] = proto.reviews.audit(proto.ledger.task_ok)
    if getattr(proto, "byz_log", None):  # only runs with Byzantine agents (outputs of others unchanged)
        out["adversarial"] = adversarial_summary(proto)
    return out


def _first_isolation(states: list[dict], agent: str, start: int, end: int = 10 ** 12,
                     degraded: Optional[bool] = None) -> Optional[int]:
    """First task k in [start, end) at which ``agent`` is isolated: ``start`` if it
    already was (as detection delay counts it, Sec. 3.2), else its first change to
    isolated; ``degraded`` filters those changes on the agent's injected state."""
    state = "normal"
    for s in states:
        if s["agent"] != agent:
            continue
        if s["task"] < start:
            state = s["new"]
            continue
        break
    if state == "isolated":
        return start if start < end else None
    for s in states:
        if s["agent"] != agent or s["task"] < start:
            continue
        if s["task"] >= end:
            break
        if s["new"] == "isolated" and (degraded is None or s["degraded"] == degraded):
            return s["task"]
    return None


def adversarial_summary(proto: Any) -> dict[str, Any]:
    """Byzantine MeshHeal agents (issue 20; equations in docs/adversarial.md, "Metrics").

    * framing: each framed target that was healthy, isolated (own detector) at
      or after the first frame event while not degraded, and when (delay in tasks);
    * shielding: each shielded target's degradation intervals from the first shield
      event on, and whether it stayed un-isolated through them;
    * routing lies: tasks that reached a routing liar over a link (attracted),
      dropped or answered wrongly by it (lost), per hundred tasks of the stream
      from the first lie, before and after the first reaction (a routing liar
      isolated), or over the whole span when nothing reacted;
    * liars: when each liar was itself isolated, and honest non-target agents
      isolated while healthy after the attacks began (collateral).
    """
    n = len(proto.stream)
    states = proto.state_rows
    log = proto.byz_log
    intervals = degradation_intervals(proto.degraded_log, n)
    start: dict[str, int] = {}
    for rec in log:
        if rec["behaviour"] != "honest":
            start.setdefault(rec["agent"], rec["task"])
    liars = sorted(start, key=_order)
    first = min(start.values()) if start else 1
    by_liar = {a: sorted({r["behaviour"] for r in log if r["agent"] == a}) for a in liars}

    def _start_of(kind: str) -> Optional[int]:
        return min((r["task"] for r in log if r["behaviour"] == kind), default=None)

    out: dict[str, Any] = {"liars": liars, "behaviours": by_liar, "first_attack_task": first}
    coalition = sorted({m for r in log for m in r.get("coalition", ())}, key=_order)
    out["coalition"] = coalition
    liar_rows = {}
    for a in liars:
        c = _first_isolation(states, a, start[a])
        liar_rows[a] = {"from_task": start[a], "isolated_at": c, "delay": (c - start[a]) if c is not None else None}
    out["liars_isolated"] = sum(1 for r in liar_rows.values() if r["isolated_at"] is not None)
    out["liar_agents"] = liar_rows

    f0 = _start_of("frame")
    if f0 is not None:
        targets = sorted({t for r in log if r["behaviour"] == "frame" for t in r["targets"]}, key=_order)
        rows = {}
        for t in targets:
            c = _first_isolation(states, t, f0, degraded=False)
            by = sorted({r["agent"] for r in log if r["behaviour"] == "frame" and t in r["targets"]}, key=_order)
            rows[t] = {"isolated_at": c, "delay": (c - f0) if c is not None else None, "by": by}
        k = sum(1 for r in rows.values() if r["isolated_at"] is not None)
        out["framing"] = {"from_task": f0, "targets": len(targets), "framed_isolated": k,
                          "framed_isolated_share": _frac(k, len(targets)), "any_isolated": float(k > 0),
                          "delay_mean": _mean([r["delay"] for r in rows.values()]), "agents": rows}
    s0 = _start_of("shield")
    if s0 is not None:
        targets = sorted({t for r in log if r["behaviour"] == "shield" for t in r["targets"]}, key=_order)
        rows = {}
        for t in targets:
            spans = [(max(b, s0), r) for b, r in intervals.get(t, []) if r > s0]
            if not spans:
                continue
            iso = [_first_isolation(states, t, b, r, degraded=True) for b, r in spans]
            hit = [c for c in iso if c is not None]
            by = sorted({r["agent"] for r in log if r["behaviour"] == "shield" and t in r["targets"]}, key=_order)
            rows[t] = {"degraded_from": spans[0][0], "isolated_at": hit[0] if hit else None,
                       "delay": (hit[0] - spans[0][0]) if hit else None, "by": by}
        k = sum(1 for r in rows.values() if r["isolated_at"] is None)
        out["shielding"] = {"from_task": s0, "targets": len(targets), "degraded_targets": len(rows),
                            "shielded_not_isolated": k, "shielded_share": _frac(k, len(rows)),
                            "any_shielded": float(k > 0) if rows else None,
                            "all_shielded": float(k == len(rows)) if rows else None, "agents": rows}
    r0 = _start_of("route_lie")
    if r0 is not None:
        routers = {r["agent"] for r in log if r["behaviour"] == "route_lie"}
        hits = proto.byz_route_rows
        task_ok = proto.ledger.task_ok
        # a reaction: a routing liar's change to isolated after its lies began (one
        # isolated before then was not reacting to them)
        reaction = min((s["task"] for s in states if s["agent"] in routers and s["task"] >= r0
                        and s["new"] == "isolated"), default=None)

        def span(lo: int, hi: int) -> dict[str, Any]:
            tasks = max(0, hi - lo)
            mine = [h for h in hits if lo <= h["task"] < hi]
            att = len({h["task"] for h in mine})
            lost = len({h["task"] for h in mine if h["outcome"] == "drop"
                        or (h["outcome"] == "corrupt" and not task_ok(h["task"]))})
            return {"from_task": lo, "to_task": hi - 1, "tasks": tasks, "attracted": att, "lost": lost,
                    "attracted_per_100": 100.0 * att / tasks if tasks else None,
                    "lost_per_100": 100.0 * lost / tasks if tasks else None}

        whole = span(r0, n + 1)
        out["routing"] = dict(whole, reaction_at=reaction,
                              before_reaction=span(r0, reaction) if reaction is not None else whole,
                              after_reaction=span(reaction, n + 1) if reaction is not None else None,
                              outcomes={o: sum(1 for h in hits if h["outcome"] == o)
                                        for o in ("drop", "corrupt", "pass")})
        out["routing"]["losses"] = route_losses(getattr(proto, "lost_rows", []), r0, routers)
    targets_all = {t for r in log for t in r.get("targets", ())}
    collateral = {}
    for a in sorted(getattr(proto, "K", {}), key=_order):
        if a in start or a in targets_all:
            continue
        c = _first_isolation(states, a, first, degraded=False)
        if c is not None:
            collateral[a] = c
    out["collateral_isolated"] = len(collateral)
    out["collateral_agents"] = list(collateral)
    out["collateral_at"] = collateral
    return out


def route_losses(lost_rows: Iterable[tuple], start: int, liars: Iterable[str]) -> dict[str, Any]:
    """Where tasks were lost, from the observer's route records (issue 34):
    tasks from ``start`` on that ended unanswered (a black hole's drops time out)
    or wrong (a grey hole's own answers), counted by the last agent each reached,
    and the share of them whose last holder was a routing liar."""
    liars = set(liars)
    out: dict[str, Any] = {}
    for kind in ("unanswered", "wrong"):
        by: dict[str, int] = {}
        for i, holder, k in lost_rows:
            if k == kind and i >= start:
                key = holder if holder is not None else "?"
                by[key] = by.get(key, 0) + 1
        n = sum(by.values())
        at = sum(c for a, c in by.items() if a in liars)
        out[kind] = {"tasks": n, "at_liars": at, "at_liars_share": _frac(at, n),
                     # the ten agents holding most of them last, most first: [agent, tasks] pairs
                     "by_last_holder": [[a, c] for a, c in sorted(by.items(), key=lambda e: (-e[1], _order(e[0])))[:10]]}
    return out


# ---------------------------------------------------------------------------
# SAC and CP-WBFT (SAC paper Sec. 5.1): IAA, FAA, BFTI, RA, group accuracy, H-Majority


def _plurality_hit(answers: list, truth: Any) -> float:
    """1 if the most common answer is the truth; 1/k when k answers tie for most
    common and the truth is one of them (a fair tie-break); 0 otherwise."""
    votes: dict[Any, int] = {}
    for a in answers:
        if a is not None:
            votes[a] = votes.get(a, 0) + 1
    if not votes:
        return 0.0
    top = max(votes.values())
    best = [a for a, c in votes.items() if c == top]
    return 1.0 / len(best) if truth in best else 0.0


def _consensus_group(role: str) -> str:
    return "strong" if role == "strong" else "weak" if role in ("weak", "faulty") else "adversarial"


def _answers_by_round(row: dict, T: int) -> dict[str, list]:
    """Each agent's answer at rounds 0..T; an agent that stopped early keeps its last answer."""
    out = {}
    for a, seq in row["answers"].items():
        if not seq:
            continue  # joined after the query started
        out[a] = list(seq[:T + 1]) + [seq[-1]] * max(0, T + 1 - len(seq))
    return out


def engine_decision(entries: Iterable[tuple[Optional[str], float]], threshold: float = 0.5) -> Optional[str]:
    """The authors' global consensus engine over every agent's final (answer,
    confidence), in agent order: within each answer group confidences below
    ``threshold`` are dropped unless that empties the group; the answer with
    the highest mean of what is kept wins, ties by the larger kept count, then
    by first appearance. With no confidence at all: the plurality answer."""
    entries = list(entries)
    groups: dict[Optional[str], list[float]] = {}
    for a, c in entries:
        groups.setdefault(a, []).append(c)
    if not groups:
        return None
    if sum(c for _a, c in entries) == 0:
        return Counter(a for a, _c in entries).most_common(1)[0][0]
    best, key = None, None
    for a, cs in groups.items():
        kept = [c for c in cs if c >= threshold] or cs
        k = (sum(kept) / len(kept), len(kept))
        if key is None or k > key:
            best, key = a, k
    return best


def consensus_query_row(row: dict, T: int) -> dict[str, Any]:
    """One line of ``queries.jsonl``: the query's answers per round and its metrics."""
    truth = row["truth"]
    answers = _answers_by_round(row, T)
    roles = row["roles"]
    acc: dict[str, list] = {}
    for g in ("all", "honest", "strong", "weak", "adversarial"):
        members = [a for a in answers if g == "all" or _consensus_group(roles.get(a, "strong")) == g
                   or (g == "honest" and _consensus_group(roles.get(a, "strong")) != "adversarial")]
        acc[g] = [(_mean([float(answers[a][t] == truth) for a in members]) if members else None)
                  for t in range(T + 1)]
    honest = [a for a in answers if _consensus_group(roles.get(a, "strong")) != "adversarial"]
    h_majority = _plurality_hit([answers[a][T] for a in honest], truth)
    if "confs" in row:
        # CP-WBFT: the authors' global engine over every agent's final (answer, confidence)
        confs = _answers_by_round({"answers": row["confs"]}, T)
        ra_authors = float(engine_decision([(answers[a][T], float(confs[a][T] or 0.0))
                                            for a in answers if a in confs]) == truth)
    else:
        ra_authors = h_majority  # SAC: the authors' code reports the honest agents' majority
    out = {k: row[k] for k in ("query", "id", "truth", "roles")}
    out.update(
        iaa=acc["all"][0], faa=acc["all"][T],
        ra=_plurality_hit([answers[a][T] for a in answers], truth),
        h_majority=h_majority, ra_authors=ra_authors,
        ra_init=_plurality_hit([answers[a][0] for a in answers], truth),
        h_majority_init=_plurality_hit([answers[a][0] for a in honest], truth),
        accuracy_by_round=acc, answers=answers, scores=row["scores"],
        calls=row["calls"], tokens=row["tokens"], honest_tokens=row["honest_tokens"],
        sent=row["sent"], received=row["received"], late=row["late"], unfinished=row["unfinished"],
        start=row["start"], end=row.get("end"))
    if row.get("degraded"):
        # gray failures: agent -> the first round of this query it ran degraded
        out["degraded"] = dict(sorted(row["degraded"].items(), key=lambda kv: _order(kv[0])))
    return out


#: phases of a run with gray failures (docs/sac.md "Gray failures beside Byzantine agents")
GRAY_PHASES = ("before", "degraded", "after")


def gray_phase(rows: list[dict]) -> list[str]:
    """Each query's phase: ``degraded`` when some honest agent ran degraded in one of
    its rounds, ``before`` until the first such query, ``after`` once none is."""
    out, seen = [], False
    for q in rows:
        if q.get("degraded"):
            seen = True
            out.append("degraded")
        else:
            out.append("after" if seen else "before")
    return out


def consensus_accuracy(rows: list[dict], T: int) -> dict[str, Any]:
    """Accuracy per round pooled over (query, agent), by group, and BFTI per round:
    BFTI(t) = Acc_all(t) - Acc_all(0) (so BFTI(T) = FAA - IAA). Groups: ``all``,
    ``honest``, ``strong``, ``weak``, ``adversarial`` by role at the query's start;
    ``degraded`` (honest agents degraded in some round of the query) and
    ``healthy`` (strong agents that were not)."""
    groups = ("all", "honest", "strong", "weak", "adversarial", "degraded", "healthy")
    hits: dict[str, list[list[float]]] = {g: [[] for _ in range(T + 1)] for g in groups}
    for q in rows:
        deg = q.get("degraded") or {}
        for a, seq in q["answers"].items():
            g = _consensus_group(q["roles"].get(a, "strong"))
            mine = ["all", g] + (["honest"] if g != "adversarial" else [])
            if a in deg and g != "adversarial":
                mine.append("degraded")
            elif g == "strong":
                mine.append("healthy")
            for t in range(T + 1):
                ok = float(seq[t] == q["truth"])
                for m in mine:
                    hits[m][t].append(ok)
    per = {str(t): {g: _mean(hits[g][t]) for g in groups} for t in range(T + 1)}
    a0 = per["0"]["all"]
    for t in range(T + 1):
        at = per[str(t)]["all"]
        per[str(t)]["bfti"] = (at - a0) if at is not None and a0 is not None else None
    return per


def gray_summary(rows: list[dict], T: int, log: list[dict]) -> dict[str, Any]:
    """``summary.gray``: BFTI and accuracy per round in each phase (before, during and
    after the gray failures), which agents were degraded and when."""
    phases = gray_phase(rows)
    out: dict[str, Any] = {"changes": list(log), "agents": sorted({a for q in rows for a in (q.get("degraded") or {})},
                                                                   key=_order),
                           "first_query": next((q["query"] for q, p in zip(rows, phases) if p == "degraded"), None),
                           "by_phase": {}}
    for ph in GRAY_PHASES:
        sel = [q for q, p in zip(rows, phases) if p == ph]
        if not sel:
            continue
        per = consensus_accuracy(sel, T)
        iaa, faa = per["0"]["all"], per[str(T)]["all"]
        out["by_phase"][ph] = {
            "queries": len(sel), "iaa": iaa, "faa": faa,
            "bfti": (faa - iaa) if iaa is not None and faa is not None else None,
            "ra": _mean([q["ra"] for q in sel]), "h_majority": _mean([q["h_majority"] for q in sel]),
            "per_round": per}
    return out


def consensus_summary(proto: Any) -> dict[str, Any]:
    """summary.json fields of a SAC / CP-WBFT run (docs/sac.md)."""
    T = proto.params.rounds
    raw = proto.query_rows
    rows = [consensus_query_row(r, T) for r in raw]
    # pooled over (query, agent): per-agent accuracy averaged over agents and queries
    hits: dict[str, list[list[float]]] = {g: [[] for _ in range(T + 1)]
                                         for g in ("all", "honest", "strong", "weak", "adversarial")}
    for r, q in zip(raw, rows):
        for a, seq in q["answers"].items():
            g = _consensus_group(q["roles"].get(a, "strong"))
            for t in range(T + 1):
                ok = float(seq[t] == q["truth"])
                hits["all"][t].append(ok)
                hits[g][t].append(ok)
                if g != "adversarial":
                    hits["honest"][t].append(ok)

    def acc(g: str, t: int) -> Any:
        return _mean(hits[g][t])

    def group(g: str) -> dict[str, Any]:
        i, f = acc(g, 0), acc(g, T)
        names = set()
        for q in rows:
            for a in q["answers"]:
                ga = _consensus_group(q["roles"].get(a, "strong"))
                if ga == g or (g == "honest" and ga != "adversarial"):
                    names.add(a)
        return {"iaa": i, "faa": f, "bfti": (f - i) if i is not None and f is not None else None,
                "agents": len(names)}

    iaa, faa = acc("all", 0), acc("all", T)
    n = len(rows)
    role_counts: dict[str, int] = {}
    for a in proto.agents:
        role = proto.role(a)
        role_counts[role] = role_counts.get(role, 0) + 1
    roles_by_query = {q["query"]: q["roles"] for q in rows}
    # the filter, as an outside observer sees it (SAC only: CP-WBFT keeps everything)
    decided = {"strong": [0, 0], "weak": [0, 0], "adversarial": [0, 0]}  # [retained, dropped]
    kept, dropped_n, empty, received = [], [], 0, []
    for rec in proto.round_rows:
        if rec["round"] == 0 or _consensus_group(rec["role"]) == "adversarial":
            continue
        received.append(rec.get("received", 0))
        if "retained" not in rec:
            continue
        kept.append(len(rec["retained"]))
        dropped_n.append(len(rec["dropped"]))
        empty += int(not rec["retained"] and rec.get("received", 0) > 0)
        roles = roles_by_query.get(rec["query"], {})
        for j in rec["retained"]:
            decided[_consensus_group(roles.get(j, "strong"))][0] += 1
        for j in rec["dropped"]:
            decided[_consensus_group(roles.get(j, "strong"))][1] += 1
    filt = None
    if kept:
        filt = {"retained_per_round": _mean(kept), "dropped_per_round": _mean(dropped_n),
                "empty_retained": empty,
                "retained_rate": {g: (k / (k + d)) if k + d else None for g, (k, d) in decided.items()}}
    sent = sum(q["sent"] for q in rows)
    got = sum(q["received"] for q in rows)
    return {
        "protocol": proto.name,
        "dataset": proto.params.dataset,
        "queries": n,
        "rounds": T,
        "F": proto.params.F,
        "iaa": iaa, "faa": faa, "bfti": (faa - iaa) if iaa is not None and faa is not None else None,
        "ra": _mean([q["ra"] for q in rows]),
        "ra_authors": _mean([q["ra_authors"] for q in rows]),
        "h_majority": _mean([q["h_majority"] for q in rows]),
        "init": {"ra": _mean([q["ra_init"] for q in rows]), "h_majority": _mean([q["h_majority_init"] for q in rows])},
        "honest": group("honest"), "strong": group("strong"), "weak": group("weak"),
        "adversarial": group("adversarial"),
        "per_round": {str(t): {"weak": acc("weak", t), "strong": acc("strong", t), "honest": acc("honest", t),
                               "all": acc("all", t),
                               "bfti": (acc("all", t) - iaa) if iaa is not None and acc("all", t) is not None
                               else None} for t in range(T + 1)},
        "tokens": {"total": sum(q["tokens"] for q in rows), "per_query": _mean([q["tokens"] for q in rows]),
                   "honest_per_query": _mean([q["honest_tokens"] for q in rows])},
        "calls": {"total": sum(q["calls"] for q in rows), "per_query": _mean([q["calls"] for q in rows]),
                  "by_kind": dict(sorted(proto.calls_by_kind.items()))},
        "traffic": {"answers_sent": sent, "answers_on_time": got, "answers_late": sum(q["late"] for q in rows),
                    "on_time_rate": (got / sent) if sent else None,
                    "received_per_agent_round": _mean(received),
                    "messages_per_query": (sent / n) if n else None,
                    "unfinished": sum(len(q["unfinished"]) for q in rows)},
        "filter": filt,
        "role_counts": dict(sorted(role_counts.items())),
        "role_changes": proto.role_log,
        "f_local": not any("-local" in w for w in proto.warnings),
        "graph": proto.graph_info,
        "warnings": list(proto.warnings),
        "backend": proto.ctx.backend.describe() if proto.ctx.backend is not None else None,
        **({"gray": gray_summary(rows, T, proto.degraded_log)} if getattr(proto, "degraded_log", None) else {}),
    }
