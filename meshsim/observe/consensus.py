"""SAC and CP-WBFT (SAC paper Sec. 5.1) as an outside observer scores them:
IAA, FAA, BFTI, RA, group accuracy, H-Majority, the authors' engine, and the
gray-failure phases."""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..core.names import node_order
from .aggregate import mean_of
from .views import ConsensusView

__all__ = ["engine_decision", "consensus_query_row", "GRAY_PHASES", "gray_phase", "consensus_accuracy",
           "gray_summary", "consensus_summary"]


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


def _answers_by_round(row: Mapping[str, Any], T: int) -> dict[str, list]:
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


def consensus_query_row(row: Mapping[str, Any], T: int) -> dict[str, Any]:
    """One line of ``queries.jsonl``: the query's answers per round and its metrics."""
    truth = row["truth"]
    answers = _answers_by_round(row, T)
    roles = row["roles"]
    acc: dict[str, list] = {}
    for g in ("all", "honest", "strong", "weak", "adversarial"):
        members = [a for a in answers if g == "all" or _consensus_group(roles.get(a, "strong")) == g
                   or (g == "honest" and _consensus_group(roles.get(a, "strong")) != "adversarial")]
        acc[g] = [(mean_of([float(answers[a][t] == truth) for a in members]) if members else None)
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
        out["degraded"] = dict(sorted(row["degraded"].items(), key=lambda kv: node_order(kv[0])))
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
    per = {str(t): {g: mean_of(hits[g][t]) for g in groups} for t in range(T + 1)}
    a0 = per["0"]["all"]
    for t in range(T + 1):
        at = per[str(t)]["all"]
        per[str(t)]["bfti"] = (at - a0) if at is not None and a0 is not None else None
    return per


def gray_summary(rows: list[dict], T: int, log: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``summary.gray``: BFTI and accuracy per round in each phase (before, during and
    after the gray failures), which agents were degraded and when."""
    phases = gray_phase(rows)
    out: dict[str, Any] = {"changes": list(log), "agents": sorted({a for q in rows for a in (q.get("degraded") or {})},
                                                                   key=node_order),
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
            "ra": mean_of([q["ra"] for q in sel]), "h_majority": mean_of([q["h_majority"] for q in sel]),
            "per_round": per}
    return out


def consensus_summary(proto: ConsensusView) -> dict[str, Any]:
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
        return mean_of(hits[g][t])

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
        filt = {"retained_per_round": mean_of(kept), "dropped_per_round": mean_of(dropped_n),
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
        "ra": mean_of([q["ra"] for q in rows]),
        "ra_authors": mean_of([q["ra_authors"] for q in rows]),
        "h_majority": mean_of([q["h_majority"] for q in rows]),
        "init": {"ra": mean_of([q["ra_init"] for q in rows]), "h_majority": mean_of([q["h_majority_init"] for q in rows])},
        "honest": group("honest"), "strong": group("strong"), "weak": group("weak"),
        "adversarial": group("adversarial"),
        "per_round": {str(t): {"weak": acc("weak", t), "strong": acc("strong", t), "honest": acc("honest", t),
                               "all": acc("all", t),
                               "bfti": (acc("all", t) - iaa) if iaa is not None and acc("all", t) is not None
                               else None} for t in range(T + 1)},
        "tokens": {"total": sum(q["tokens"] for q in rows), "per_query": mean_of([q["tokens"] for q in rows]),
                   "honest_per_query": mean_of([q["honest_tokens"] for q in rows])},
        "calls": {"total": sum(q["calls"] for q in rows), "per_query": mean_of([q["calls"] for q in rows]),
                  "by_kind": dict(sorted(proto.calls_by_kind.items()))},
        "traffic": {"answers_sent": sent, "answers_on_time": got, "answers_late": sum(q["late"] for q in rows),
                    "on_time_rate": (got / sent) if sent else None,
                    "received_per_agent_round": mean_of(received),
                    "messages_per_query": (sent / n) if n else None,
                    "unfinished": sum(len(q["unfinished"]) for q in rows)},
        "filter": filt,
        "role_counts": dict(sorted(role_counts.items())),
        "role_changes": proto.role_log,
        "f_local": not any("-local" in w for w in proto.warnings),
        "graph": proto.graph_info,
        "warnings": list(proto.warnings),
        "backend": proto.ctx.backend.describe() if proto.ctx.backend is not None else None,
        **({"gray": gray_summary(rows, T, proto.degraded_log)} if proto.degraded_log else {}),
    }
