"""Machinery of ``meshsim reproduce``: run specs, a cached process pool, cells and the report."""
from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import math
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import yaml

from ...core.errors import InputError
from ...core.bundled import data_root
from ...core.dotted import get_path
from ...core.files import load_yaml, read_text


__all__ = ["RunSpec", "Cell", "Experiment", "Sensitivity", "run_specs", "run_experiments", "run_sensitivities",
           "plot_sensitivities", "render_markdown", "PREDICTION", "TARGET"]

#: where ``scenarios/...`` and ``backends/...`` paths are read: the package's data (meshsim.core.bundled), so that
#: reproduce runs from any folder, with a wheel as in a checkout
ROOT = data_root()
PREDICTION, TARGET = "prediction", "calibration target"


@dataclass(frozen=True)
class RunSpec:
    scenario: str  # path relative to the checkout (and to the package's data: ROOT)
    sets: tuple[str, ...] = ()
    seed: int = 1
    #: profile parameters moved for this run: ((dotted path, value), ...)
    patch: tuple[tuple[str, Any], ...] = ()
    profile: Optional[str] = None  # a different profile than the scenario's

    def key(self) -> str:
        text = read_text(ROOT / self.scenario, "scenario") if (ROOT / self.scenario).is_file() else self.scenario
        blob = json.dumps([text, list(self.sets), self.seed, [list(p) for p in self.patch], self.profile,
                           _profile_text(self.profile)], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _profile_text(name: Optional[str]) -> str:
    if not name:
        return ""
    from ...backends import find_profile

    return read_text(find_profile(name, ROOT), "profile")


@dataclass
class Cell:
    table: str
    row: str
    paper: Any  # a number, a "min-max" text, or None when the paper does not report it
    kind: str = PREDICTION
    values: list[float] = field(default_factory=list)
    paper_sd: Optional[float] = None
    fmt: str = "{:.3f}"
    note: str = ""
    empty: str = "—"  # what the report shows when no seed has a value (e.g. "∞ (never isolated)")

    def stats(self) -> tuple[Optional[float], Optional[float]]:
        xs = [v for v in self.values if v is not None and not (isinstance(v, float) and math.isnan(v))]
        if not xs:
            return None, None
        return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)

    def as_dict(self) -> dict[str, Any]:
        m, s = self.stats()
        return {"table": self.table, "row": self.row, "paper": self.paper, "paper_sd": self.paper_sd,
                "kind": self.kind, "mean": m, "sd": s, "n": len([v for v in self.values if v is not None]),
                "values": self.values, "note": self.note, "fmt": self.fmt, "empty": self.empty}


@dataclass
class Experiment:
    key: str
    title: str
    runs: dict[str, list[RunSpec]]  # label -> one RunSpec per seed
    cells: Callable[[dict[str, list[dict]]], list[Cell]]
    quick_skip: bool = False
    wall: float = 0.0


# ---------------------------------------------------------------------------------------- running


def _run(spec: RunSpec) -> dict[str, Any]:
    """One run in a worker process: its summary."""
    from ...core.dotted import set_path
    from ...simulate.runner import run_one
    from ...scenario.model import load_scenario

    sets = list(spec.sets)
    with tempfile.TemporaryDirectory(prefix="meshsim-reproduce-") as tmp:
        if spec.patch or spec.profile:
            from ...backends import find_profile

            sc0 = load_yaml(ROOT / spec.scenario, "scenario")
            name = spec.profile or (sc0.get("backend") or {}).get("profile")
            data = load_yaml(find_profile(name, ROOT / Path(spec.scenario).parent), "profile")
            for path, value in spec.patch:
                set_path(data, path, value)
            p = Path(tmp) / "profile.yaml"
            p.write_text(yaml.safe_dump(data, sort_keys=False))
            sets.append(f"backend.profile={p}")
        sc = load_scenario(ROOT / spec.scenario, sets)
        t0 = time.perf_counter()
        res = run_one(sc, spec.seed)
        summary = json.loads(json.dumps(res.summary, default=str))
        summary["_wall"] = time.perf_counter() - t0
    return summary


def _check_cache_version(out: Path) -> None:
    """Cached summaries are keyed by scenario, overrides, seed and profile, not by
    code: a folder made by another meshsim version is refused rather than reused."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        mine = version("meshsim")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        mine = "unknown"
    meta = out / "meta.json"
    if meta.is_file():
        try:
            theirs = json.loads(meta.read_text()).get("meshsim")
        except ValueError:
            theirs = None
        if theirs != mine:
            raise InputError(f"holds runs of meshsim {theirs}, this is {mine}: use a new --out folder",
                             file=str(out))
    else:
        meta.write_text(json.dumps({"meshsim": mine}) + "\n")


def run_specs(specs: Iterable[RunSpec], out: Path, workers: int = 1,
              progress: Optional[Callable[[int, int, float], None]] = None) -> dict[RunSpec, dict]:
    """Every spec's summary, from the cache under ``out/runs`` or by running it."""
    cache = out / "runs"
    cache.mkdir(parents=True, exist_ok=True)
    _check_cache_version(out)
    specs = list(dict.fromkeys(specs))
    done: dict[RunSpec, dict] = {}
    todo = []
    for s in specs:
        f = cache / f"{s.key()}.json"
        if f.is_file():
            try:
                done[s] = json.loads(f.read_text())
                continue
            except ValueError:
                pass  # a torn write: run it again
        todo.append(s)
    total, t0 = len(specs), time.perf_counter()

    def keep(s: RunSpec, summary: dict) -> None:
        f = cache / f"{s.key()}.json"
        tmp = f.with_name(f.name + ".tmp")
        tmp.write_text(json.dumps(summary, sort_keys=True))
        tmp.replace(f)
        done[s] = summary
        if progress is not None:
            progress(len(done), total, time.perf_counter() - t0)

    if progress is not None and done:
        progress(len(done), total, 0.0)
    if workers <= 1 or len(todo) <= 1:
        for s in todo:
            keep(s, _run(s))
    else:
        with cf.ProcessPoolExecutor(max_workers=workers) as pool:
            futs = {pool.submit(_run, s): s for s in todo}
            for fut in cf.as_completed(futs):
                keep(futs[fut], fut.result())
    return done


def run_experiments(exps: list[Experiment], out: Path, workers: int = 1,
                    progress: Optional[Callable[[str], None]] = None) -> list[dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for exp in exps:
        specs = [s for runs in exp.runs.values() for s in runs]
        t0 = time.perf_counter()

        def tick(done: int, total: int, dt: float, exp: Experiment = exp) -> None:
            if progress is not None:
                progress(f"{exp.key}: {done}/{total} runs ({dt:.0f} s)")

        got = run_specs(specs, out, workers, tick)
        by_label = {label: [got[s] for s in runs] for label, runs in exp.runs.items()}
        sim_wall = sum(s.get("_wall", 0.0) for runs in by_label.values() for s in runs)
        cells = exp.cells(by_label)
        results.append({"key": exp.key, "title": exp.title, "wall": time.perf_counter() - t0,
                        "simulated_seconds": sim_wall, "runs": len(specs),
                        "cells": [c.as_dict() for c in cells]})
    return results


# ---------------------------------------------------------------------------------------- helpers




def _vals(sums: list[dict], path: str, scale: float = 1.0) -> list[Optional[float]]:
    out = []
    for s in sums:
        v = get_path(s, path, None)
        out.append(None if v is None or isinstance(v, bool) else float(v) * scale)
    return out


def seeds_of(seeds: "int | list[int]") -> list[int]:
    """A reproduction's seeds: a count N is seeds 1..N (docs/validation.md), a list is itself."""
    return list(range(1, seeds + 1)) if isinstance(seeds, int) else list(seeds)


def _seeds(scenario: str, seeds: "int | list[int]", sets: tuple[str, ...] = (), **kw: Any) -> list[RunSpec]:
    return [RunSpec(scenario, sets, seed=k, **kw) for k in seeds_of(seeds)]


def _pair(a: list, b: list, fn: Callable[[float, float], float]) -> list[Optional[float]]:
    return [None if x is None or y is None else fn(x, y) for x, y in zip(a, b)]


# ---------------------------------------------------------------------------------------- sensitivity

@dataclass
class Sensitivity:
    key: str
    param: str | tuple[str, ...]  # profile path(s), all set to the same value
    values: tuple[float, ...]
    scenario: str
    sets: tuple[str, ...]
    metrics: tuple[tuple[str, str], ...]  # (summary path, label)
    why: str
    profile: Optional[str] = None


def sensitivity_runs(sens: list[Sensitivity], seeds: int) -> dict[tuple[str, float], list[RunSpec]]:
    def patch(s: Sensitivity, v: float) -> tuple:
        paths = (s.param,) if isinstance(s.param, str) else s.param
        return tuple((p, v) for p in paths)

    return {(s.key, v): _seeds(s.scenario, seeds, s.sets, patch=patch(s, v), profile=s.profile)
            for s in sens for v in s.values}


def run_sensitivities(sens: list[Sensitivity], out: Path, seeds: int, workers: int,
                      progress: Optional[Callable[[str], None]] = None) -> list[dict[str, Any]]:
    runs = sensitivity_runs(sens, seeds)
    got = run_specs([r for rs in runs.values() for r in rs], out, workers,
                    (lambda d, t, dt: progress(f"sensitivity: {d}/{t} runs ({dt:.0f} s)")) if progress else None)
    results = []
    for s in sens:
        curves = []
        for path, label in s.metrics:
            pts = []
            for v in s.values:
                vals = [x for x in _vals([got[r] for r in runs[(s.key, v)]], path) if x is not None]
                pts.append({"x": v, "mean": statistics.fmean(vals) if vals else None,
                            "sd": statistics.stdev(vals) if len(vals) > 1 else 0.0, "n": len(vals)})
            curves.append({"metric": path, "label": label, "points": pts})
        results.append({"key": s.key, "param": s.param if isinstance(s.param, str) else " = ".join(s.param),
                        "why": s.why, "scenario": s.scenario,
                        "profile": s.profile, "sets": list(s.sets), "curves": curves})
    return results


def plot_sensitivities(results: list[dict[str, Any]], out: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    paths = []
    for r in results:
        n = len(r["curves"])
        fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.2), squeeze=False)
        for ax, c in zip(axes[0], r["curves"]):
            xs = [p["x"] for p in c["points"] if p["mean"] is not None]
            ms = [p["mean"] for p in c["points"] if p["mean"] is not None]
            sds = [p["sd"] for p in c["points"] if p["mean"] is not None]
            ax.plot(xs, ms, marker="o")
            ax.fill_between(xs, [m - s for m, s in zip(ms, sds)], [m + s for m, s in zip(ms, sds)], alpha=0.2)
            ax.set_xlabel(r["param"])
            ax.set_ylabel(c["label"])
            ax.grid(alpha=0.3)
        fig.suptitle(f"{r['key']}: {r['why']}", fontsize=9)
        fig.tight_layout()
        p = out / f"sensitivity-{r['key']}.png"
        fig.savefig(p, dpi=110, metadata={"Software": None})
        plt.close(fig)
        paths.append(p)
    return paths


# ---------------------------------------------------------------------------------------- report


def _fmt(fmt: str, x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    try:
        return fmt.format(x)
    except (ValueError, TypeError):
        return str(x)


def _bands_note(bands: Optional[dict[str, Any]]) -> list[str]:
    """The paragraph saying where the assumption bands come from (meshsim.paper.reproduce.bands)."""
    if not bands:
        return []
    if bands.get("missing"):
        return [f"Assumption bands: {bands['missing']}.", ""]
    skipped = bands.get("skipped") or []
    if bands.get("groups") is not None:  # the reference studies, each experiment over its own (bands.STUDIES)
        return _grouped_bands_note(bands)
    return [f"Assumption band: the row's seed mean (first {bands.get('seeds', 3)} seeds) at each of "
            f"{bands['samples']} of the {bands['available']} Latin-hypercube samples of the stored uncertainty "
            f"studies ({bands['how']}; profile `{bands['profile']}`; factors moved: {', '.join(bands['top']) or '-'})"
            + (", fewer samples with --quick" if bands.get("quick") else "")
            + "; 5–95 %. Class: robust agreement (the paper inside a band no wider than 2 seed sd, or the band "
              "inside the paper's range), robust disagreement (the paper outside the band), assumption-bound "
              "(otherwise). Experiments with bands: "
            + (", ".join(bands["experiments"]) or "none (their runs do not use the studies' profile)")
            + (f"; without (too costly to repeat per sample): {', '.join(skipped)}" if skipped else "") + ".", ""]


_CLASSES = ("Class: robust agreement (the paper inside a band no wider than 2 seed sd, or the band inside the "
            "paper's range), robust disagreement (the paper outside the band), assumption-bound (otherwise).")


def _grouped_bands_note(bands: dict[str, Any]) -> list[str]:
    parts = [f"{', '.join(g['experiments'])} at {g['samples']} of the {g['available']} samples of {g['how']} "
             f"(profile `{g['profile']}`; factors moved: {', '.join(g['top']) or '-'})"
             for g in bands["groups"] if g["experiments"]]
    why: dict[str, list[str]] = {}
    for k in bands.get("skipped") or []:
        why.setdefault("too costly to repeat per sample", []).append(k)
    for k, w in (bands.get("unbanded") or {}).items():
        why.setdefault(w, []).append(k)
    text = (f"Assumption band: the row's seed mean (first {bands.get('seeds', 3)} seeds) at each of the joined "
            "Latin-hypercube samples of its experiment's reference uncertainty studies"
            + (", fewer samples with --quick" if bands.get("quick") else "") + "; 5–95 %. "
            + ("Experiments with bands: " + "; ".join(parts) + ". " if parts else "Experiments with bands: none. ")
            + _CLASSES)
    if why:
        text += " Without a band (seed sd only): " + "; ".join(f"{', '.join(ks)} ({w})" for w, ks in why.items()) + "."
    return [text, ""]


def render_classes(results: list[dict[str, Any]], bands: Optional[dict[str, Any]]) -> str:
    """Every prediction row with its band and class, grouped by class (``classes.md`` of a reproduce folder;
    docs/validation.md "Classification of every row")."""
    order = ("robust disagreement", "assumption-bound", "robust agreement", "no paper value", "no band",
             "no value at any seed")
    rows: dict[str, list[str]] = {k: [] for k in order}
    for r in results:
        for c in r["cells"]:
            if c["kind"] != PREDICTION:
                continue
            fmt = c.get("fmt") or "{:.3f}"
            sim = c.get("empty", "—") if c["mean"] is None else \
                f"{_fmt(fmt, c['mean'])} ± {_fmt(fmt, c['sd']).lstrip('+')}"
            b = c.get("band")
            cls = (c.get("class") or "no paper value") if b else \
                ("no value at any seed" if c["mean"] is None else "no band")
            band = f"{_fmt(fmt, b[0])} – {_fmt(fmt, b[1])}" if b else "—"
            rows.setdefault(cls, []).append(f"| {r['key']} | {c['table']} | {c['row']} | {_fmt(fmt, c['paper'])} | "
                                            f"{sim} | {band} |")
    lines = [" · ".join(f"{k}: {len(v)}" for k, v in rows.items() if v), ""]
    lines += _bands_note(bands)
    for k, v in rows.items():
        if not v:
            continue
        lines += [f"**{k}** ({len(v)} rows)", "", "| experiment | table | quantity | paper | simulated | band 5–95 % |",
                  "| --- | --- | --- | --- | --- | --- |", *v, ""]
    return "\n".join(lines)


def render_markdown(title: str, results: list[dict[str, Any]], sens: list[dict[str, Any]],
                    fmt_of: Optional[dict[str, str]] = None, bands: Optional[dict[str, Any]] = None) -> str:
    lines = [f"# {title}", "",
             "Simulated: mean ± sample sd over seeds. *calibration target*: a mechanism-level statistic the fake "
             "was fitted to; *prediction*: everything else, reported as it came out (no parameter was tuned to it). "
             "A paper value `n/r` is not reported in the text of our copy of the paper.", ""]
    lines += _bands_note(bands)
    for r in results:
        banded = any("band" in c for c in r["cells"])
        lines += [f"## {r['title']}", "",
                  f"{r['runs']} runs, {r['simulated_seconds']:.0f} s of run time summed over runs "
                  f"({r['wall']:.0f} s wall for this invocation; cached runs are reused)", "",
                  *([f"No assumption band: {r['band_why']}.", ""] if r.get("band_why") else []),
                  "| table | quantity | paper | simulated | kind |" + (" assumption band | class |" if banded else ""),
                  "| --- | --- | --- | --- | --- |" + (" --- | --- |" if banded else "")]
        for c in r["cells"]:
            fmt = c.get("fmt") or "{:.3f}"
            paper = _fmt(fmt, c["paper"]) + (f" ± {_fmt(fmt, c['paper_sd']).lstrip('+')}"
                                             if c["paper_sd"] is not None else "")
            sim = c.get("empty", "—") if c["mean"] is None else \
                f"{_fmt(fmt, c['mean'])} ± {_fmt(fmt, c['sd']).lstrip('+')}"
            if c["n"] and c["n"] < len(c["values"]):
                sim += f" ({c['n']} of {len(c['values'])} seeds)"
            note = f" ({c['note']})" if c.get("note") else ""
            band = ""
            if banded:
                b = c.get("band")
                band = (f" {_fmt(fmt, b[0])} – {_fmt(fmt, b[1])} | {c.get('class') or ''} |" if b else " | |")
            lines.append(f"| {c['table']} | {c['row']}{note} | {paper} | {sim} | {c['kind']} |{band}")
        lines.append("")
    if sens:
        lines += ["## Assumptions: sensitivity of headlines", ""]
        for s in sens:
            lines += [f"### `{s['param']}` — {s['why']}", "",
                      f"Scenario `{s['scenario']}`" + (f", profile `{s['profile']}`" if s.get("profile") else "")
                      + (f", `{' '.join(s['sets'])}`" if s.get("sets") else "") +
                      f"; figure `sensitivity-{s['key']}.png`.", "",
                      "| " + s["param"] + " | " + " | ".join(c["label"] for c in s["curves"]) + " |",
                      "| --- |" + " --- |" * len(s["curves"])]
            xs = [p["x"] for p in s["curves"][0]["points"]]
            for i, x in enumerate(xs):
                cols = []
                for c in s["curves"]:
                    p = c["points"][i]
                    cols.append("—" if p["mean"] is None else f"{p['mean']:.3f} ± {p['sd']:.3f}")
                lines.append(f"| {x:g} | " + " | ".join(cols) + " |")
            lines.append("")
    return "\n".join(lines) + "\n"


