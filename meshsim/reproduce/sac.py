"""The SAC paper's experiments for ``meshsim reproduce sac`` (arXiv 2605.09076).

Paper values are the tables' as printed (percent). Everything here is a
*prediction* except the initial accuracies of each agent group (IAA, W/S IAA),
which are call-level and were calibrated (``backends/sac-default.yaml``).
"""
from __future__ import annotations

from typing import Optional

from .core import PREDICTION, TARGET, Cell, Experiment, Sensitivity, _seeds, _vals

__all__ = ["sac_experiments", "sac_sensitivities", "PAPER"]

S = "scenarios/sac"
TOPOS = (("merg", "MERG"), ("complete", "Complete"), ("er", "Erdős–Rényi"))

#: (method, topology) -> (IAA, FAA, BFTI, RA, H-Majority, W IAA, W FAA, S IAA, S FAA), percent
PAPER: dict[str, dict[tuple[str, str], tuple]] = {
    "Tab. 3 (MATH-500, Qwen3-4B / Qwen2.5-1.5B)": {
        ("cpwbft", "merg"): (56.5, 53.7, -2.8, 50.0, 50.0, 43, 60, 69, 55),
        ("cpwbft", "complete"): (56.6, 45.5, -11.1, 47.2, 47.2, 44, 47, 68, 47),
        ("cpwbft", "er"): (57.2, 47.9, -9.3, 49.6, 49.6, 45, 50, 69, 50),
        ("sac", "merg"): (56.1, 62.6, 6.5, 72.4, 72.6, 43, 60, 68, 71),
        ("sac", "complete"): (55.7, 62.1, 6.4, 74.4, 74.6, 42, 55, 68, 72),
        ("sac", "er"): (56.5, 61.9, 5.4, 72.6, 73.2, 44, 58, 68, 71),
    },
}
#: Tab. 7 (MATH level 4, 30 problems; 4 strong + b adversarial + w weak): (b, w) -> method/topology -> (IAA, FAA, BFTI, RA, HM)
TAB7: dict[tuple[int, int], dict[tuple[str, str], tuple]] = {
    (1, 2): {("cpwbft", "merg"): (55.2, 44.8, -10.4, 30.0, 40.0), ("cpwbft", "complete"): (56.2, 31.4, -24.8, 33.3, 36.7),
             ("cpwbft", "er"): (56.2, 40.0, -16.2, 43.3, 46.7), ("sac", "merg"): (54.8, 62.4, 7.6, 90.0, 96.7),
             ("sac", "complete"): (55.7, 59.5, 3.8, 83.3, 86.7), ("sac", "er"): (54.3, 60.5, 6.2, 80.0, 86.7)},
    (2, 1): {("cpwbft", "merg"): (48.1, 31.4, -16.7, 40.0, 43.3), ("cpwbft", "complete"): (51.9, 30.5, -21.4, 43.3, 43.3),
             ("cpwbft", "er"): (52.9, 31.4, -21.5, 40.0, 40.0), ("sac", "merg"): (49.5, 52.9, 3.4, 83.3, 83.3),
             ("sac", "complete"): (51.0, 54.8, 3.8, 86.7, 83.3), ("sac", "er"): (51.4, 57.1, 5.7, 93.3, 90.0)},
    (3, 0): {("cpwbft", "merg"): (44.3, 29.0, -15.3, 50.0, 50.0), ("cpwbft", "complete"): (49.0, 34.3, -14.7, 60.0, 60.0),
             ("cpwbft", "er"): (48.1, 29.5, -18.6, 50.0, 53.3), ("sac", "merg"): (47.1, 48.1, 1.0, 86.7, 83.3),
             ("sac", "complete"): (47.6, 52.4, 4.8, 93.3, 93.3), ("sac", "er"): (46.7, 47.1, 0.4, 83.3, 86.7)},
}
#: Tab. 8 (n = 9: 6 strong, 2 weak, 1 adversarial): method/topology -> (IAA, FAA, BFTI, RA, HM)
TAB8: dict[tuple[str, str], tuple] = {
    ("cpwbft", "merg"): (63.7, 37.0, -26.7, 20.0, 23.3), ("cpwbft", "complete"): (61.9, 29.6, -32.3, 33.3, 33.3),
    ("cpwbft", "pa"): (64.8, 44.1, -20.7, 26.7, 26.7), ("cpwbft", "er"): (63.0, 50.4, -12.6, 36.7, 43.3),
    ("sac", "merg"): (62.6, 64.8, 2.2, 90.0, 90.0), ("sac", "complete"): (60.4, 62.2, 1.8, 86.7, 86.7),
    ("sac", "pa"): (62.6, 65.6, 3.0, 90.0, 90.0), ("sac", "er"): (62.6, 60.4, -2.2, 86.7, 86.7),
}

_METRICS = (("iaa", "IAA", TARGET), ("faa", "FAA", PREDICTION), ("bfti", "BFTI", PREDICTION),
            ("ra", "RA", PREDICTION), ("h_majority", "H-Majority", PREDICTION))


def _cells(table: str, label: str, sums: list[dict], paper: Optional[tuple], groups: bool = True) -> list[Cell]:
    cells = []
    for i, (path, name, kind) in enumerate(_METRICS):
        cells.append(Cell(table, f"{label}: {name} (%)", paper[i] if paper else None, kind=kind,
                          values=_vals(sums, path, 100.0), fmt="{:.1f}" if name != "BFTI" else "{:+.1f}"))
    if groups and paper and len(paper) > 5:
        for j, (g, name) in enumerate((("weak", "W"), ("strong", "S"))):
            cells.append(Cell(table, f"{label}: {name} IAA (%)", paper[5 + 2 * j], kind=TARGET,
                              values=_vals(sums, f"{g}.iaa", 100.0), fmt="{:.1f}"))
            cells.append(Cell(table, f"{label}: {name} FAA (%)", paper[6 + 2 * j],
                              values=_vals(sums, f"{g}.faa", 100.0), fmt="{:.1f}"))
    return cells


def sac_experiments(seeds: int = 5, quick: bool = False) -> list[Experiment]:
    exps = []
    t3 = "Tab. 3 (MATH-500, Qwen3-4B / Qwen2.5-1.5B)"
    runs = {f"{m}-{t}": _seeds(f"{S}/{m}-{t}-7.yaml", seeds, ("output.trace=none",))
            for m in ("sac", "cpwbft") for t, _ in TOPOS}

    def tab3(by: dict[str, list[dict]]) -> list[Cell]:
        cells = []
        for m, mname in (("sac", "SAC"), ("cpwbft", "CP-WBFT")):
            for t, tname in TOPOS:
                cells += _cells("Tab. 3", f"{mname}, {tname}", by[f"{m}-{t}"], PAPER[t3][(m, t)])
        return cells

    exps.append(Experiment("tab3", "7 agents, 4 strong / 2 weak / 1 adversarial, F = 3 (SAC Tab. 3)", runs, tab3))

    ab = {f"{m}-b{b}w{w}": _seeds(f"{S}/ablation-b{b}w{w}-{m}.yaml", seeds, ("output.trace=none",))
          for m in ("sac", "cpwbft") for (b, w) in TAB7}

    def tab7(by: dict[str, list[dict]]) -> list[Cell]:
        cells = []
        for (b, w) in TAB7:
            for m, mname in (("sac", "SAC"), ("cpwbft", "CP-WBFT")):
                cells += _cells("Tab. 7", f"b={b}, w={w}, {mname}, MERG", by[f"{m}-b{b}w{w}"],
                                TAB7[(b, w)][(m, "merg")], groups=False)
        return cells

    exps.append(Experiment("tab7", "Byzantine-to-weak composition on a MERG (SAC Tab. 7)", ab, tab7))

    sc = {f"{m}-{t}": _seeds(f"{S}/scaling-9-{m}-{t}.yaml", seeds, ("output.trace=none",))
          for m in ("sac", "cpwbft") for t in ("merg", "complete", "pa", "er")}

    def tab8(by: dict[str, list[dict]]) -> list[Cell]:
        cells = []
        for m, mname in (("sac", "SAC"), ("cpwbft", "CP-WBFT")):
            for t, tname in (("merg", "MERG"), ("complete", "Complete"), ("pa", "Preferential"), ("er", "Erdős–Rényi")):
                cells += _cells("Tab. 8", f"n=9, {mname}, {tname}", by[f"{m}-{t}"], TAB8[(m, t)], groups=False)
        return cells

    exps.append(Experiment("tab8", "Larger network: n = 9, 6 strong / 2 weak / 1 adversarial (SAC Tab. 8)", sc, tab8))
    return exps


def sac_sensitivities() -> list[Sensitivity]:
    return []
