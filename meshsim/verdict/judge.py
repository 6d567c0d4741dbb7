"""From the runs' ``summary.json`` to ``verdict.json``: every measure per
candidate and size with its interval over the held-out seeds, its worst seed
and its band over the assumption samples, and every constraint's PASS / FAIL
(docs/verdict.md). Reads only; the same runs give the same bytes."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from ..core.errors import RunFolderError
from .constraints import holds_at, judge
from .measures import COLLAPSE_RULE, EVENTS, MEASURES, Run, event, mean, proportion, rate_of, worst

__all__ = ["judge_plan", "read_runs"]

#: a run's list of falsely isolated agents (named with the worst seed; first few)
_NAMES = "detection.falsely_isolated"
_SHOW_NAMES = 6

INTERVALS = ("proportions (per healthy agent, per episode) pool the count over the seeds: exact 95 % Clopper-Pearson "
             "interval; P(event) is the share of runs: Clopper-Pearson over runs; means (per run, delays) average "
             "the seeds with a value: 95 % Student-t interval (none from one seed), cut at 0 for counts and delays")
BAND = "5-95 % quantiles over the assumption samples of each sample's estimate at the band seeds"


def _paths(plan: Any) -> list[str]:
    ps = [m.count for m in MEASURES.values()] + [m.of for m in MEASURES.values() if m.of]
    ps += [p for p, _label in EVENTS.values()] + [c.path for c in plan.constraints if c.path]
    return list(dict.fromkeys(ps))


def read_runs(folder: Path, key: str, seeds: list[int], paths: list[str]
              ) -> tuple[list[Run], list[int], dict[int, list[str]]]:
    """(finished runs as (seed, {path: value}), seeds without a summary, {seed: falsely isolated agents})."""
    from .measures import per_run

    runs: list[Run] = []
    failed: list[int] = []
    names: dict[int, list[str]] = {}
    for s in seeds:
        f = folder / "runs" / key / f"seed-{s}" / "summary.json"
        if not f.is_file():
            failed.append(s)
            continue
        try:
            summary = json.loads(f.read_text())
        except ValueError:
            raise RunFolderError("not valid JSON", file=str(f)) from None
        runs.append((s, {p: per_run(summary, p) for p in paths}))
        det = summary.get("detection") if isinstance(summary, dict) else None
        fi = det.get("falsely_isolated") if isinstance(det, dict) else None
        names[s] = [str(a) for a in fi] if isinstance(fi, list) else []
    return runs, failed, names


def _band(values: list[Optional[float]]) -> Optional[dict[str, Any]]:
    from ..observe.aggregate import quantile

    xs = [x for x in values if x is not None]
    if not xs:
        return None
    return {"p5": quantile(xs, 0.05), "p50": quantile(xs, 0.5), "p95": quantile(xs, 0.95), "samples": len(xs)}


def _measure(name: str, runs: list[Run], band: list[list[Run]]) -> dict[str, Any]:
    m = MEASURES[name]

    def stat(rs: list[Run]) -> dict[str, Any]:
        return proportion(rs, m) if m.kind == "proportion" else mean(rs, m.count, 0.0)

    st = stat(runs)
    ws, wv = worst(runs, lambda v: rate_of(m, v))
    st.update(worst_seed=ws, worst=wv)
    if band:
        st["band"] = _band([stat(rs)["estimate"] for rs in band])
    return st


def _worst_run(runs: list[Run], names: dict[int, list[str]]) -> Optional[dict[str, Any]]:
    """The worst held-out run: a collapse first, then the most false isolations, missed detections, the
    longest detection delay in own outputs (the first seed on ties)."""
    if not runs:
        return None

    def key(r: Run) -> tuple:
        v = r[1]
        return ((v.get("collapse.occurred") or 0) > 0, v.get("detection.false_isolations") or 0,
                v.get("detection.missed") or 0, v.get("detection.delay_outputs_mean") or -1.0, -r[0])

    s, v = max(runs, key=key)
    fi = names.get(s, [])
    return {"seed": s, "collapse": bool((v.get("collapse.occurred") or 0) > 0),
            "false_isolations": v.get("detection.false_isolations"),
            "falsely_isolated": fi[:_SHOW_NAMES] + (["..."] if len(fi) > _SHOW_NAMES else []),
            "missed": v.get("detection.missed"), "delay_outputs": v.get("detection.delay_outputs_mean")}


def _cell(plan: Any, size: Any, cand: Any, folder: Path, paths: list[str]) -> dict[str, Any]:
    runs, failed, names = read_runs(folder, size.held[cand.name].key, plan.seeds, paths)
    band = []
    for sample in range(len(plan.positions)):
        rs, _f, _n = read_runs(folder, size.band[(cand.name, sample)].key, plan.band_seeds, paths)
        band.append(rs)
    measures = {name: _measure(name, runs, band) for name in MEASURES}
    events = {}
    for name, (path, label) in EVENTS.items():
        st = event(runs, path)
        st["label"] = label
        if band:
            st["band"] = _band([event(rs, path)["estimate"] for rs in band])
        events[name] = st
    cons = []
    for c in plan.constraints:
        j = judge(c, runs)
        if band:
            at = [holds_at(c, rs) for rs in band]
            j["band_holds"] = {"holds": sum(1 for x in at if x), "samples": sum(1 for x in at if x is not None)}
        if failed:
            j["result"] = "FAIL"
            j["why"] += f"; {len(failed)} held-out run{'s' if len(failed) != 1 else ''} failed"
        cons.append(j)
    ok = not failed and all(j["result"] == "PASS" for j in cons)
    return {"size": size.label, "scenario": size.name, "agents": size.agents, "candidate": cand.name,
            "runs": len(runs), "failed_seeds": failed, "measures": measures, "events": events,
            "worst_seed": _worst_run(runs, names), "constraints": cons, "result": "PASS" if ok else "FAIL"}


def judge_plan(plan: Any, out: Path) -> dict[str, Any]:
    """``verdict.json``'s content."""
    from ..core.version import __version__
    from .common import FORMAT

    paths = _paths(plan)
    cells = [_cell(plan, size, c, out / size.label, paths) for size in plan.sizes for c in plan.candidates]
    search = None
    if plan.search is not None:
        search = {k: plan.search[k] for k in ("scenario", "seeds", "rule", "front_points")}
    return {"format": FORMAT, "meshsim": __version__,
            "sizes": [{"label": s.label, "scenario": s.name, "file": s.file.name, "agents": s.agents,
                       "sha256": s.sha256} for s in plan.sizes],
            "candidates": [{"name": c.name, "origin": c.origin, "values": c.values or c.shown}
                           for c in plan.candidates],
            "seeds": {"held_out": plan.seeds, "band": plan.band_seeds, "search": search["seeds"] if search else None,
                      "tuned_on": plan.tuned_on or None},
            "search": search,
            "assumptions": plan.assumptions,
            "rules": {"collapse": COLLAPSE_RULE, "intervals": INTERVALS, "band": BAND,
                      "constraints_default": plan.default_constraints},
            "constraints": [{"constraint": c.text, "judged_on": c.judged_on(), "every_run": c.every_run}
                            for c in plan.constraints],
            "cells": cells,
            "result": "PASS" if all(c["result"] == "PASS" for c in cells) else "FAIL"}
