"""Assumption bands for ``meshsim reproduce`` (issue 17, item 4; docs/uncertainty.md).

A prediction row shows its seed sd (the ``± sd`` of the simulated mean) and,
when a stored ``meshsim uncertainty`` study of the same backend profile is
found, its **assumption band**: the row recomputed at each of the first ``N``
Latin-hypercube samples of that study (its top factors moved, the others at
the profile's values; the runs patched with the same ``factor_overrides``),
the band being the 5-95 % quantiles of the row's seed mean over the samples.
Rows are then classified against the paper (robust agreement, robust
disagreement, assumption-bound; :func:`meshsim.uncertainty.classify`).

Where the study comes from: ``--bands DIR``, else ``runs/uncertainty-<name>``
for the paper's reference scenario (:data:`STUDIES`). Which experiments get
bands: those of :data:`BAND_EXPERIMENTS` whose runs all use the study's
profile unpatched (the others keep their seed sd only).
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path
from typing import Any, Callable, Optional

from .core import PREDICTION, ROOT, Experiment, run_specs

__all__ = ["STUDIES", "BAND_EXPERIMENTS", "QUICK_SAMPLES", "SAMPLES", "find_study", "add_bands"]

#: the scenario whose stored study provides the factors, per paper
STUDIES = {"meshheal": "scenarios/meshheal/persistent-math.yaml", "sac": "scenarios/sac/ablation-b2w1-cpwbft.yaml"}
#: experiments recomputed at every band sample (the affordable ones: a band costs N times their runs)
BAND_EXPERIMENTS = {"meshheal": ("persistent",), "sac": ("tab1-math", "tab7")}
SAMPLES, QUICK_SAMPLES = 20, 8


def find_study(which: str, explicit: Optional[Path] = None) -> tuple[Optional[Path], str]:
    """(folder, how it was found) of the stored study, or (None, why there is none)."""
    from ..errors import InputError
    from ..uncertainty import is_uncertainty_folder

    if explicit is not None:
        if not is_uncertainty_folder(explicit):
            raise InputError("not an uncertainty folder (no uncertainty.json); make one with meshsim uncertainty",
                             field="--bands", value=str(explicit))
        return explicit, f"--bands {explicit}"
    from ..scenario import load_scenario

    name = load_scenario(ROOT / STUDIES[which]).name
    cand = Path("runs") / f"uncertainty-{name}"
    if is_uncertainty_folder(cand) and (cand / "samples.csv").is_file():
        return cand, f"found at {cand}"
    return None, (f"no stored uncertainty study at {cand}: run `meshsim uncertainty {STUDIES[which]}` first (or "
                  "name one with --bands DIR); rows show the seed sd only")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def _eligible(exp: Experiment, profile: Path) -> bool:
    import yaml

    from ..backends import find_profile

    for runs in exp.runs.values():
        for s in runs:
            if s.patch or s.profile:
                return False
            data = yaml.safe_load((ROOT / s.scenario).read_text()) or {}
            b = data.get("backend") or {}
            if not b.get("profile") or b.get("overrides"):
                return False
            try:
                p = find_profile(str(b["profile"]), (ROOT / s.scenario).parent)
            except Exception:
                return False
            if not _same_file(p, profile):
                return False
    return True


def study_samples(folder: Path, n: int) -> tuple[dict[str, Any], list[dict[str, float]], int]:
    """(the study's state, the first ``n`` Latin-hypercube positions {factor: u}, how many it holds)."""
    from ..uncertainty import SAMPLES as SAMPLES_CSV
    from ..uncertainty import read_csv, read_state

    state = read_state(folder)
    names = [f["name"] for f in state["factors"]]
    lhs = [r for r in read_csv(folder / SAMPLES_CSV) if r["stage"] == "lhs"]
    pos = [{k: float(r[k]) for k in names if r.get(k) is not None} for r in lhs]
    return state, pos[:n], len(pos)


def add_bands(which: str, exps: list[Experiment], results: list[dict[str, Any]], out: Path, workers: int,
              folder: Path, n: int, progress: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    """Recompute the band experiments at the study's first ``n`` LHS samples and add ``band`` (p5, p95),
    ``band_n`` and ``class`` to their prediction cells in ``results`` (in place)."""
    from ..backends.provenance import assumption_factors, factor_overrides, load_profile_data
    from ..metrics import quantile
    from ..uncertainty import classify

    state, positions, available = study_samples(folder, n)
    profile = Path(state["profile"])
    if not profile.is_absolute() and not profile.is_file():
        profile = ROOT / profile
    factors = assumption_factors(load_profile_data(profile), str(profile))
    chosen = [e for e in exps if e.key in BAND_EXPERIMENTS.get(which, ()) and _eligible(e, profile)]
    info = {"study": str(folder), "profile": str(state["profile"]), "top": state.get("top") or [],
            "samples": len(positions), "available": available, "experiments": [e.key for e in chosen]}
    by_key = {r["key"]: r for r in results}
    for exp in chosen:
        means: dict[tuple[str, str], list[float]] = {}
        for j, pos in enumerate(positions):
            patch = tuple(sorted(factor_overrides(factors, pos).items()))
            runs = {label: [dataclasses.replace(s, patch=patch) for s in specs] for label, specs in exp.runs.items()}
            got = run_specs([s for specs in runs.values() for s in specs], out, workers)
            if progress is not None:
                progress(f"{exp.key}: band sample {j + 1}/{len(positions)}")
            for c in exp.cells({label: [got[s] for s in specs] for label, specs in runs.items()}):
                m, _sd = c.stats()
                if m is not None and math.isfinite(m):
                    means.setdefault((c.table, c.row), []).append(m)
        res = by_key.get(exp.key)
        if res is None:
            continue
        for cell in res["cells"]:
            xs = means.get((cell["table"], cell["row"]))
            if cell["kind"] != PREDICTION or not xs:
                continue
            p5, p95 = quantile(xs, 0.05), quantile(xs, 0.95)
            paper = cell["paper"] if isinstance(cell["paper"], (int, float)) and not isinstance(cell["paper"], bool) \
                else None
            cell.update(band=[p5, p95], band_n=len(xs), band_median=statistics.median(xs),
                        **{"class": classify(paper, p5, p95, cell["sd"] if cell["n"] > 1 else None)})
    return info
