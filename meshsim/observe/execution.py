"""summary.json fields of every method on the shared execution layer (MeshHeal
App. B.4), MeshHeal's own included: accuracy, cost, detection, collapse."""
from __future__ import annotations

from typing import Any, Mapping

from ..core.names import node_order
from .adversarial import adversarial_summary
from .collapse import collapse_summary
from .detection import degradation_intervals, detection_summary, self_healing
from .views import ExecutionView, MeshHealView

__all__ = ["execution_summary", "meshheal_summary"]


def execution_summary(proto: ExecutionView) -> dict[str, Any]:
    """summary.json fields every method on the shared execution layer has
    (MeshHeal App. B.4): accuracy per phase, tokens and calls per task as the
    layer counted them, unanswered tasks, and the self-healing criteria
    (Sec. 3.2) from the method's routing-state records: a method that never
    isolates an agent has detection delay ``None`` (infinite), closure false
    and reintegration undefined."""
    led = proto.ledger  # running counts over tasks.jsonl (issue 22): fmean of the rows, bit for bit
    mean = led.mean
    n = len(proto.stream)
    acc: dict[str, Any] = {"overall": mean(led.correct, led.n)}
    by_phase = led.phases
    acc["by_phase"] = {k: mean(v[1], v[0]) for k, v in by_phase.items()}
    intervals = degradation_intervals(proto.degraded_log, n)
    states = proto.state_rows
    agents: dict[str, Any] = {}
    missed = 0
    episodes: list[dict[str, Any]] = []
    outputs = proto.evidence_outputs()  # the agent's outputs that are evidence about it
    # each agent's own state changes, in order: one pass instead of one per degraded agent
    own_states: dict[str, list[Mapping[str, Any]]] = {}
    for s in states:
        own_states.setdefault(s["agent"], []).append(s)
    for a in sorted(intervals, key=node_order):
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
        "detection": detection_summary(episodes, states, proto.K, intervals, n),
        "collapse": collapse_summary(n, states, intervals, proto.topology_rows, proto.K),
        "isolated_at_end": sorted((a for a, s in isolated_end.items() if s == "isolated"),
                                  key=node_order),
        "state_changes": len(states),
        "backend": proto.ctx.backend.describe() if proto.ctx.backend is not None else None,
    }


def meshheal_summary(proto: MeshHealView) -> dict[str, Any]:
    out = execution_summary(proto)
    out["unreviewed_outputs"] = proto.unreviewed
    out["audit"] = proto.reviews.audit(proto.ledger.task_ok)
    if proto.byz_log:  # only runs with Byzantine agents (outputs of others unchanged)
        out["adversarial"] = adversarial_summary(proto)
    return out
