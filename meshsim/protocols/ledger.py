"""The observer's running counts (issue 22): what the summary needs from the
record tables, accumulated row by row as the rows are handed to the run folder,
so a 483,840-task run keeps counters and a few small arrays instead of every row.

Every mean here equals ``statistics.fmean`` over the full list it replaces, to
the last bit: sums are kept exactly (:class:`ExactSum`, Shewchuk's partials)
and rounded once, as ``math.fsum`` rounds, so summary.json stays byte-identical
(tests/cli/test_streaming.py checks it against the list form).

The ledgers sit with the protocols that feed them, so that no protocol imports
the observer (meshsim.observe reads them at the run's end).
"""
from __future__ import annotations

import math
from array import array
from typing import Any, Callable, Optional

__all__ = ["ExactSum", "TaskLedger", "ReviewLedger"]


class ExactSum:
    """The exact sum of the values added so far, as non-overlapping partials
    (Shewchuk 1997, the ``msum`` recipe); :meth:`mean` rounds once, so it is
    ``statistics.fmean`` of the same values (``math.fsum`` is correctly rounded)."""

    __slots__ = ("partials", "n")

    def __init__(self) -> None:
        self.partials: list[float] = []
        self.n = 0

    def add(self, x: float) -> None:
        x = float(x)
        partials = self.partials
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                partials[i] = lo
                i += 1
            x = hi
        partials[i:] = [x]
        self.n += 1

    def total(self) -> float:
        return math.fsum(self.partials)

    def mean(self) -> Optional[float]:
        return math.fsum(self.partials) / self.n if self.n else None


def _frac(k: int, n: int) -> Any:
    return k / n if n else None


class TaskLedger:
    """Closed tasks, fed in task-index order (the order of tasks.jsonl):
    counts, exact sums of calls and tokens per phase, each task's outcome
    (one byte per task) and, for methods whose evidence is the task's
    producers, each agent's outputs (task indices)."""

    def __init__(self, n_tasks: int, producers: bool):
        self.n = 0
        self.correct = 0
        self.unanswered = 0
        self.calls = 0
        self.tokens = 0
        #: phase -> [tasks, correct, calls, tokens], phases in first-task order
        self.phases: dict[str, list[int]] = {}
        #: task index -> 0 (not closed), 1 (closed, wrong), 2 (closed, correct)
        self.outcome = bytearray(n_tasks + 2)
        self.producers = producers
        self.outputs: dict[str, array] = {}

    def closed(self, index: int, correct: bool) -> None:
        """Task ``index`` closed (in any order): its outcome for the joins of the audit."""
        if index >= len(self.outcome):
            self.outcome.extend(bytes(index + 1 - len(self.outcome)))
        self.outcome[index] = 2 if correct else 1

    def add(self, row: dict[str, Any]) -> None:
        """One row of tasks.jsonl, in file order."""
        ok = bool(row["correct"])
        self.n += 1
        self.correct += ok
        self.calls += row["calls"]
        self.tokens += row["tokens"]
        if row["unanswered"]:
            self.unanswered += 1
        ph = row["phase"]
        if ph:
            acc = self.phases.get(ph)
            if acc is None:
                acc = self.phases[ph] = [0, 0, 0, 0]
            acc[0] += 1
            acc[1] += ok
            acc[2] += row["calls"]
            acc[3] += row["tokens"]
        if self.producers:
            for a in row.get("producers") or ():
                out = self.outputs.get(a)
                if out is None:
                    out = self.outputs[a] = array("q")
                out.append(row["index"])

    def task_ok(self, index: int) -> Optional[bool]:
        """The outcome of task ``index``; None while it is open (or never was)."""
        v = self.outcome[index] if 0 <= index < len(self.outcome) else 0
        return None if v == 0 else v == 2

    # fmean of ints and 0/1 floats: an exact integer sum rounded once is fsum's result
    @staticmethod
    def mean(total: int, n: int) -> Optional[float]:
        return float(total) / n if n else None


class _Group:
    """Reviews of one condition (degraded or healthy outputs) for the audit."""

    __slots__ = ("n", "q0", "flagged", "committee", "final_low", "flagged_committee", "flagged_committee_low")

    def __init__(self) -> None:
        self.n = 0
        self.q0 = ExactSum()
        self.flagged = self.committee = self.final_low = 0
        self.flagged_committee = self.flagged_committee_low = 0


class ReviewLedger:
    """reviews.jsonl, row by row in file order: MeshHeal App. C.5 / Tab. C8's
    counts (:func:`meshsim.observe.detection.review_audit`) and each agent's reviewed
    outputs (task indices; the detector's evidence)."""

    def __init__(self, tau: float):
        self.tau = tau
        self.pos, self.neg = _Group(), _Group()
        self.takeovers = 0
        self.fin = self.wrong_in = self.wrong_fixed = self.changed = self.changes_correct = 0
        self.right_in = self.right_broken = 0
        #: tasks of contribute takeovers: followed to the task's outcome at the end
        self.contribute = array("q")
        self.outputs: dict[str, array] = {}

    def add(self, r: dict[str, Any]) -> None:
        tau = self.tau
        q = r["q"]
        if q is not None:
            out = self.outputs.get(r["agent"])
            if out is None:
                out = self.outputs[r["agent"]] = array("q")
            out.append(r["task"])
        q0 = r["q0"]
        if q0 is not None:
            g = self.pos if r["degraded"] else self.neg
            g.n += 1
            g.q0.add(q0)
            low = q is not None and q <= tau
            flagged = q0 <= tau
            com = bool(r["committee"])
            g.flagged += flagged
            g.committee += com
            g.final_low += low
            if flagged and com:
                g.flagged_committee += 1
                g.flagged_committee_low += low
        if r["takeover"]:
            self.takeovers += 1
            if r["action"] == "finalize":
                self.fin += 1
                oc = r["output_correct"]
                if oc is False:
                    self.wrong_in += 1
                    self.wrong_fixed += r["takeover_correct"] is True
                    if r.get("answer_changed"):
                        self.changed += 1
                        self.changes_correct += r["takeover_correct"] is True
                elif oc is True:
                    self.right_in += 1
                    self.right_broken += r["takeover_correct"] is False
            elif r["action"] == "contribute":
                self.contribute.append(r["task"])

    def audit(self, task_ok: Callable[[int], Optional[bool]]) -> dict[str, Any]:
        """The ``audit`` section; ``task_ok(index)``: a closed task's outcome, None if not closed."""
        pos, neg = self.pos, self.neg
        con = [task_ok(t) for t in self.contribute]
        con = [ok for ok in con if ok is not None]
        con_ok = sum(1 for ok in con if ok)
        takeover = {
            "count": self.takeovers, "finalize": self.fin, "wrong_entering": self.wrong_in,
            "wrong_fixed": self.wrong_fixed, "wrong_changed": self.changed, "changes_correct": self.changes_correct,
            "right_entering": self.right_in, "right_broken": self.right_broken,
            "contribute": len(con), "contribute_final_correct": con_ok,
        }
        takeover.update(
            wrong_fixed_rate=_frac(self.wrong_fixed, self.wrong_in),
            wrong_changed_rate=_frac(self.changed, self.wrong_in),
            changes_correct_rate=_frac(self.changes_correct, self.changed),
            right_broken_rate=_frac(self.right_broken, self.right_in),
            contribute_final_correct_rate=_frac(con_ok, len(con)))
        mneg, mpos = neg.q0.mean(), pos.q0.mean()
        return {
            "initial_score_healthy": mneg,
            "initial_score_degraded": mpos,
            # the reviewers' discrimination in score units: how far apart the two conditions' mean q0 are
            "initial_score_gap": (mneg - mpos) if mneg is not None and mpos is not None else None,  # (None iff n == 0)
            "outputs_healthy": neg.n,
            "outputs_degraded": pos.n,
            "initial_recall": _frac(pos.flagged, pos.n),
            "initial_false_alarm": _frac(neg.flagged, neg.n),
            "committee_rate_degraded": _frac(pos.committee, pos.n),
            "committee_rate_healthy": _frac(neg.committee, neg.n),
            "committee_recall": _frac(pos.final_low, pos.n),
            "committee_false_alarm": _frac(neg.final_low, neg.n),
            "flagged_healthy": neg.flagged,
            "flagged_degraded": pos.flagged,
            # of the initially flagged outputs that went to committee, how many it cleared / kept low
            "committee_clears_healthy": _frac(neg.flagged_committee - neg.flagged_committee_low,
                                              neg.flagged_committee),
            "committee_keeps_degraded": _frac(pos.flagged_committee_low, pos.flagged_committee),
            "takeover": takeover,
        }
