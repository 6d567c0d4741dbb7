"""Byzantine MeshHeal agents as an outside observer counts them (issue 20;
docs/adversarial.md, "Metrics"): framing, shielding, routing lies, collateral."""
from __future__ import annotations

from typing import Any, Optional

from ..core.names import node_order
from .aggregate import frac, mean_of
from .detection import degradation_intervals, first_isolation
from .routing import route_losses
from .views import MeshHealView

__all__ = ["adversarial_summary"]


def adversarial_summary(proto: MeshHealView) -> dict[str, Any]:
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
    liars = sorted(start, key=node_order)
    first = min(start.values()) if start else 1
    by_liar = {a: sorted({r["behaviour"] for r in log if r["agent"] == a}) for a in liars}

    def _start_of(kind: str) -> Optional[int]:
        return min((r["task"] for r in log if r["behaviour"] == kind), default=None)

    out: dict[str, Any] = {"liars": liars, "behaviours": by_liar, "first_attack_task": first}
    coalition = sorted({m for r in log for m in r.get("coalition", ())}, key=node_order)
    out["coalition"] = coalition
    liar_rows = {}
    for a in liars:
        c = first_isolation(states, a, start[a])
        liar_rows[a] = {"from_task": start[a], "isolated_at": c, "delay": (c - start[a]) if c is not None else None}
    out["liars_isolated"] = sum(1 for r in liar_rows.values() if r["isolated_at"] is not None)
    out["liar_agents"] = liar_rows

    f0 = _start_of("frame")
    if f0 is not None:
        targets = sorted({t for r in log if r["behaviour"] == "frame" for t in r["targets"]}, key=node_order)
        rows = {}
        for t in targets:
            c = first_isolation(states, t, f0, degraded=False)
            by = sorted({r["agent"] for r in log if r["behaviour"] == "frame" and t in r["targets"]}, key=node_order)
            rows[t] = {"isolated_at": c, "delay": (c - f0) if c is not None else None, "by": by}
        k = sum(1 for r in rows.values() if r["isolated_at"] is not None)
        out["framing"] = {"from_task": f0, "targets": len(targets), "framed_isolated": k,
                          "framed_isolated_share": frac(k, len(targets)), "any_isolated": float(k > 0),
                          "delay_mean": mean_of([r["delay"] for r in rows.values()]), "agents": rows}
    s0 = _start_of("shield")
    if s0 is not None:
        targets = sorted({t for r in log if r["behaviour"] == "shield" for t in r["targets"]}, key=node_order)
        rows = {}
        for t in targets:
            spans = [(max(b, s0), r) for b, r in intervals.get(t, []) if r > s0]
            if not spans:
                continue
            iso = [first_isolation(states, t, b, r, degraded=True) for b, r in spans]
            hit = [c for c in iso if c is not None]
            by = sorted({r["agent"] for r in log if r["behaviour"] == "shield" and t in r["targets"]}, key=node_order)
            rows[t] = {"degraded_from": spans[0][0], "isolated_at": hit[0] if hit else None,
                       "delay": (hit[0] - spans[0][0]) if hit else None, "by": by}
        k = sum(1 for r in rows.values() if r["isolated_at"] is None)
        out["shielding"] = {"from_task": s0, "targets": len(targets), "degraded_targets": len(rows),
                            "shielded_not_isolated": k, "shielded_share": frac(k, len(rows)),
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
        out["routing"]["losses"] = route_losses(proto.lost_rows, r0, routers)
    targets_all = {t for r in log for t in r.get("targets", ())}
    collateral = {}
    for a in sorted(proto.K, key=node_order):
        if a in start or a in targets_all:
            continue
        c = first_isolation(states, a, first, degraded=False)
        if c is not None:
            collateral[a] = c
    out["collateral_isolated"] = len(collateral)
    out["collateral_agents"] = list(collateral)
    out["collateral_at"] = collateral
    return out
