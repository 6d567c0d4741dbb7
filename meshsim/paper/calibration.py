"""Calibrate a MeshHeal fake against mechanism-level measurements only (``meshsim backends calibrate``).

The targets are the review and Takeover audit of the MeshHeal paper (App. C.5,
Tab. C8), measured the way the paper measured them: five seeded persistent
BBH streams, outputs labelled by their producer's *injected condition*. They
describe single mechanisms (how a reviewer scores, how a committee
reassesses, how a synthesis corrects), so fitting call-level parameters to
them is calibration. Protocol-level outcomes — accuracy per phase, detection
and reintegration delays, isolation counts — are never targets: they are
what the simulator predicts, and ``meshsim reproduce`` reports them beside
the paper's values.

``measure`` runs the audit scenario with a profile and returns each target's
achieved value; ``fit`` moves the profile's ``calibrated`` parameters (a
coordinate search on a deterministic objective: the same seeds every time,
i.e. common random numbers) to bring the achieved values to the targets.
"""
from __future__ import annotations

import copy
import math
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from ..core.errors import InputError
from ..core.dotted import get_path, set_path
from ..core.files import load_yaml

__all__ = ["Target", "TARGETS", "COUNTS", "AUDIT_SCENARIO", "measure", "rows", "counts", "fit"]

AUDIT_SCENARIO = "scenarios/meshheal/persistent-bbh.yaml"


@dataclass(frozen=True)
class Target:
    key: str
    label: str
    paper: float
    spread: Optional[float]  # the paper's ± over seeds, when it states one
    source: str
    weight: float = 1.0
    band: Optional[float] = None  # an explicit pass band (the Takeover entry ratio: ±0.3)

    @property
    def tol(self) -> float:
        """Pass band: the paper's stated spread, or ±0.05 absolute when that is wider or none is stated."""
        return self.band if self.band is not None else max(self.spread or 0.0, 0.05)


#: App. C.5 (MeshHeal paper): text of Sec. 6.4 and App. C.5 (Tab. C8's values as quoted there)
TARGETS: tuple[Target, ...] = (
    Target("initial_score_healthy", "mean initial score, healthy-agent outputs", 0.89, 0.01,
           "App. C.5: 'mean scores of 0.89 ± 0.01 and 0.08 ± 0.01'", 2.0),
    Target("initial_score_degraded", "mean initial score, degraded-agent outputs", 0.08, 0.01,
           "App. C.5: 'mean scores of 0.89 ± 0.01 and 0.08 ± 0.01'", 2.0),
    Target("initial_recall", "initial recall (degraded outputs with q0 <= 0.40)", 0.90, 0.03,
           "App. C.5: 'recall changes from 0.90 ± 0.03 to 0.88 ± 0.01'"),
    Target("initial_false_alarm", "initial false alarm (healthy outputs with q0 <= 0.40)", 0.053, 0.007,
           "App. C.5: 'false-alarm rate decreases from 0.053 ± 0.007 to 0.044 ± 0.008'", 2.0),
    Target("committee_recall", "recall after committee", 0.88, 0.01,
           "App. C.5: 'recall changes from 0.90 ± 0.03 to 0.88 ± 0.01'"),
    Target("committee_false_alarm", "false alarm after committee", 0.044, 0.008,
           "App. C.5: 'false-alarm rate decreases from 0.053 ± 0.007 to 0.044 ± 0.008'", 2.0),
    Target("committee_clears_healthy", "committee clears flagged healthy-agent outputs", 0.33, 0.07,
           "App. C.5: 'the committee clears 0.33 ± 0.07 of healthy-agent cases'"),
    Target("committee_keeps_degraded", "committee keeps flagged degraded-agent outputs", 0.95, 0.02,
           "App. C.5: 'retains 0.95 ± 0.02 of degraded-agent cases'"),
    Target("committee_rate_degraded", "degraded outputs sent to committee", 0.98, None,
           "Sec. 6.4: '98% of degraded outputs are sent to committee review'", 0.5),
    Target("takeover.wrong_fixed_rate", "wrong finals entering Takeover that it corrects", 15 / 32, None,
           "App. C.5: 'Among 32 initially wrong answers entering Takeover, 15 are corrected'"),
    Target("takeover.wrong_changed_rate", "wrong finals whose answer the synthesis changes", 18 / 32, None,
           "App. C.5: 'The synthesis changes 18 of these answers'", 0.5),
    Target("takeover.changes_correct_rate", "changed answers that are correct", 15 / 18, None,
           "App. C.5: '15 of the 18 changes are correct'", 0.5),
    Target("takeover.right_broken_rate", "correct finals entering Takeover that it breaks", 1 / 32, None,
           "App. C.5: 'Among 32 initially correct answers entering Takeover, only one is changed to an "
           "incorrect answer'"),
    # how often reviews send a *correct* final to Takeover, relative to a wrong one: a call-level
    # property of the review-score distribution of correct finals (32 and 32 in the paper)
    Target("takeover.right_wrong_entering_ratio", "correct : wrong finals entering Takeover", 32 / 32, None,
           "App. C.5: 'Among 32 initially wrong answers entering Takeover' ... 'Among 32 initially correct "
           "answers entering Takeover'", 3.0, band=0.3),
    Target("takeover.contribute_final_correct_rate", "tasks with a Contribute Takeover that end correct", 0.86,
           None, "App. C.5: 'Among the 137 tasks where Takeover replaces a Contribute output, 86% end with a "
           "correct final answer'", 0.5),
)

#: the profile numbers `fit` may move, with bounds (each marked `calibrated:` in the profile)
FIT_PARAMS: tuple[tuple[str, float, float], ...] = (
    ("review.scores.strong.unverifiable.sound", 0.0, 0.98),
    ("review.scores.strong.unverifiable.error", 0.0, 1.0),
    ("review.scores.strong.garbage.garbage", 0.8, 1.0),
    ("review.scores.strong.finalize.sound.error", 0.0, 0.15),
    ("models.weak.skill.default", 0.0, 0.3),
    ("models.weak.garbage", 0.5, 1.0),
    ("difficulty_rho", 0.0, 0.95),
    ("type_spread", 0.0, 0.8),
    ("committee.hint", 0.0, 0.95),
    ("committee.mislead", 0.0, 0.9),
    ("takeover.hint.finalize", 0.0, 0.95),
    ("takeover.hint.contribute", 0.0, 0.99),
    ("takeover.keep.finalize", 0.0, 1.0),
    ("takeover.keep.contribute", 0.0, 1.0),
    ("takeover.recognize", 0.0, 1.0),
)


def _pooled_takeover(audits: list[dict[str, Any]]) -> dict[str, Any]:
    """Takeover rates over all seeds' counts (the paper pools them: '15 of 32')."""
    tot: dict[str, int] = {}
    for a in audits:
        for k, v in a["takeover"].items():
            if isinstance(v, int):
                tot[k] = tot.get(k, 0) + v

    def fr(k: str, n: str) -> Any:
        return tot.get(k, 0) / tot[n] if tot.get(n) else None

    tot.update(wrong_fixed_rate=fr("wrong_fixed", "wrong_entering"),
               wrong_changed_rate=fr("wrong_changed", "wrong_entering"),
               changes_correct_rate=fr("changes_correct", "wrong_changed"),
               right_broken_rate=fr("right_broken", "right_entering"),
               contribute_final_correct_rate=fr("contribute_final_correct", "contribute"),
               right_wrong_entering_ratio=fr("right_entering", "wrong_entering"))
    return tot


#: App. C.5's counts (five seeded streams): reported beside the pooled simulated counts,
#: scaled to five seeds. Not targets: counts depend on the stream's accuracy as well as on
#: the reviews; the rates and the entry ratio above are what calibration matches.
COUNTS: tuple[tuple[str, str, float, str], ...] = (
    ("takeover.wrong_entering", "wrong finals entering Takeover", 32, "App. C.5: 'Among 32 initially wrong answers'"),
    ("takeover.wrong_changed", "of these, answers the synthesis changes", 18, "'The synthesis changes 18'"),
    ("takeover.wrong_fixed", "of these, corrected", 15, "'15 are corrected'"),
    ("takeover.changes_correct", "changes that are correct", 15, "'15 of the 18 changes are correct'"),
    ("takeover.right_entering", "correct finals entering Takeover", 32,
     "'Among 32 initially correct answers entering Takeover'"),
    ("takeover.right_broken", "of these, broken", 1, "'only one is changed to an incorrect answer'"),
    ("takeover.contribute", "tasks where Takeover replaces a Contribute output", 137, "'Among the 137 tasks'"),
    ("outputs_degraded", "degraded-agent outputs reviewed", 160, "'Each seed contains 31-33 outputs from degraded "
     "agents' (x 5)"),
    ("missed_degraded", "degraded-agent outputs missed by the initial decision", 15,
     "'of which 2-4 are missed by the initial low-score decision' (x 5)"),
)


def counts(measured: dict[str, Any]) -> list[dict[str, Any]]:
    """App. C.5 counts beside the simulated ones, pooled over the seeds and per five seeds."""
    tot: dict[str, float] = {}
    for a in measured["audits"]:
        vals = {f"takeover.{k}": v for k, v in a["takeover"].items() if isinstance(v, int)}
        vals["outputs_degraded"] = a.get("outputs_degraded") or 0
        vals["missed_degraded"] = (a.get("outputs_degraded") or 0) - (a.get("flagged_degraded") or 0)
        for k, v in vals.items():
            tot[k] = tot.get(k, 0) + v
    n = max(1, len(measured["audits"]))
    return [{"key": k, "label": label, "paper": paper, "pooled": int(tot.get(k, 0)), "per5": tot.get(k, 0) * 5 / n,
             "source": src} for k, label, paper, src in COUNTS]


def fmt_counts(cs: list[dict[str, Any]], n_seeds: int) -> list[str]:
    lines = [f"{'count (App. C.5, five streams)':<52} {'paper':>6} {f'pooled ({n_seeds} seeds)':>18} {'per 5 seeds':>11}"]
    for c in cs:
        lines.append(f"{c['label']:<52} {c['paper']:>6g} {c['pooled']:>18d} {c['per5']:>11.1f}")
    return lines


def measure(profile: dict[str, Any] | str | Path, scenario: str | Path = AUDIT_SCENARIO,
            seeds: Optional[list[int]] = None, progress: Optional[Callable[[int, int], None]] = None
            ) -> dict[str, Any]:
    """Run the audit scenario with ``profile`` over ``seeds``; per-target mean, sd and per-seed values."""
    from ..simulate.runner import run_one
    from ..scenario.model import load_scenario

    if isinstance(profile, (str, Path)):
        from ..backends import find_profile

        data = load_yaml(find_profile(str(profile), None), "profile")
    else:
        data = profile
    scenario = Path(scenario)
    if not scenario.is_file() and not scenario.is_absolute():
        from ..core.bundled import bundled

        if bundled(scenario).is_file():  # the shipped audit scenario, from any folder (issue 32)
            scenario = bundled(scenario)
    if not scenario.is_file():
        raise InputError("audit scenario not found", file=str(scenario))
    with tempfile.TemporaryDirectory(prefix="meshsim-calibrate-") as tmp:
        prof_path = Path(tmp) / "profile.yaml"
        prof_path.write_text(yaml.safe_dump(data, sort_keys=False))
        sc = load_scenario(scenario, [f"backend.profile={prof_path}"])
        seeds = seeds or sc.seed_list()
        audits = []
        for i, s in enumerate(seeds):
            res = run_one(sc, s)
            audits.append(res.summary["audit"])
            if progress is not None:
                progress(i + 1, len(seeds))
    out: dict[str, Any] = {"seeds": seeds, "audits": audits, "targets": {}}
    pooled = _pooled_takeover(audits)
    out["takeover_counts"] = {k: v for k, v in pooled.items() if isinstance(v, int)}
    for t in TARGETS:
        # per-seed values (a Takeover rate from one seed's counts, as pooled over all)
        vals = ([_pooled_takeover([a]).get(t.key.split(".", 1)[1]) for a in audits] if t.key.startswith("takeover.")
                else [get_path(a, t.key, None) for a in audits])
        nums = [v for v in vals if isinstance(v, (int, float))]
        # Takeover rates are pooled over seeds (App. C.5 counts 32 cases in all)
        value = (pooled.get(t.key.split(".", 1)[1]) if t.key.startswith("takeover.")
                 else statistics.fmean(nums) if nums else None)
        out["targets"][t.key] = {"value": value, "sd": statistics.stdev(nums) if len(nums) > 1 else 0.0,
                                 "per_seed": vals}
    return out


def rows(measured: dict[str, Any]) -> list[dict[str, Any]]:
    """Target vs achieved, one row per target."""
    out = []
    for t in TARGETS:
        m = measured["targets"][t.key]
        v = m["value"]
        out.append({"key": t.key, "label": t.label, "paper": t.paper, "spread": t.spread, "value": v,
                     "sd": m["sd"], "diff": None if v is None else v - t.paper,
                     "within_spread": None if (v is None or t.spread is None) else abs(v - t.paper) <= t.spread,
                     "within": None if v is None else abs(v - t.paper) <= t.tol, "source": t.source})
    return out


def loss(measured: dict[str, Any]) -> float:
    total = 0.0
    for t in TARGETS:
        v = measured["targets"][t.key]["value"]
        if v is None:
            total += 25.0 * t.weight
            continue
        band = t.band if t.band is not None else (t.spread if t.spread else 0.05)
        total += t.weight * ((v - t.paper) / band) ** 2
    return total


def _measure_job(args: tuple) -> tuple[float, dict[str, Any]]:
    profile, scenario, seeds = args
    try:
        m = measure(profile, scenario, seeds)
    except InputError:  # a candidate outside the profile's constraints (a class summing above 1)
        return math.inf, {}
    return loss(m), m


def fit(profile: dict[str, Any], scenario: str | Path = AUDIT_SCENARIO, seeds: Optional[list[int]] = None,
        params: tuple[tuple[str, float, float], ...] = FIT_PARAMS, sweeps: int = 3, workers: int = 2,
        progress: Optional[Callable[[str], None]] = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Coordinate search with shrinking grids: each sweep tries, for one parameter
    at a time, four values around the current one (spaced by that parameter's
    step, evaluated in parallel) and keeps the best; steps shrink each sweep.
    The objective is deterministic (same seeds: common random numbers).
    Returns (best profile, its measurement)."""
    import concurrent.futures as cf

    best = copy.deepcopy(profile)
    best_l, best_m = _measure_job((best, str(scenario), seeds))
    if progress:
        progress(f"start: loss {best_l:.2f}")
    step = {p: (hi - lo) / 4 for p, lo, hi in params}
    pool = cf.ProcessPoolExecutor(max_workers=workers) if workers > 1 else None
    try:
        for sweep in range(sweeps):
            for path, lo, hi in params:
                try:
                    x0 = float(get_path(best, path))
                except (KeyError, IndexError, TypeError, ValueError):
                    continue  # not a number of this profile (e.g. no Finalize-specific table)
                xs = sorted({round(min(hi, max(lo, x0 + k * step[path])), 4) for k in (-2, -1, 1, 2)}
                            - {round(x0, 4)})
                cands = []
                for x in xs:
                    c = copy.deepcopy(best)
                    set_path(c, path, x)
                    cands.append((x, c))
                jobs = [(c, str(scenario), seeds) for _, c in cands]
                got = list(pool.map(_measure_job, jobs)) if pool else [_measure_job(j) for j in jobs]
                k = min(range(len(got)), key=lambda n: got[n][0]) if got else None
                if k is not None and got[k][0] < best_l - 1e-9:
                    best, best_l, best_m = cands[k][1], got[k][0], got[k][1]
                    if progress:
                        progress(f"sweep {sweep + 1}: {path} = {cands[k][0]}: loss {best_l:.2f}")
            for p in step:
                step[p] *= 0.5
    finally:
        if pool is not None:
            pool.shutdown()
    return best, best_m


def fmt_rows(rs: list[dict[str, Any]]) -> list[str]:
    def f(x: Any, nd: int = 3) -> str:
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"
    lines = [f"{'target (App. C.5)':<52} {'paper':>13} {'simulated':>15} {'diff':>7}  ok"]
    for r in rs:
        paper = f(r["paper"]) + (f" ± {f(r['spread'])}" if r["spread"] else "")
        sim = f(r["value"]) + f" ± {f(r['sd'])}"
        ok = "-" if r["within"] is None else ("yes" if r["within"] else "NO")
        if r["within_spread"] is not None:
            ok += " (in spread)" if r["within_spread"] else " (outside spread)"
        lines.append(f"{r['label']:<52} {paper:>13} {sim:>15} {f(r['diff']):>7}  {ok}")
    return lines
