"""Tidy results of a sweep folder: ``results.csv`` (one row per run: swept
parameters, seed, status, every scalar metric of its summary) and
``summary.csv`` (one row per point and metric: mean, sd and quantiles over
seeds, the 95 % interval of the mean and the paired difference to a reference
point on shared seeds, :mod:`.stats`), both also as Parquet when pyarrow is installed, and
:func:`load_results` for pandas.

Rows are in grid order (by the swept values, then seed), never in completion
order, and numbers are written with ``repr``: the same runs give the same
bytes whatever executor or worker count produced them.
"""
from __future__ import annotations

import csv
import io
import json
import math
import statistics
from pathlib import Path
from typing import Any, Iterable, Optional

from ..core.dotted import leaves
from ..core.errors import InputError, RunFolderError
from ..observe.aggregate import quantile
from ..io.records import write_atomic
from .folder import run_dir

__all__ = ["flatten", "run_rows", "point_rows", "write_results", "load_results", "read_table", "RESULTS",
           "SUMMARY", "MAX_AGENT_COLUMNS", "QUANTILES", "sort_key", "metric_columns", "resolve_reference", "CONF"]
__all__ += ["comparable_results", "TIMING", "TIMING_COLUMNS", "csv_text"]

RESULTS, SUMMARY = "results.csv", "summary.csv"
#: per-agent summary fields (``agents.<A>.*``) become columns for at most this many degraded agents;
#: beyond it only the network-level ``detection.*`` metrics do (every summary.json keeps them all)
MAX_AGENT_COLUMNS = 12
QUANTILES = (("q10", 0.10), ("q25", 0.25), ("median", 0.5), ("q75", 0.75), ("q90", 0.90))
#: a run's wall-clock and CPU seconds, measured in the worker and kept in its folder's ``timing.json``
#: (not summary.json): the only columns of results.csv that differ between two sweeps of the same runs
TIMING, TIMING_COLUMNS = "timing.json", ("wall_seconds", "cpu_seconds")
RUN_COLUMNS = ("seed", "point", "status", "error") + TIMING_COLUMNS
STAT_COLUMNS = ("runs", "failed", "n", "mean", "sd", "min") + tuple(q for q, _ in QUANTILES) + ("max",)
#: after STAT_COLUMNS: standard error and CONF interval of the mean over seeds (Student t; Wilson for a
#: proportion, stats.proportion_interval), then the
#: reference point (``ref``) and the paired difference point - reference over the seeds both hold
INTERVAL_COLUMNS = ("se", "lo", "hi")
DIFF_COLUMNS = ("ref", "diff", "diff_se", "diff_lo", "diff_hi", "diff_n")
CONF = 0.95
_SKIP = {"seed", "scenario"}


def flatten(summary: dict[str, Any]) -> dict[str, Any]:
    """Every scalar metric of a summary as ``dotted.path: value`` (numbers,
    booleans and nulls; text and lists are left out)."""
    out: dict[str, Any] = {}
    many = isinstance(summary.get("agents"), dict) and len(summary["agents"]) > MAX_AGENT_COLUMNS

    for path, v in leaves(summary):
        if (v is None or isinstance(v, (bool, int, float))) and not (
                path in _SKIP or (many and path.startswith("agents."))):
            out[path] = v
    return out


def sort_key(value: Any) -> tuple:
    """Orders swept values of any type: numbers, then text, then missing."""
    if isinstance(value, bool):
        return (1, str(value))
    if isinstance(value, (int, float)):
        return (0, float(value))
    if value is None:
        return (2, "")
    return (1, json.dumps(value, sort_keys=True, default=str))


def _manifest(folder: Path) -> dict[str, Any]:
    from .manifest import read_manifest

    m = read_manifest(folder)
    if m is None:
        raise RunFolderError("not a sweep folder (no manifest.json); make one with meshsim sweep", file=str(folder))
    return m


def _axis_value(folder: Path, manifest: dict, point: str, seed: int, path: str) -> Any:
    vals = manifest["points"][point]
    if path in vals:
        return vals[path]
    # a point made before this axis was added: the value it ran with
    from ..core.files import read_output_yaml
    from ..scenario.model import get_path

    f = run_dir(folder, point, seed) / "scenario.resolved.yaml"
    if f.is_file():
        return get_path(read_output_yaml(f), path, None)
    return None


def run_rows(folder: Path | str, manifest: Optional[dict] = None) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, rows) of ``results.csv``: one row per run the folder's manifest lists."""
    folder = Path(folder)
    manifest = manifest or _manifest(folder)
    axes = list(manifest["axes"])
    rows, metrics, seen = [], set(), set()
    for point, seed in manifest["runs"]:
        if (point, seed) in seen:  # one row per run, whatever the list holds (issue 30)
            continue
        seen.add((point, seed))
        d = run_dir(folder, point, seed)
        row: dict[str, Any] = {p: _axis_value(folder, manifest, point, seed, p) for p in axes}
        row.update(seed=seed, point=point)
        summ = d / "summary.json"
        if summ.is_file():
            try:
                flat = flatten(json.loads(summ.read_text()))
            except ValueError:
                raise RunFolderError("not valid JSON", file=str(summ)) from None
            row.update(status="ok", error=None)
            for k, v in flat.items():
                if k not in axes:
                    row[k] = v
                    metrics.add(k)
        elif (d / "error.txt").is_file():
            row.update(status="failed", error=(d / "error.txt").read_text().splitlines()[0][:500]
                       if (d / "error.txt").read_text().strip() else "failed")
        else:
            row.update(status="missing", error="not run yet (rerun the sweep command to finish it)")
        if row["status"] != "missing" and (d / TIMING).is_file():
            try:
                timing = json.loads((d / TIMING).read_text())
                row.update({c: timing.get(c) for c in TIMING_COLUMNS})
            except ValueError:
                pass  # a damaged timing file costs the timing only
        rows.append(row)
    rows.sort(key=lambda r: tuple(sort_key(r[p]) for p in axes) + (r["seed"],))
    return axes + list(RUN_COLUMNS) + sorted(metrics), rows


def comparable_results(folder: Path | str, name: str = RESULTS) -> str:
    """``results.csv`` without the timing columns: what is byte-identical
    between two sweeps of the same runs, whatever executor, worker count or
    interruption produced them."""
    rows = list(csv.reader(io.StringIO((Path(folder) / name).read_text())))
    keep = [i for i, c in enumerate(rows[0]) if c not in TIMING_COLUMNS] if rows else []
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for r in rows:
        w.writerow([r[i] for i in keep])
    return buf.getvalue()


def metric_columns(columns: list[str], axes: list[str]) -> list[str]:
    return [c for c in columns if c not in axes and c not in RUN_COLUMNS]


def _num(v: Any) -> Optional[float]:
    if v is None:
        return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None


def _finite(v: float) -> Optional[float]:
    return v if math.isfinite(v) else None


def point_rows(columns: list[str], rows: list[dict[str, Any]], axes: list[str],
               reference: Optional[dict[str, Any]] = None) -> tuple[list[str], list[dict]]:
    """(columns, rows) of ``summary.csv``: per point and metric, statistics over
    its finished seeds (booleans count as 0/1, so their mean is a rate), the
    :data:`CONF` interval of the mean, and the paired difference to the point's
    reference (``reference``: ``{path: value}``, see
    :func:`meshsim.sweep.slices.reference_points`; None or empty: no reference)."""
    from .slices import point_values, reference_points
    from .stats import metric_interval, paired, rate_counts

    metrics = metric_columns(columns, axes)
    by_point: dict[str, list[dict]] = {}
    for r in rows:
        by_point.setdefault(r["point"], []).append(r)
    refs = reference_points(point_values(rows, axes), axes, reference or {})
    per_seed: dict[str, dict[str, dict[int, float]]] = {}  # point -> metric -> seed -> value
    for point, runs in by_point.items():
        d = per_seed[point] = {}
        for m in metrics:
            d[m] = {r["seed"]: x for r in runs if r["status"] == "ok" and (x := _num(r.get(m))) is not None}
    out = []
    for point, runs in by_point.items():  # rows are already in grid order
        ok = [r for r in runs if r["status"] == "ok"]
        failed = sum(1 for r in runs if r["status"] == "failed")
        head = {p: runs[0][p] for p in axes}
        for m in metrics:
            xs = [x for x in (_num(r.get(m)) for r in ok) if x is not None]
            row = dict(head)
            row.update(point=point, metric=m, runs=len(ok), failed=failed, n=len(xs),
                       mean=statistics.fmean(xs) if xs else None,
                       sd=statistics.stdev(xs) if len(xs) > 1 else None,
                       min=min(xs) if xs else None, max=max(xs) if xs else None)
            for name, q in QUANTILES:
                row[name] = quantile(xs, q)
            # a proportion: Wilson, in [0, 1]; a rate with its counts: also the pooled counts' Wilson
            ci = metric_interval(m, xs, CONF, rate_counts(m, [r for r in ok if _num(r.get(m)) is not None]))
            row.update(se=_finite(ci.se), lo=_finite(ci.lo), hi=_finite(ci.hi), ref=refs.get(point))
            ref = refs.get(point)
            if ref is not None:
                diff = paired(per_seed[point][m], per_seed[ref][m], CONF)
                row.update(diff=_finite(diff.mean), diff_se=_finite(diff.se), diff_lo=_finite(diff.lo),
                           diff_hi=_finite(diff.hi), diff_n=diff.n)
            out.append(row)
    return axes + ["point", "metric"] + list(STAT_COLUMNS) + list(INTERVAL_COLUMNS) + list(DIFF_COLUMNS), out


def resolve_reference(manifest: dict, rows: list[dict[str, Any]], reference: Any = None) -> dict[str, Any]:
    """``{path: value}`` of the reference: ``reference`` as ``PATH=VALUE`` items
    (or a mapping), checked against the folder's points; None: the default rule
    (:func:`meshsim.sweep.slices.default_reference`)."""
    from .slices import default_reference, parse_fixes, point_values, same_value

    axes = list(manifest["axes"])
    pts = point_values(rows, axes)
    if reference is None:
        return default_reference(manifest, pts)

    def values_of(path: str) -> list[Any]:
        out: list[Any] = []
        for v in pts.values():
            if not any(same_value(v[path], u) for u in out):
                out.append(v[path])
        return sorted(out, key=sort_key)

    return parse_fixes(reference, axes, values_of, "--reference")


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return str(v)


def csv_text(columns: list[str], rows: Iterable[dict[str, Any]]) -> str:
    """The tables' CSV form: one row per dict, None empty, floats by repr (exact), lists and dicts as JSON."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in columns])
    return buf.getvalue()


def _parquet(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> bool:
    """Write a Parquet file when pyarrow is installed (each column one type)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        if path.exists():
            path.unlink()  # an earlier one would be stale
        return False
    arrays = {}
    for c in columns:
        vals = [r.get(c) for r in rows]
        present = [v for v in vals if v is not None]
        if present and all(isinstance(v, bool) for v in present):
            arrays[c] = pa.array(vals, type=pa.bool_())
        elif present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
            arrays[c] = pa.array(vals, type=pa.int64())
        elif present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
            arrays[c] = pa.array([None if v is None else float(v) for v in vals], type=pa.float64())
        else:
            arrays[c] = pa.array([None if v is None else _cell(v) for v in vals], type=pa.string())
    buf = pa.BufferOutputStream()
    pq.write_table(pa.table(arrays), buf)
    write_atomic(path, buf.getvalue().to_pybytes())
    return True


def write_results(folder: Path | str, manifest: Optional[dict] = None, reference: Any = None) -> list[Path]:
    """Write results.csv and summary.csv (and .parquet twins when pyarrow is there);
    ``reference``: ``PATH=VALUE`` items of the reference point (default rule: None)."""
    folder = Path(folder)
    manifest = manifest or _manifest(folder)
    cols, rows = run_rows(folder, manifest)
    pcols, prows = point_rows(cols, rows, list(manifest["axes"]), resolve_reference(manifest, rows, reference))
    written = []
    for name, c, r in ((RESULTS, cols, rows), (SUMMARY, pcols, prows)):
        write_atomic(folder / name, csv_text(c, r))
        written.append(folder / name)
        pq = (folder / name).with_suffix(".parquet")
        if _parquet(pq, c, r):
            written.append(pq)
    return written


def read_table(folder: Path | str, which: str = "runs", reference: Any = None
               ) -> tuple[list[str], list[dict[str, Any]], dict]:
    """(columns, rows, manifest) of a sweep folder without pandas: values typed
    back from the runs' summaries (``runs``) or computed per point (``points``,
    with ``reference`` as in :func:`write_results`)."""
    folder = Path(folder)
    m = _manifest(folder)
    cols, rows = run_rows(folder, m)
    if which == "points":
        cols, rows = point_rows(cols, rows, list(m["axes"]), resolve_reference(m, rows, reference))
    return cols, rows, m


def load_results(folder: Path | str, which: str = "runs", reference: Any = None):
    """A sweep folder's results as a pandas DataFrame.

    ``which="runs"`` (default): ``results.csv``, one row per run (swept
    parameters, ``seed``, ``point``, ``status``, ``error``, every scalar
    metric). ``which="points"``: ``summary.csv``, one row per point and metric
    (``mean``, ``sd``, ``min``, quantiles, ``max`` over seeds, ``se``, ``lo``,
    ``hi``, and the paired difference ``diff`` … to the reference point ``ref``,
    given by ``reference=["window=8"]`` or the default rule). Read from the
    run folders, so a sweep that is still running gives what has finished.
    """
    try:
        import pandas as pd
    except ImportError:
        raise InputError("load_results needs pandas, which the 'sweep' extra installs: "
                         "pip install 'meshsim[sweep]'") from None
    if which not in ("runs", "points"):
        raise InputError("choose 'runs' or 'points'", field="which", value=which)
    cols, rows, _m = read_table(folder, which, reference)
    return pd.DataFrame.from_records([[r.get(c) for c in cols] for r in rows], columns=cols)
