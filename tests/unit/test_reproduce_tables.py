"""``meshsim reproduce meshheal``'s experiments as data: each row of a paper table names its runs and metric."""
from __future__ import annotations

import pytest

from meshsim.paper.reproduce import meshheal as mh
from meshsim.paper.reproduce.meshheal import Row, table_cells


def _s(h, d, missed=0):
    return {"accuracy": {"by_phase": {"healthy": h, "degraded": d}}, "missed": missed}


BY = {"a": [_s(0.8, 0.7, 1), _s(0.9, None, 2)], "b": [_s(0.6, 0.5, 0), _s(0.7, 0.4, 1)]}


def test_rows_read_paths_pairs_and_combinations_per_seed():
    rows = (Row("T", "h", "a", "accuracy.by_phase.healthy", 0.81, 0.02),
            Row("T", "change", "a", "accuracy.by_phase.degraded - accuracy.by_phase.healthy"),
            Row("T", "a - b", "a - b", "accuracy.by_phase.healthy"),
            Row("T", "mean", "mean a b", "accuracy.by_phase.degraded"),
            Row("T", "sum", "sum a b", "missed", scale=10.0),
            Row("T", "fn", "b", lambda x: x["missed"] + 0.5))
    got = {c.row: c.values for c in table_cells(rows, BY)}
    assert got["h"] == [0.8, 0.9]
    assert got["change"] == [pytest.approx(-0.1), None]  # a seed without a value stays without one
    assert got["a - b"] == [pytest.approx(0.2), pytest.approx(0.2)]
    assert got["mean"] == [pytest.approx(0.6), None]
    assert got["sum"] == [10.0, 30.0]
    assert got["fn"] == [0.5, 1.5]
    first = table_cells(rows[:1], BY)[0]
    assert (first.table, first.paper, first.paper_sd) == ("T", 0.81, 0.02)


def test_closure_is_5_of_5_beside_five_seeds_and_all_otherwise():
    row = Row("Tab. 3b", "closure", "a", "missed", mh.ALL_5)
    assert table_cells((row,), BY)[0].paper == "all"
    assert table_cells((row,), {"a": BY["a"] * 2 + BY["a"][:1]})[0].paper == "5/5"


@pytest.mark.parametrize("quick", [False, True])
def test_every_row_reads_runs_its_experiment_has(quick):
    for exp in mh.meshheal_experiments(2, quick):
        if exp.key == "audit":
            continue
        by = {k: [_s(0.5, 0.5)] * len(v) for k, v in exp.runs.items()}
        table = {"persistent": mh.PERSISTENT, "staggered": mh.STAGGERED, "scaling": mh.SCALING,
                 "ablations": mh.ABLATIONS, "detectors": mh.DETECTORS}[exp.key]
        used = set().union(*(mh._groups(r.runs) for r in table))
        assert used <= set(mh.PERSISTENT_RUNS) | set(mh.STAGGERED_RUNS) | set(mh.SCALING_RUNS) \
            | set(mh.ABLATION_RUNS) | set(mh.DETECTOR_RUNS)
        assert mh._groups(" ".join(exp.runs)) <= used  # no run group left unread
        cells = exp.cells(by)
        assert len(cells) == len(table) - (7 if quick and exp.key == "scaling" else 0)


def test_compare_tables_give_a_cell_per_row_and_method_and_baselines_never_isolate():
    from meshsim.paper.reproduce import compare as cmp

    methods = ("meshheal", "raps")
    exps = {e.key: e for e in cmp.compare_experiments(2, quick=True, methods=methods)}
    assert list(exps) == ["compare", "compare-staggered"]  # --quick: no model pairs, no assumptions
    for exp, table in ((exps["compare"], cmp.PERSISTENT), (exps["compare-staggered"], cmp.STAGGERED)):
        by = {k: [_s(0.5, 0.4, 1)] * len(v) for k, v in exp.runs.items()}
        cells = exp.cells(by)
        assert len(cells) == len(table) * len(methods)
    cells = {c.row: c for c in exps["compare-staggered"].cells(by)}
    mh_delay, raps_delay = cells["MeshHeal: A5 detection delay (tasks)"], cells["RAPS: A5 detection delay (tasks)"]
    assert (mh_delay.paper, mh_delay.paper_sd) == (8.0, 5.2)
    assert (raps_delay.paper, raps_delay.empty) == (cmp.NEVER, cmp.NEVER)
    assert mh_delay.note == "isolated in 0 of 2 seeds"
    assert cells["RAPS: A3 closure (fraction of seeds)"].paper == "not established"
    assert cells["MeshHeal: agents isolated while healthy (of 6)"].paper == 0.0
    assert cells["RAPS: agents isolated while healthy (of 6)"].paper == cmp.NR
    persistent = {c.row: c for c in exps["compare"].cells({k: [_s(0.8, 0.7)] * 2 for k in exps["compare"].runs})}
    change = persistent["RAPS, mean of datasets: paired phase change"]
    assert (change.paper, change.paper_sd) == (-0.147, 0.045)
    assert change.values == [pytest.approx(-0.1)] * 2
