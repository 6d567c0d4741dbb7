"""The SAC paper's experiments (arXiv 2605.09076) for ``meshsim reproduce sac``.

The settings and the paper's values are :data:`meshsim.paper.validation.sac.SETTINGS`
(Tab. 1, 3, 5, 6, 7, 8 and the swaying adversary with F = 0 and F = 3); the
assumption sweeps are its :data:`~meshsim.paper.validation.sac.ASSUMPTIONS`. The
initial accuracy of each agent group (W/S IAA) is call-level and was
calibrated (``backends/sac-default.yaml``); everything else is a prediction.
"""
from __future__ import annotations

from collections import OrderedDict

from .core import PREDICTION, TARGET, Cell, Experiment, Sensitivity, _seeds, _vals

__all__ = ["sac_experiments", "sac_sensitivities"]

_LABELS = (("iaa", "IAA", PREDICTION), ("faa", "FAA", PREDICTION), ("bfti", "BFTI", PREDICTION),
           ("ra", "RA", PREDICTION), ("ra_authors", "RA as the authors' code reports it", PREDICTION),
           ("h_majority", "H-Majority", PREDICTION), ("weak.iaa", "W IAA", TARGET), ("weak.faa", "W FAA", PREDICTION),
           ("strong.iaa", "S IAA", TARGET), ("strong.faa", "S FAA", PREDICTION))
_TOPO = {"merg": "MERG", "complete": "Complete", "er": "Erdős–Rényi", "pa": "Preferential"}
_EXPS = OrderedDict([("Tab. 3 MATH-500", "tab3-math"), ("Tab. 3 Commonsense (mean of 5)", "tab3-cs"),
                     ("Tab. 1 MATH level 4", "tab1-math"), ("Tab. 1 Commonsense170k", "tab1-cs"),
                     ("Tab. 5 AIME 2025", "tab5"), ("Tab. 6 HMMT-25", "tab6"),
                     ("Tab. 7", "tab7"), ("Tab. 8 n=9", "tab8"), ("Swaying adversary", "swaying")])


def _exp_key(table: str) -> str:
    for prefix, key in _EXPS.items():
        if table.startswith(prefix):
            return key
    return table.lower().replace(" ", "-")


def sac_experiments(seeds: "int | list[int]" = 5, quick: bool = False) -> list[Experiment]:
    from ..validation.sac import SETTINGS

    groups: "OrderedDict[str, list]" = OrderedDict()
    for st in SETTINGS:
        if quick and st.table.startswith("Tab. 3 Commonsense"):
            continue  # five benchmarks x 300 queries: the expensive part
        groups.setdefault(_exp_key(st.table), []).append(st)
    exps = []
    for key, settings in groups.items():
        runs = {}
        for st in settings:
            for k, (name, sets) in enumerate(st.runs):
                runs[f"{st.id}#{k}"] = _seeds(f"scenarios/sac/{name}.yaml", seeds, tuple(sets) + ("output.trace=none",))

        def cells(by: dict[str, list[dict]], settings=settings) -> list[Cell]:
            out = []
            for st in settings:
                parts = [by[f"{st.id}#{k}"] for k in range(len(st.runs))]
                label = (st.table.split(" ", 2)[-1] + ", " if st.table.startswith("Tab. 7") else "") + \
                    f"{'SAC' if st.method == 'sac' else 'CP-WBFT'}, {_TOPO.get(st.topology, st.topology)}"
                for path, name, kind in _LABELS:
                    # several runs (the commonsense mean): per seed, the mean over the benchmarks
                    per = [_vals(p, path, 100.0) for p in parts]
                    vals = [None if any(v is None for v in col) else sum(col) / len(col) for col in zip(*per)]
                    if all(v is None for v in vals):
                        continue
                    paper = None if not st.paper else ("n/r" if path == "ra_authors" else st.paper.get(path))
                    out.append(Cell(st.table.split(" ")[0] + " " + st.table.split(" ")[1], f"{label}: {name} (%)",
                                    paper, kind=kind, values=vals, fmt="{:+.1f}" if path == "bfti" else "{:.1f}",
                                    note=st.note))
            return out

        title = settings[0].table if key != "tab7" else "Tab. 7 Byzantine-to-weak composition (30 MATH level-4)"
        exps.append(Experiment(key, f"SAC paper {title}", runs, cells))
    return exps


def sac_sensitivities() -> list[Sensitivity]:
    from ..validation.sac import ASSUMPTIONS

    out = []
    for key, spec in ASSUMPTIONS.items():
        out.append(Sensitivity(
            key.replace("*", "all").replace(".", "-"), tuple(spec["paths"]), tuple(spec["values"]),
            # 200 queries per run (the sweeps' size in docs/sac.md): 5 values x 3 seeds stay affordable
            f"scenarios/sac/{spec['scenario']}.yaml",
            tuple(spec.get("sets", ())) + ("output.trace=none", "tasks.count=200"),
            (("bfti", "BFTI"), ("h_majority", "H-Majority")), spec["why"]))
    return out
