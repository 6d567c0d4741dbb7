"""Trial parameters to sweep points, and the runs of those points into the search's folder
(see :mod:`meshsim.sweep.search`)."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any, Optional, Sequence

from ...core.errors import InputError
from ..folder import run_dir
from .spec import SearchPlan, check_metrics


# ------------------------------------------------------------------------------------ points


class Points:
    """Trial parameters -> sweep points (validated as plan_sweep validates a grid point)."""

    def __init__(self, sp: SearchPlan):
        self.sp, self.plan = sp, sp.plan
        self.graphs: dict[str, Any] = {}
        from ...scenario.model import CheckMemo  # (the scenario package loads when a search runs)

        self.memo = CheckMemo()
        self.cache: dict[str, Any] = {}

    def make(self, raw: dict[str, Any]):
        """``(Point, None)`` or ``(None, reason)`` for the raw Optuna parameters."""
        from ...simulate.runner import portable_data
        from ...scenario.model import build_graph, check_semantics, get_path, parse_scenario, set_path, topology_seed
        from ..core import Point, point_key

        plan = self.plan
        vals = {r.path: r.applied(raw[r.path]) for r in self.sp.spec.ranges}
        ck = json.dumps(vals, sort_keys=True)
        if ck in self.cache:
            return self.cache[ck]
        data = copy.deepcopy(plan.base)
        try:
            for p, v in vals.items():
                set_path(data, p, v, plan.source)
            sc = parse_scenario(data, plan.source, plan.base_dir)
            gkey = json.dumps([sc.network.model_dump(mode="json"), sc.agents.model_dump(mode="json"),
                               sc.tasks.model_dump(mode="json") if sc.tasks else None,
                               topology_seed(sc, plan.seeds[0])], sort_keys=True, default=str)
            if gkey not in self.graphs:
                self.graphs[gkey] = build_graph(sc, plan.seeds[0])
            check_semantics(sc, self.graphs[gkey], self.memo)
        except InputError as exc:
            self.cache[ck] = (None, vals, str(exc))
            return self.cache[ck]
        portable = portable_data(sc)
        values = {p: get_path(portable, p, v) for p, v in vals.items()}
        self.cache[ck] = (Point(point_key(portable), values, portable), values, None)
        return self.cache[ck]


# ------------------------------------------------------------------------------------ running


class Runner:
    """Runs (point, seed) pairs into the sweep folder on one executor, extending the manifest first."""

    def __init__(self, sp: SearchPlan, out: Path, ex, manifest: dict, progress_args: dict):
        self.sp, self.out, self.ex, self.manifest = sp, out, ex, manifest
        self.progress_args = progress_args
        self.points: dict[str, Any] = {}
        self.metrics: dict[tuple[str, int], Optional[dict]] = {}
        self.executed = self.failed = 0
        self.failures: list[dict] = []
        self._parsed: dict[str, Any] = {}
        self._resolved: dict[tuple[str, int], str] = {}
        self._inputs: dict[str, Optional[bytes]] = {}  # input files' content by path, read once (Dask)

    def _expected(self, point, seed: int) -> str:
        """The run's scenario.resolved.yaml (what a finished run must hold)."""
        from ...simulate.runner import resolved_yaml
        from ...scenario.model import parse_scenario

        if (point.key, seed) not in self._resolved:
            if point.key not in self._parsed:
                self._parsed[point.key] = parse_scenario(copy.deepcopy(point.data), self.sp.plan.source,
                                                         self.sp.plan.base_dir)
            self._resolved[(point.key, seed)] = resolved_yaml(self._parsed[point.key], seed)
        return self._resolved[(point.key, seed)]

    def finished(self, key: str, seed: int) -> bool:
        d = run_dir(self.out, key, seed)
        r = d / "scenario.resolved.yaml"
        return (d / "summary.json").is_file() and r.is_file() and \
            r.read_text() == self._expected(self.points[key], seed)

    def extend(self, pairs: list[tuple[Any, int]], skipped: Sequence[dict[str, Any]] = ()) -> None:
        from ..manifest import write_manifest

        m = self.manifest
        changed = False
        for point, seed in pairs:
            self.points[point.key] = point
            if point.key not in m["points"]:
                m["points"][point.key] = point.values
                changed = True
            if [point.key, seed] not in m["runs"]:
                m["runs"].append([point.key, seed])
                changed = True
        for s in skipped:
            if s not in m["skipped"]:
                m["skipped"].append(s)
                changed = True
        if changed:
            write_manifest(self.out, m)

    def run(self, pairs: list[tuple[Any, int]], label: str) -> None:
        """Run every unfinished pair (deduplicated), write it, and read its metrics."""
        from ..core import write_run
        from ..progress import SweepProgress

        self.extend(pairs)
        seen, todo = set(), []
        for point, seed in pairs:
            if (point.key, seed) in seen:
                continue
            seen.add((point.key, seed))
            if not self.finished(point.key, seed):
                todo.append((point, seed))
        if todo:
            tasks = [{"point": p.key, "seed": s, "scenario": p.data, "source": self.sp.plan.source,
                      "base_dir": str(self.sp.plan.base_dir), "level": self.sp.plan.spec.output,
                      "resolved": self._expected(p, s)} for p, s in todo]
            if self.ex.name == "dask":  # workers may be on other machines: the input files' content (core)
                from ..core import point_inputs

                per_point: dict[str, dict[str, bytes]] = {}
                for t, (p, _s) in zip(tasks, todo):
                    if p.key not in per_point:
                        per_point[p.key] = point_inputs(p.data, self.sp.plan.source, self.sp.plan.base_dir,
                                                        self.ex.address != "local", self._inputs)
                    t["files"] = per_point[p.key]
            fmts = {p.key: (p.data.get("output") or {}).get("format", "jsonl.gz") for p, _s in todo}
            progress = SweepProgress(len(seen), len(seen) - len(todo), **self.progress_args)
            progress.start()
            for res in self.ex.run(tasks):
                write_run(self.out, res, fmts[res["point"]])
                self.metrics.pop((res["point"], int(res["seed"])), None)
                self.executed += 1
                if res["status"] != "ok":
                    self.failed += 1
                    self.failures.append(res)
                progress.advance(res["status"] == "ok")
            progress.close()

    def values(self, key: str, seed: int) -> Optional[dict[str, Any]]:
        """The flattened summary of a finished run (None: failed or missing)."""
        from ..results import flatten

        if (key, seed) not in self.metrics:
            f = run_dir(self.out, key, seed) / "summary.json"
            self.metrics[(key, seed)] = flatten(json.loads(f.read_text())) if f.is_file() else None
        return self.metrics[(key, seed)]

    def series(self, key: str, metric: str, seeds: list[int]) -> dict[int, float]:
        """{seed: value} of ``metric`` over the finished ``seeds`` of a point (booleans as 0/1, nulls left out)."""
        out = {}
        for s in seeds:
            v = self.values(key, s)
            x = None if v is None else v.get(metric)
            if isinstance(x, bool):
                x = float(x)
            if isinstance(x, (int, float)) and math.isfinite(float(x)):
                out[s] = float(x)
        return out


def evaluate(sp: SearchPlan, runner: Runner, point, seeds: list[int]) -> tuple[Optional[list[float]],
                                                                                    list[float], dict, str]:
    """(objective means or None, constraint violations, {metric: mean}, reason) of a point over ``seeds``."""
    flats = [runner.values(point.key, s) for s in seeds]
    bad = sum(1 for f in flats if f is None)
    if bad:
        return None, [], {}, f"{bad} of {len(seeds)} runs failed"
    known: set[str] = set().union(*(set(f) for f in flats if f is not None))
    for m in [o.metric for o in sp.spec.objectives] + [c.metric for c in sp.spec.constraints]:
        if m not in known:
            check_metrics(sp, known)  # raises: unknown metric, with a guess
    means: dict[str, float] = {}
    for m in dict.fromkeys([o.metric for o in sp.spec.objectives] + [c.metric for c in sp.spec.constraints]):
        xs = list(runner.series(point.key, m, seeds).values())
        means[m] = sum(xs) / len(xs) if xs else math.nan
    missing = [o.metric for o in sp.spec.objectives if not math.isfinite(means[o.metric])]
    if missing:
        return None, [], means, f"{missing[0]} has no value in any seed"
    viol = [c.seed_violation(runner.series(point.key, c.metric, seeds)) for c in sp.spec.constraints]
    return [means[o.metric] for o in sp.spec.objectives], viol, means, ""
