"""Run the papers' experiments and set every result beside the paper's (``meshsim reproduce``).

Each experiment is a set of runs (scenario file, ``--set`` overrides, seeds,
optionally a profile with one parameter moved) and a list of *cells*: one
number of a paper table, the simulated mean ± sample sd over seeds, and
whether it is a **calibration target** (a mechanism-level statistic the fake
was fitted to: App. C.5, per-model accuracy) or a **prediction** (everything
else: accuracy per phase, detection and reintegration, isolation counts,
BFTI, H-Majority). Predictions are reported as they come out.

Runs go to a process pool; each run's summary is cached under
``OUT/runs/<key>.json`` (the key hashes the scenario text, overrides, seed and
profile), so an interrupted reproduction resumes and a finished one is
re-rendered instantly. ``OUT/report.md`` and ``OUT/report.json`` hold the
tables; ``OUT/sensitivity-*.png`` the assumption curves (with the ``plot``
extra).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Optional

from ...core.errors import InputError
from .core import (Experiment, Sensitivity, plot_sensitivities, render_classes, render_markdown, run_experiments,
                   run_sensitivities)

__all__ = ["experiments", "sensitivities", "reproduce", "fill_docs"]


def experiments(which: str, seeds: "int | list[int]", quick: bool) -> list[Experiment]:
    if which == "meshheal":
        from .compare import compare_experiments
        from .meshheal import meshheal_experiments

        return meshheal_experiments(seeds, quick) + compare_experiments(seeds, quick)
    if which == "sac":
        from .sac import sac_experiments

        return sac_experiments(seeds, quick)
    raise InputError("choose 'meshheal' or 'sac'", field="WHICH", value=which)


def sensitivities(which: str) -> list[Sensitivity]:
    if which == "meshheal":
        from .compare import compare_sensitivities
        from .meshheal import meshheal_sensitivities

        return meshheal_sensitivities() + compare_sensitivities()
    from .sac import sac_sensitivities

    return sac_sensitivities()


def reproduce(which: str, out: Path, seeds: "int | list[int]" = 5, quick: bool = False, workers: Optional[int] = None,
              only: Optional[list[str]] = None, sensitivity: bool = True, sens_seeds: int = 3,
              progress: Optional[Callable[[str], None]] = None, bands: Optional[list[Path]] = None,
              band_samples: Optional[int] = None, use_bands: bool = True) -> dict[str, Any]:
    """Run the experiments (cached under ``out``); with ``use_bands``, add assumption bands from a stored
    uncertainty studies (``bands``, else the default folders: :mod:`.bands`), over ``band_samples`` of
    their joined Latin-hypercube samples (default 20, 8 with ``quick``)."""
    workers = workers or min(2, os.cpu_count() or 1)
    exps = experiments(which, seeds, quick)
    if only:
        unknown = sorted(set(only) - {e.key for e in exps})
        if unknown:
            raise InputError(f"unknown experiment; choose from {[e.key for e in exps]}", field="--only",
                             value=unknown[0])
        exps = [e for e in exps if e.key in only]
    folders: list[Path] = []
    groups = None
    if use_bands:  # a bad --bands folder is refused before any run starts
        from .bands import QUICK_SAMPLES, SAMPLES, add_bands, find_studies, find_study_groups

        folders, how = find_studies(which, bands or ())
        # the default studies band each experiment over its own reference studies (local, else shipped)
        groups = None if bands else find_study_groups(which)
    if progress is not None:  # the plan's size before any work (issue 29)
        n = sum(len(r) for e in exps for r in e.runs.values())
        progress(f"{len(exps)} experiments, {n} runs (cached runs are reused; bands and sensitivity curves add "
                 "their own)")
    t0 = time.perf_counter()
    results = run_experiments(exps, out, workers, progress)
    band_info: Optional[dict[str, Any]] = None
    if use_bands:
        if not folders:
            band_info = {"missing": how}
        else:
            n = band_samples or (QUICK_SAMPLES if quick else SAMPLES)
            band_info = add_bands(which, exps, results, out, workers, folders, n, progress, groups=groups)
            band_info.update(how=how, quick=quick and not band_samples)
    sens = run_sensitivities(sensitivities(which), out, sens_seeds, workers, progress) if sensitivity else []
    figs = plot_sensitivities(sens, out) if sens else []
    report = {"which": which, "seeds": seeds, "quick": quick, "wall": time.perf_counter() - t0,
              "experiments": results, "sensitivity": sens, "figures": [p.name for p in figs], "bands": band_info}
    title = {"meshheal": "MeshHeal (arXiv 2609.29015): paper vs simulated",
             "sac": "SAC and CP-WBFT (arXiv 2605.09076): paper vs simulated"}[which]
    (out / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True, default=str))
    (out / "report.md").write_text(render_markdown(title, results, sens, bands=band_info))
    if band_info and not band_info.get("missing"):
        (out / "classes.md").write_text(render_classes(results, band_info))
    return report


def fill_docs(path: Path, which: str, report_md: str, out_dir: Path) -> None:
    """Rewrite the ``<!-- reproduce:WHICH -->...<!-- /reproduce -->`` section of
    ``path`` with ``report_md`` (its title dropped, headings moved one level
    down) and copy the sensitivity figures next to it under ``img/``."""
    import re
    import shutil

    text = path.read_text()
    pat = re.compile(rf"(<!-- reproduce:{which} -->)(.*?)(<!-- /reproduce -->)", re.S)
    if not pat.search(text):
        raise InputError(f"no <!-- reproduce:{which} --> ... <!-- /reproduce --> section", file=str(path))
    body = "\n".join(("#" + line if line.startswith("#") else line) for line in report_md.splitlines()[1:])
    img = path.parent / "img"
    img.mkdir(exist_ok=True)
    for fig in sorted(out_dir.glob("sensitivity-*.png")):
        dest = img / f"{which}-{fig.name}"
        shutil.copyfile(fig, dest)
        body = body.replace(f"`{fig.name}`", f"![{fig.stem}](img/{dest.name})")
    path.write_text(pat.sub(lambda m: m.group(1) + "\n" + body.strip() + "\n" + m.group(3), text))
