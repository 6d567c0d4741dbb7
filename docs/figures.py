"""Regenerate every image under docs/img/ and every number the docs quote, from runs made here.

    python docs/figures.py                 # everything (about ten minutes on 2 cores)
    python docs/figures.py --only plots    # one section: plots, backends, fit
    python docs/figures.py --check         # exit 1 if a doc or image would change

Numbers live between markers in the markdown, which this script rewrites:

    <!-- figures:NAME -->...<!-- /figures -->

Runs go to a fresh temporary folder (``--runs DIR`` keeps them, and reuses
completed seeds on the next call: only safe when the code has not changed).
Every run is seeded and the figures carry no dates, so a second call changes
nothing. The backends are the deterministic fakes: the numbers show the
simulator's mechanics and the fakes' calibration, not the papers' results.
"""
from __future__ import annotations

import argparse
import copy
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, Optional

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
IMG = DOCS / "img"
SC = ROOT / "scenarios"

MARK = re.compile(r"(<!-- figures:(?P<name>[\w-]+) -->)(?P<body>.*?)(<!-- /figures -->)", re.S)


# ---------------------------------------------------------------------------
# runs


class Runs:
    """Runs made on demand (each once per call), in ``base``."""

    def __init__(self, base: Path, force: bool):
        self.base = base
        self.force = force
        self.done: dict[str, Path] = {}

    def get(self, key: str, scenario: Path, sets: tuple[str, ...] = (), smoke: bool = False) -> Path:
        if key not in self.done:
            import meshsim

            out = self.base / key
            print(f"  run {key}", file=sys.stderr, flush=True)
            sc = meshsim.load_scenario(scenario, list(sets), smoke=smoke)
            meshsim.run(sc, out=out, force=self.force)
            self.done[key] = out
        return self.done[key]


# ---------------------------------------------------------------------------
# sections: each returns {marker name: text} and writes its images


def plots_section(runs: Runs, img: Path) -> dict[str, str]:
    """docs/plots.md: every figure, and the phase and self-healing tables of the staggered run."""
    from meshsim import plots
    from meshsim.plots import report

    stag = runs.get("staggered-math", SC / "meshheal" / "staggered-math.yaml")
    s96 = runs.get("scale-96-sparse", SC / "meshheal" / "scale-96-sparse.yaml")
    s576 = runs.get("scale-576-smoke", SC / "meshheal" / "scale-576-sparse.yaml", smoke=True)
    sac = _sac_runs(runs)
    plots.render(stag, kind="timeline", agents=["A3", "A5"], out=img / "timeline.png")
    plots.render(stag, kind="detector", agents=["A5"], out=img / "detector.png")
    plots.render(stag, kind="phases", out=img / "phases.png")
    plots.render(s96, kind="heatmap", out=img / "heatmap.png")
    plots.render(stag, kind="topology", out=img / "topology.png")
    plots.render(s96, kind="topology", out=img / "topology-96.png")
    plots.render(s576, kind="topology", out=img / "topology-576.png")
    plots.render(list(sac.values()), kind="sac", out=img / "sac.png")
    tables = [t for t in (report.phase_table(stag), report.healing_table(stag)) if t is not None]
    return {"plots-tables": "\n\n```text\n" + "\n".join(t.to_markdown().rstrip("\n") for t in tables) + "\n```\n\n"}


_TOPOS = ("merg", "complete", "er")


def _sac_runs(runs: Runs) -> dict[tuple[str, str], Path]:
    return {(m, t): runs.get(f"{m}-{t}-7", SC / "sac" / f"{m}-{t}-7.yaml")
            for m in ("sac", "cpwbft") for t in _TOPOS}


def backends_section(runs: Runs, img: Path) -> dict[str, str]:
    """docs/backends.md: the default fake profile against its calibration targets
    (App. C.5), as `meshsim backends calibrate` prints them."""
    from meshsim.paper import calibration as cal

    print("  run calibration audit", file=sys.stderr, flush=True)
    m = cal.measure(ROOT / "backends" / "fake-default.yaml", ROOT / cal.AUDIT_SCENARIO, list(range(1, 21)))
    rows = ["| target (App. C.5) | paper | fake-default (20 seeds) | within |", "| --- | --- | --- | --- |"]
    for r in cal.rows(m):
        paper = f"{r['paper']:.3f}" + (f" ± {r['spread']:.3f}" if r["spread"] else "")
        ok = "yes" if r["within"] else "**no**"
        if r["within_spread"] is not None:
            ok += " (in the paper's spread)" if r["within_spread"] else " (outside the paper's spread)"
        rows.append(f"| {r['label']} | {paper} | {r['value']:.3f} ± {r['sd']:.3f} | {ok} |")
    tc = m["takeover_counts"]
    rows.append("")
    rows.append(f"Takeover of Finalize outputs, pooled over the 20 seeds: {tc.get('wrong_fixed', 0)} of "
                f"{tc.get('wrong_entering', 0)} wrong finals corrected ({tc.get('wrong_changed', 0)} changed), "
                f"{tc.get('right_broken', 0)} of {tc.get('right_entering', 0)} right finals broken; "
                f"{tc.get('contribute_final_correct', 0)} of {tc.get('contribute', 0)} tasks with a Contribute "
                f"Takeover ended correct.")
    rows += ["", "| count (App. C.5, five streams) | paper | fake-default, pooled over 20 seeds | per 5 seeds |",
             "| --- | --- | --- | --- |"]
    for c in cal.counts(m):
        rows.append(f"| {c['label']} | {c['paper']:g} | {c['pooled']} | {c['per5']:.1f} |")
    return {"backends-calibration": "\n\n" + "\n".join(rows) + "\n\n"}


_FIT_TYPES = {  # as tests/backends/test_fit.py: (strong, weak) accuracy per BBH type
    "object_counting": (0.95, 0.3), "multistep_arithmetic_two": (0.6, 0.05), "navigate": (0.85, 0.5),
    "geometric_shapes": (0.4, 0.2), "logical_deduction_three_objects": (0.75, 0.1),
    "date_understanding": (0.9, 0.6), "tracking_shuffled_objects_three_objects": (0.5, 0.25)}


def fit_section(runs: Runs, img: Path) -> dict[str, str]:
    """docs/backends.md: how close a direct fit (no calibration) comes over 20 draws."""
    import meshsim
    from meshsim.paper import fitcheck
    from meshsim.backends.fit import find_cassettes, fit_profile, load_entries, write_profile

    d = runs.base / "fit"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    truth = yaml.safe_load((ROOT / "backends" / "fake-default.yaml").read_text())
    truth.update(name="truth", graded=True)
    for role, k in (("strong", 0), ("weak", 1)):
        truth["models"][role]["skill_by_type"] = {"bbh": {t: v[k] for t, v in _FIT_TYPES.items()}}
    (d / "truth.yaml").write_text(yaml.safe_dump(truth, sort_keys=False))
    sets = ["seeds=1", "tasks.count=168", "phases=[{name: healthy, tasks: 84}, {name: degraded, tasks: 84}]",
            "events=[{at_task: 85, type: degrade, agents: [A3, A5]}]",
            f"backend={{kind: replay, mode: record, cassette: {d / 'truth.jsonl'}, "
            f"backend: {{kind: fake, profile: {d / 'truth.yaml'}}}}}"]
    print("  run fit", file=sys.stderr, flush=True)
    meshsim.run(meshsim.load_scenario(SC / "meshheal" / "persistent-bbh.yaml", sets), out=d / "run")
    prof, notes = fit_profile(load_entries(find_cassettes(d / "run")), name="fitted")
    write_profile(copy.deepcopy(prof), notes, d / "fitted.yaml")
    rows = fitcheck.compare(fitcheck.recorded_accuracy(d / "run"),
                            fitcheck.simulated_accuracy(d / "run", d / "fitted.yaml", 20))
    return {"fit-worst": f"{max(abs(r['diff']) for r in rows):.3f}"}


SECTIONS: dict[str, tuple[Callable[[Runs, Path], dict[str, str]], list[str]]] = {
    "plots": (plots_section, ["plots.md"]),
    "backends": (backends_section, ["backends.md"]),
    "fit": (fit_section, ["backends.md"]),
}


# ---------------------------------------------------------------------------
# markers


def fill(text: str, values: dict[str, str], where: str) -> str:
    """``text`` with the body of every marker named in ``values`` replaced."""
    seen = set()

    def sub(m: re.Match) -> str:
        name = m.group("name")
        if name not in values:
            return m.group(0)
        seen.add(name)
        return m.group(1) + values[name] + m.group(4)

    out = MARK.sub(sub, text)
    missing = set(values) - seen
    if missing:
        raise SystemExit(f"error: {where}: no marker <!-- figures:{sorted(missing)[0]} --> to fill")
    return out


def _same_image(a: Path, b: Path, tol: float = 2.0) -> bool:
    """Same picture: equal size and an RMS pixel difference under ``tol`` (0-255 scale).

    Byte equality is too strict across machines (font hinting, zlib builds);
    a changed number or curve moves far more than ``tol``.
    """
    if a.read_bytes() == b.read_bytes():
        return True
    import numpy as np
    from matplotlib import image

    x, y = image.imread(a), image.imread(b)
    if x.shape != y.shape:
        return False
    rms = float(np.sqrt(np.mean((x.astype(float) - y.astype(float)) ** 2))) * 255.0
    return rms < tol


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=sorted(SECTIONS), help="one section (repeatable)")
    ap.add_argument("--runs", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a doc or image would change")
    args = ap.parse_args(argv)
    sections = args.only or list(SECTIONS)
    tmp = tempfile.TemporaryDirectory(prefix="meshsim-docs-")
    base = args.runs or Path(tmp.name)
    runs = Runs(base / "runs", force=args.runs is None)
    img = base / "img" if args.check else IMG
    img.mkdir(parents=True, exist_ok=True)
    values: dict[str, dict[str, str]] = {}
    for name in sections:
        print(f"{name}:", file=sys.stderr, flush=True)
        fn, docs = SECTIONS[name]
        got = fn(runs, img)
        for doc in docs:
            values.setdefault(doc, {}).update(got)
    changed = []
    for doc, vals in values.items():
        path = DOCS / doc
        old = path.read_text()
        new = fill(old, vals, str(path))
        if new != old:
            changed.append(str(path.relative_to(ROOT)))
            if not args.check:
                path.write_text(new)
    if args.check:
        for p in sorted(img.glob("*.png")):
            if not (IMG / p.name).is_file() or not _same_image(IMG / p.name, p):
                changed.append(f"docs/img/{p.name}")
    for c in changed:
        print(("would change " if args.check else "updated ") + c)
    tmp.cleanup()
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
