"""Self-healing as an outside observer measures it (MeshHeal Sec. 3.2, Sec. 6,
App. C.5): degradation intervals, detection delay, closure and reintegration per
interval, the network-level detector summary, and the review audit."""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..protocols.ledger import ReviewLedger
from ..core.names import node_order
from .aggregate import frac, mean_of, quantile

__all__ = ["degradation_intervals", "self_healing", "review_audit", "detection_summary", "first_isolation"]


def degradation_intervals(log: Sequence[Mapping[str, Any]], n_tasks: int) -> dict[str, list[tuple[int, int]]]:
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


def self_healing(states: Sequence[Mapping[str, Any]], b: int, r: int, n_tasks: int, agent: str,
                 outputs: Optional[Sequence[int]] = None) -> dict[str, Any]:
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
        out["task_share"] = frac(len(outputs), n_tasks)
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

    The counts are kept row by row (:class:`meshsim.protocols.ledger.ReviewLedger`):
    a run feeds them as its reviews are written, without keeping the rows.
    """
    ledger = ReviewLedger(tau)
    for r in review_rows:
        ledger.add(r)
    task_ok = {t["index"]: bool(t["correct"]) for t in task_rows}
    return ledger.audit(task_ok.get)


def _delay_stats(prefix: str, xs: list) -> dict[str, Any]:
    return {f"{prefix}_mean": mean_of(xs), f"{prefix}_median": quantile(xs, 0.5), f"{prefix}_p90": quantile(xs, 0.9),
            f"{prefix}_max": max(xs) if xs else None}


def detection_summary(episodes: list[dict[str, Any]], states: Sequence[Mapping[str, Any]], agents: Iterable[str],
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
                           "missed": n - detected, "missed_rate": frac(n - detected, n)}
    out.update(_delay_stats("delay", delays))
    out.update(_delay_stats("delay_outputs", delays_out))
    shares = [e["task_share"] for e in episodes if e.get("task_share") is not None]
    out["task_share_mean"] = mean_of(shares)
    out["closure_rate"] = frac(sum(1 for e in episodes if e["detection_delay"] is not None and e["closure"]),
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
               false_isolation_rate=frac(len(false_agents), len(ever_healthy)),
               false_isolation_events=false_events,
               falsely_isolated=sorted(false_agents, key=node_order),
               never_degraded_isolated=len(iso_healthy),
               never_degraded_isolated_rate=frac(len(iso_healthy), len(healthy)),
               degraded_isolated_while_healthy=len(false_agents & degraded),
               isolated_before_degradation=len(before_b),
               watched_not_isolated=watched_only, watched_not_isolated_agents=len(watched_agents))
    return out


def first_isolation(states: Sequence[Mapping[str, Any]], agent: str, start: int, end: int = 10 ** 12,
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
