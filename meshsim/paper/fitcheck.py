"""Check (and tune) a fitted fake profile against the run it was fitted from.

``meshsim backends fit RUN_DIR`` estimates each ingredient of a fake profile
from the recorded calls (:mod:`meshsim.backends.fit`). What a user wants to
trust is the outcome: run the *same* scenario (same seed, so the same task
stream, arrivals and entry agents) with the fitted fake, over ``draws``
independent realisations of the model's outcomes (``backend.draw``), and
compare accuracy per task type with the recorded run's.

``calibrate`` closes what remains (Takeover, reviews and committees sit
between a call's accuracy and a task's outcome): each round moves every
type's per-role accuracy by the gap between recorded and simulated task
accuracy, then simulates again (a damped fixed-point iteration).
"""
from __future__ import annotations

import copy
import math
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from ..core.errors import InputError
from ..core.files import read_output_yaml
from ..io.records import find_records, iter_records

__all__ = ["recorded_accuracy", "simulated_accuracy", "compare", "calibrate"]

Counts = dict[str, list[int]]  # task type -> [correct, total]


def recorded_accuracy(run_dir: str | Path) -> Counts:
    path = find_records(Path(run_dir), "tasks.jsonl")
    if path is None:
        raise InputError("not a MeshHeal run folder (no tasks.jsonl): the check needs the recorded run",
                         file=str(run_dir))
    out: Counts = defaultdict(lambda: [0, 0])
    for row in iter_records(path):
        out[row["type"]][0] += int(bool(row.get("correct")))
        out[row["type"]][1] += 1
    return dict(out)


def _find(rel: str, run_dir: Path) -> Optional[Path]:
    p = Path(rel)
    if p.is_absolute():
        return p if p.exists() else None
    for base in (Path.cwd(), run_dir, *run_dir.resolve().parents):
        if (base / p).exists():
            return (base / p).resolve()
    return None


def _scenario_data(run_dir: Path, profile: Path) -> dict[str, Any]:
    path = run_dir / "scenario.resolved.yaml"
    if not path.is_file():
        raise InputError("no scenario.resolved.yaml in the run folder", file=str(run_dir))
    data = read_output_yaml(path) or {}
    tasks = data.get("tasks") or {}
    if tasks.get("file"):
        found = _find(tasks["file"], run_dir)
        if found is None:
            raise InputError("the recorded run's task file is not found (from here, the run folder or above)",
                             file=str(path), field="tasks.file", value=tasks["file"])
        tasks["file"] = str(found)
    data["backend"] = {"kind": "fake", "profile": str(profile.resolve())}
    data["output"] = {"trace": "none"}
    data["seeds"] = 1
    return data


def simulated_accuracy(run_dir: str | Path, profile: str | Path, draws: int = 20,
                       progress: Optional[Callable[[int, int], None]] = None) -> Counts:
    """Per-type task accuracy of ``draws`` re-runs of the recorded scenario with ``profile``."""
    from ..simulate.runner import run_one
    from ..scenario.model import load_scenario

    run_dir = Path(run_dir)
    data = _scenario_data(run_dir, Path(profile))
    out: Counts = defaultdict(lambda: [0, 0])
    with tempfile.TemporaryDirectory(prefix="meshsim-fitcheck-") as tmp:
        for d in range(1, draws + 1):
            data["backend"]["draw"] = d
            sc_path = Path(tmp) / "scenario.yaml"
            sc_path.write_text(yaml.safe_dump(data, sort_keys=False))
            res = run_one(load_scenario(sc_path), int(data.get("seed", 0)))
            for row in res.tables.get("tasks.jsonl", []):
                out[row["type"]][0] += int(bool(row.get("correct")))
                out[row["type"]][1] += 1
            if progress is not None:
                progress(d, draws)
    return dict(out)


def compare(recorded: Counts, simulated: Counts) -> list[dict[str, Any]]:
    """One row per task type: recorded and simulated accuracy and their difference."""
    rows = []
    for t in sorted(set(recorded) | set(simulated)):
        rk, rn = recorded.get(t, [0, 0])
        sk, sn = simulated.get(t, [0, 0])
        r = rk / rn if rn else None
        s = sk / sn if sn else None
        rows.append({"type": t, "tasks": rn, "recorded": r, "simulated": s,
                     "diff": None if r is None or s is None else s - r})
    return rows


def calibrate(run_dir: str | Path, prof: dict[str, Any], work: Path, rounds: int = 6, draws: int = 20,
              tol: float = 0.02, progress: Optional[Callable[[str], None]] = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Tune ``models.<role>.skill_by_type.<dataset>`` until every type's simulated accuracy is
    within ``tol`` of the recorded one (or ``rounds`` are spent); returns the
    best profile seen and its comparison.

    Each type gets a shift ``s`` added to its fitted per-role accuracies. The
    simulated accuracy is close to monotone in ``s`` (the draws are the same
    every round: common random numbers), but not of slope 1 — Takeover and
    reviews sit in between, and with few tasks it moves in steps — so each
    type keeps a bracket [lo, hi] around its target and steps by the secant
    of its last two points, falling back to bisection when the secant leaves
    the bracket.
    """
    recorded = recorded_accuracy(run_dir)
    path = work / "calibrating.yaml"
    datasets = sorted({d for m in prof["models"].values() for d in m.get("skill", {}) if d != "default"}) \
        or ["default"]
    base: dict[str, list[tuple[dict, str, float]]] = {}  # type -> (skill_by_type entry, type, fitted value)
    for t in recorded:
        for role in ("strong", "weak"):
            m = prof["models"][role]
            for ds in datasets:
                bt = m.setdefault("skill_by_type", {}).setdefault(ds, {})
                v = bt.get(t, m["skill"].get(ds, m["skill"]["default"]))
                bt[t] = round(min(0.999, max(0.001, v)), 4)
                base.setdefault(t, []).append((bt, t, bt[t]))
    shift = {t: 0.0 for t in base}
    bracket = {t: [-1.0, 1.0] for t in base}
    last: dict[str, tuple[float, float]] = {}  # type -> previous (shift, gap)
    best: tuple[float, dict[str, Any], list[dict[str, Any]]] = (math.inf, prof, [])
    for k in range(rounds + 1):
        for t, entries in base.items():
            for bt, key, v in entries:
                bt[key] = round(min(0.999, max(0.001, v + shift[t])), 4)
        path.write_text(yaml.safe_dump(prof, sort_keys=False))
        rows = compare(recorded, simulated_accuracy(run_dir, path, draws))
        worst = max((abs(r["diff"]) for r in rows if r["diff"] is not None), default=0.0)
        if worst < best[0]:
            best = (worst, copy.deepcopy(prof), rows)
        if progress is not None:
            progress(f"round {k}: largest per-type gap {worst:.3f}")
        if worst <= tol or k == rounds:
            break
        for r in rows:
            t, gap = r["type"], r["diff"]
            if t not in shift or gap is None or abs(gap) <= tol:
                continue
            s0 = shift[t]
            lo, hi = bracket[t]
            if gap > 0:
                hi = min(hi, s0)  # simulated too high: the answer lies below s0
            else:
                lo = max(lo, s0)
            bracket[t] = [lo, hi]
            prev = last.get(t)
            step = -gap  # slope 1 to begin with
            if prev is not None and prev[0] != s0 and prev[1] != gap:
                step = -gap * (s0 - prev[0]) / (gap - prev[1])
            s1 = s0 + step
            if not lo < s1 < hi:
                s1 = (lo + hi) / 2
            last[t] = (s0, gap)
            shift[t] = s1
    return best[1], best[2]
