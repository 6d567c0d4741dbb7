"""Assumption bands for ``meshsim reproduce`` (issue 17, item 4; docs/uncertainty.md).

A prediction row shows its seed sd (the ``± sd`` of the simulated mean) and,
when stored ``meshsim uncertainty`` studies of the same backend profile are
found, its **assumption band**: the row recomputed at each of ``N``
Latin-hypercube positions over the studies' top factors (the others at the
profile's values; the runs patched with ``factor_overrides``), the band being
the 5-95 % quantiles of the row's seed mean over the positions. Rows are then
classified against the paper (robust agreement, robust disagreement,
assumption-bound; :func:`meshsim.uncertainty.classify`).

Several studies (one per headline of a paper: MeshHeal's six-agent and
96-agent networks, SAC's CP-WBFT and MATH level-4 settings) rank different
factors first; position ``j`` joins the ``j``-th Latin-hypercube sample of each
study (a factor two studies share takes the first study's value). Each
study's samples are a Latin hypercube over its own top factors, drawn
independently, so the joined positions are one over the union. With one study
the positions are that study's own samples, so a row the study itself measured
gets the study's band (tests/studies/test_uncertainty.py).

Where the studies come from: ``--bands DIR`` (repeatable; every experiment is banded over all of them),
else, per reference study of :data:`STUDIES`, ``runs/uncertainty-<name>`` when that folder holds a finished
study, else the copy shipped with the package (``meshsim/data/studies/uncertainty-<name>``: its
``uncertainty.json``, ``samples.csv``, ``ranking.csv`` and ``bands.csv``; tests/benchmarks/reference_studies.sh
makes and refreshes them). Each reference study bands the experiments :data:`STUDY_EXPERIMENTS` gives it
(the others: the experiments no study names); an experiment whose reference studies are all missing keeps
its seed sd and says why. Which experiments get bands: every experiment whose runs' profiles
all declare every top factor (positions are by factor name, each profile
moving a factor over its own range: model pairs A and B are banded too; an
experiment's own profile patch is kept and wins over a factor on the same
number), except :data:`BAND_SKIP` (their runs cost
too much to repeat N times; docs/validation.md says how their rows are
classified). A band sample runs the first :data:`BAND_SEEDS` seeds of each row:
the band is over assumption positions at common seeds, the row's seed sd comes
from all its seeds.
"""
from __future__ import annotations

import dataclasses
import math
import re
import statistics
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .core import PREDICTION, ROOT, Experiment, run_specs

__all__ = ["STUDIES", "STUDY_EXPERIMENTS", "SHIPPED", "BAND_SKIP", "BAND_SEEDS", "QUICK_SAMPLES", "SAMPLES",
           "find_studies", "find_study_groups", "shipped_studies", "add_bands", "classify_row"]

#: the stored studies that give a paper's factors: (reference scenario, folder suffix); the default folder is
#: runs/uncertainty-<scenario name>[-<suffix>] (the suffix names a study run with --set overrides)
STUDIES: dict[str, tuple[tuple[str, str], ...]] = {
    "meshheal": (("scenarios/meshheal/persistent-math.yaml", ""), ("scenarios/meshheal/scale-96-sparse.yaml", "")),
    "sac": (("scenarios/sac/ablation-b2w1-cpwbft.yaml", ""), ("scenarios/sac/sac-merg-7.yaml", "math-l4"),
            # Tab. 5 / Tab. 6 (issue 34): their model pairs' factors rank first only on their own datasets
            ("scenarios/sac/aime-sac-7.yaml", ""), ("scenarios/sac/hmmt-cpwbft-7.yaml", ""),
            ("scenarios/sac/aime-cpwbft-7.yaml", ""), ("scenarios/sac/hmmt-sac-7.yaml", "")),
}
#: the experiments a reference study bands (by its folder name); a study not named here bands the experiments
#: no named study claims. Tab. 5 / Tab. 6's studies rank their own model pairs' factors, which the other
#: tables' runs do not call, and the older SAC studies rank gpt-4o-mini's and gpt-3.5-turbo's, which Tab. 5 /
#: Tab. 6 do not call: a band over another table's top factors would be falsely narrow.
STUDY_EXPERIMENTS: dict[str, tuple[str, ...]] = {
    f"uncertainty-{n}": ("tab5", "tab6") for n in ("aime-sac-7", "hmmt-cpwbft-7", "aime-cpwbft-7", "hmmt-sac-7")}
#: where the reference studies ship inside the package (importlib.resources; pyproject's data/**/*)
SHIPPED = "data/studies"
#: the files of a study folder that reproduce and the study's report read (no run folders)
SHIPPED_FILES = ("uncertainty.json", "samples.csv", "ranking.csv", "bands.csv")
#: experiments not recomputed at band samples: hundreds of agents (Tab. 2b), or five benchmarks x 300 queries
BAND_SKIP = {"meshheal": ("scaling",), "sac": ("tab3-cs",)}
#: seeds per row at each band sample
BAND_SEEDS = 3
SAMPLES, QUICK_SAMPLES = 20, 8


def _default_folder(scenario: str, suffix: str) -> Path:
    from ...scenario.model import load_scenario

    name = load_scenario(ROOT / scenario).name
    return Path("runs") / (f"uncertainty-{name}" + (f"-{suffix}" if suffix else ""))


def shipped_studies() -> Optional[Path]:
    """The folder of the reference studies shipped with the package, or None (a zipped install)."""
    from importlib import resources

    try:
        d = resources.files("meshsim") / SHIPPED
    except (ModuleNotFoundError, TypeError):
        return None
    return Path(str(d)) if isinstance(d, Path) and d.is_dir() else None


def _finished(d: Path) -> bool:
    from ...uncertainty import is_uncertainty_folder

    return is_uncertainty_folder(d) and (d / "samples.csv").is_file()


def _shown(d: Path) -> str:
    """A folder as the band note names it: a shipped study by its package path (the same on every machine)."""
    ship = shipped_studies()
    if ship is not None and d.parent == ship:
        return f"meshsim/{SHIPPED}/{d.name} (shipped)"
    return str(d)


def _locate(which: str) -> list[tuple[Path, Optional[Path]]]:
    """Each reference study of ``which``: (its default folder under runs/, the folder used or None). A
    finished local folder wins over the shipped copy."""
    ship = shipped_studies()
    out = []
    for scenario, suffix in STUDIES.get(which, ()):
        cand = _default_folder(scenario, suffix)
        use = cand if _finished(cand) else None
        if use is None and ship is not None and _finished(ship / cand.name):
            use = ship / cand.name
        out.append((cand, use))
    return out


def _how(located: Sequence[tuple[Path, Optional[Path]]]) -> str:
    """Which studies were used, local ones by path, shipped ones by name, and which are missing."""
    ship = shipped_studies()
    local = [str(u) for _, u in located if u is not None and (ship is None or u.parent != ship)]
    shipped = [u.name for _, u in located if u is not None and ship is not None and u.parent == ship]
    missing = [str(c) for c, u in located if u is None]
    return "; ".join(([", ".join(local) + " (local)"] if local else [])
                     + ([", ".join(shipped) + f" (shipped with meshsim, meshsim/{SHIPPED}/)"] if shipped else [])
                     + (["not found: " + ", ".join(missing)] if missing else []))


_MAKE = "tests/benchmarks/reference_studies.sh makes them (docs/validation.md, \"Assumption bands\")"


def find_studies(which: str, explicit: Sequence[Path] = ()) -> tuple[list[Path], str]:
    """(the stored studies' folders, how they were found and which are missing); no folder when none is."""
    from ...core.errors import InputError

    if explicit:
        for d in explicit:
            if not _finished(d):
                raise InputError("not a finished uncertainty folder (no uncertainty.json or samples.csv); make one "
                                 "with meshsim uncertainty", field="--bands", value=str(d))
        return list(explicit), "--bands " + ", ".join(str(d) for d in explicit)
    located = _locate(which)
    found = [u for _, u in located if u is not None]
    if not found:
        first = located[0][0] if located else Path("runs")
        scenario = STUDIES[which][0][0] if located else "SCENARIO"
        return [], (f"no stored uncertainty study at {first} nor shipped with meshsim: run `meshsim uncertainty "
                    f"{scenario}` first (or name one with --bands DIR; {_MAKE}); rows show the seed sd only")
    return found, "found " + _how(located)


def find_study_groups(which: str) -> list[dict[str, Any]]:
    """The reference studies of ``which`` grouped by the experiments they band (:data:`STUDY_EXPERIMENTS`):
    [{"experiments": keys or None (the rest), "folders": found, "how": how they were found, "missing": the
    default folders not found}], in :data:`STUDIES` order."""
    groups: dict[Optional[tuple[str, ...]], list[tuple[Path, Optional[Path]]]] = {}
    for cand, use in _locate(which):
        groups.setdefault(STUDY_EXPERIMENTS.get(cand.name), []).append((cand, use))
    return [{"experiments": k, "folders": [u for _, u in v if u is not None], "how": _how(v),
             "missing": [str(c) for c, u in v if u is None]} for k, v in groups.items()]


def find_study(which: str, explicit: Optional[Path] = None) -> tuple[Optional[Path], str]:
    """The first stored study (kept for callers that want one): (folder, how) or (None, why there is none)."""
    found, how = find_studies(which, [explicit] if explicit is not None else ())
    return (found[0] if found else None), how


_RANGE = re.compile(r"^\s*(-?[0-9.]+)\s*-\s*(-?[0-9.]+)\s*$")
_ABS = re.compile(r"^\s*\|d\|\s*<=\s*([0-9.]+)\s*$")


def classify_row(paper: Any, p5: float, p95: float, seed_sd: Optional[float]) -> str:
    """:func:`meshsim.uncertainty.classify` for a number; for the paper's ranges (``"0.803-0.818"``, the
    span of its reported values) and bounds (``"|d| <= 0.010"``): robust disagreement when the band misses
    the interval, robust agreement when the band lies inside it, assumption-bound otherwise; ``"no paper
    value"`` when the paper reports none."""
    from ...uncertainty import classify

    if isinstance(paper, (int, float)) and not isinstance(paper, bool):
        # a paper value equal to a band edge but for float rounding (SAC Tab. 6 IAA = 400/7 both ways) is inside
        tol = 1e-9 * max(1.0, abs(float(paper)))
        x = float(paper)
        x = p5 if abs(x - p5) <= tol else (p95 if abs(x - p95) <= tol else x)
        return classify(x, p5, p95, seed_sd)
    lo = hi = None
    if isinstance(paper, str):
        m, a = _RANGE.match(paper), _ABS.match(paper)
        if m:
            lo, hi = sorted((float(m.group(1)), float(m.group(2))))
        elif a:
            lo, hi = -float(a.group(1)), float(a.group(1))
    if lo is None or hi is None:
        return "no paper value"
    if p95 < lo or p5 > hi:
        return "robust disagreement"
    if lo <= p5 and p95 <= hi:
        return "robust agreement"
    return "assumption-bound"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def _spec_profile(s: Any) -> Optional[Path]:
    """The profile file a run uses (its own ``profile`` or its scenario's), or None when the scenario patches
    its profile in place (``backend.overrides``) or names none."""
    key = (s.scenario, s.profile)
    if key not in _PROFILE_OF:
        _PROFILE_OF[key] = _find_spec_profile(s)
    return _PROFILE_OF[key]


_PROFILE_OF: dict[tuple[str, Optional[str]], Optional[Path]] = {}


def _find_spec_profile(s: Any) -> Optional[Path]:
    from ...backends import find_profile
    from ...core.files import load_yaml

    data = load_yaml(ROOT / s.scenario, "scenario") or {}
    b = data.get("backend") or {}
    name = s.profile or b.get("profile")
    if not name or b.get("overrides"):
        return None
    try:
        return find_profile(str(name), (ROOT / s.scenario).parent)
    except Exception:
        return None


def _factors_for(exp: Experiment, top: Sequence[str]) -> Optional[dict[Path, list]]:
    """{profile file: its factors} for every run of ``exp`` when each of those profiles declares every
    factor in ``top`` (positions are by factor name; each profile moves a factor over its own range), else
    None: a band that cannot move a top factor would be falsely narrow."""
    from ...backends.provenance import assumption_factors, load_profile_data

    out: dict[Path, list] = {}
    for runs in exp.runs.values():
        for s in runs:
            p = _spec_profile(s)
            if p is None:
                return None
            p = p.resolve()
            if p not in out:
                try:
                    out[p] = assumption_factors(load_profile_data(p), str(p))
                except Exception:
                    return None
                if not set(top) <= {f.name for f in out[p]}:
                    return None
    return out


def study_samples(folder: Path, n: int) -> tuple[dict[str, Any], list[dict[str, float]], int]:
    """(the study's state, the first ``n`` Latin-hypercube positions {factor: u}, how many it holds)."""
    from ...uncertainty import SAMPLES as SAMPLES_CSV
    from ...uncertainty import read_csv, read_state

    state = read_state(folder)
    names = [f["name"] for f in state["factors"]]
    lhs = [r for r in read_csv(folder / SAMPLES_CSV) if r["stage"] == "lhs"]
    pos = [{k: float(r[k]) for k in names if r.get(k) is not None} for r in lhs]
    return state, pos[:n], len(pos)


def _profile_of(state: dict[str, Any]) -> Path:
    profile = Path(state["profile"])
    if not profile.is_absolute() and not profile.is_file():
        profile = ROOT / profile
    if not profile.is_file():  # a shipped study names the profile as it was in the checkout that ran it
        from ...backends import find_profile

        try:
            profile = find_profile(profile.name, None)
        except Exception:
            pass
    return profile


def joint_positions(folders: Sequence[Path], n: int) -> tuple[list[dict[str, Any]], list[dict[str, float]], int]:
    """(each study's state, the ``n`` joined positions, how many every study holds); position ``j`` moves
    each study's top factors to that study's ``j``-th sample (first study first)."""
    from ...core.errors import InputError

    states, per = [], []
    available = None
    for d in folders:
        state, pos, avail = study_samples(d, n)
        if states and not _same_file(_profile_of(state), _profile_of(states[0])):
            raise InputError(f"its profile {state['profile']} is not {states[0]['profile']} of {folders[0]}",
                             field="--bands", value=str(d))
        top = set(state.get("top") or [])
        states.append(state)
        per.append([{k: v for k, v in p.items() if k in top} for p in pos])
        available = avail if available is None else min(available, avail)
    positions = []
    for j in range(min(len(p) for p in per) if per else 0):
        joined: dict[str, float] = {}
        for p in per:
            for k, v in p[j].items():
                joined.setdefault(k, v)
        positions.append(joined)
    return states, positions, available or 0


def add_bands(which: str, exps: list[Experiment], results: list[dict[str, Any]], out: Path, workers: int,
              folder: "Path | Sequence[Path]", n: int, progress: Optional[Callable[[str], None]] = None,
              groups: Optional[Sequence[dict[str, Any]]] = None) -> dict[str, Any]:
    """Recompute the band experiments at ``n`` joined Latin-hypercube positions of the stored studies and add
    ``band`` (p5, p95), ``band_n``, ``band_median`` and ``class`` to their prediction cells in ``results``
    (in place); an experiment without a band gets ``band_why``. With ``groups``
    (:func:`find_study_groups`), each experiment is banded over its own reference studies only (``folder``
    is then unused); without, every experiment over all of ``folder``."""
    grouped = groups is not None
    if groups is None:
        folders = [folder] if isinstance(folder, Path) else list(folder)
        groups = [{"experiments": None, "folders": folders, "how": "", "missing": []}]
    claimed = {k for g in groups for k in (g["experiments"] or ())}
    skip = BAND_SKIP.get(which, ())
    by_key = {r["key"]: r for r in results}
    why: dict[str, str] = {}
    done: list[dict[str, Any]] = []
    todo = []
    for g in groups:
        mine = [e for e in exps if e.key not in skip and
                (e.key in g["experiments"] if g["experiments"] is not None else e.key not in claimed)]
        if not mine:
            continue
        if not g["folders"]:
            for e in mine:
                why[e.key] = (f"its reference studies ({', '.join(g['missing'])}) are neither in runs/ nor shipped "
                              f"with meshsim; {_MAKE}")
            continue
        todo.append((g, mine))
    for g, mine in todo:
        done.append(_band_group(which, mine, by_key, out, workers, g, n, progress, why))
    for e in exps:
        if e.key in skip:
            why[e.key] = "too costly to repeat per sample"
    for k, w in why.items():
        if k in by_key:
            by_key[k]["band_why"] = w
    first = done[0] if done else {"study": "", "profile": "", "top": [], "samples": 0, "available": 0}
    info = {"study": "; ".join(g["study"] for g in done) or first["study"], "profile": first["profile"],
            "top": [t for g in done for t in g["top"]], "samples": first["samples"],
            "available": first["available"], "experiments": [k for g in done for k in g["experiments"]],
            "skipped": [e.key for e in exps if e.key in skip], "seeds": BAND_SEEDS,
            "unbanded": {k: w for k, w in why.items() if k not in skip}}
    if grouped:
        info["groups"] = done
    return info


def _band_group(which: str, exps: list[Experiment], by_key: dict[str, dict[str, Any]], out: Path, workers: int,
                group: dict[str, Any], n: int, progress: Optional[Callable[[str], None]],
                why: dict[str, str]) -> dict[str, Any]:
    """Band ``exps`` over one group of studies (their joined positions); the group's part of the note."""
    from ...backends.provenance import factor_overrides
    from ...observe.aggregate import quantile

    folders = group["folders"]
    states, positions, available = joint_positions(folders, n)
    top: list[str] = []
    for st in states:
        top += [t for t in (st.get("top") or []) if t not in top]
    chosen, factors_of = [], {}
    for e in exps:
        f = _factors_for(e, top)
        if f is not None:
            chosen.append(e)
            factors_of[e.key] = f
        else:
            why[e.key] = "its runs' profiles do not declare every top factor of its reference studies"
    info = {"study": ", ".join(_shown(d) for d in folders), "how": group["how"],
            "profile": str(states[0]["profile"]), "top": top, "samples": len(positions), "available": available,
            "experiments": [e.key for e in chosen]}
    for i, exp in enumerate(chosen):
        res = by_key.get(exp.key)
        if res is None or not any(c["kind"] == PREDICTION for c in res["cells"]):
            continue
        per_pos = []
        for pos in positions:
            over = {p: factor_overrides(f, pos) for p, f in factors_of[exp.key].items()}
            runs = {}
            for label, specs in exp.runs.items():
                runs[label] = [dataclasses.replace(s, patch=tuple(sorted(
                    {**over[_spec_profile(s).resolve()], **dict(s.patch)}.items()))) for s in specs[:BAND_SEEDS]]
            per_pos.append(runs)
        got = run_specs([s for runs in per_pos for specs in runs.values() for s in specs], out, workers)
        if progress is not None:
            progress(f"bands {i + 1}/{len(chosen)}: {exp.key} at {len(positions)} samples")
        # a row is (table, row, k-th of that label): two settings may print the same label (F = 0 and F = 3)
        means: dict[tuple[str, str, int], list[float]] = {}
        for runs in per_pos:
            seen: dict[tuple[str, str], int] = {}
            for c in exp.cells({label: [got[s] for s in specs] for label, specs in runs.items()}):
                k = seen[(c.table, c.row)] = seen.get((c.table, c.row), -1) + 1
                m, _sd = c.stats()
                if m is not None and math.isfinite(m):
                    means.setdefault((c.table, c.row, k), []).append(m)
        seen = {}
        for cell in res["cells"]:
            k = seen[(cell["table"], cell["row"])] = seen.get((cell["table"], cell["row"]), -1) + 1
            xs = means.get((cell["table"], cell["row"], k))
            if cell["kind"] != PREDICTION or not xs:
                continue
            p5, p95 = quantile(xs, 0.05), quantile(xs, 0.95)
            cell.update(band=[p5, p95], band_n=len(xs), band_median=statistics.median(xs),
                        **{"class": classify_row(cell["paper"], p5, p95, cell["sd"] if cell["n"] > 1 else None)})
    return info
