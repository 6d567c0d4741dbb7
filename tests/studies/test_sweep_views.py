"""Statistics per sweep point (summary.csv: intervals, paired differences to a
reference point on shared seeds) and the views of a sweep folder (--where,
--facet, parallel coordinates, the labelled trade-off, the report over every
axis), on sweep folders written here from known per-run values: the tables and
figures read only manifest.json and the runs' summary.json, so the expected
numbers are exact."""
from __future__ import annotations

import csv
import itertools
import json
import math
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from meshsim.cli import main
from meshsim.core.errors import InputError
from meshsim.sweep.manifest import FORMAT
from meshsim.sweep.results import point_rows, read_table, write_results
from meshsim.sweep.stats import interval, paired

ROOT = Path(__file__).resolve().parents[2]
A, B, W, M = "protocol.params.alpha", "protocol.params.beta", "protocol.params.window", "protocol.params.min_obs"


def _summary(fi: float | None, delay: float | None, missed: float = 0.0, acc: float = 0.7) -> dict:
    return {"detection": {"false_isolation_rate": fi, "delay_mean": delay, "missed_rate": missed},
            "accuracy": {"overall": acc}}


def make_sweep(folder: Path, grid: dict[str, list], seeds: list[int], value, base: dict | None = None,
               missing: set = frozenset(), failed: set = frozenset()) -> Path:
    """A sweep folder of ``grid`` x ``seeds`` whose run (values, seed) has summary ``value(values, seed)``."""
    axes = list(grid)
    points, runs = {}, []
    for i, combo in enumerate(itertools.product(*grid.values())):
        key = f"p-{i:012d}"
        vals = dict(zip(axes, combo))
        points[key] = vals
        for s in seeds:
            runs.append([key, s])
            d = folder / "runs" / key / f"seed-{s}"
            d.mkdir(parents=True)
            if (combo, s) in failed:
                (d / "error.txt").write_text("boom\n")
            elif (combo, s) not in missing:
                (d / "summary.json").write_text(json.dumps(value(vals, s)))
    base = base if base is not None else {"name": "synthetic", "protocol": {"name": "meshheal", "params": {
        "alpha": 1.2, "beta": 2.0, "window": 8, "min_obs": 2}}}
    man = {"format": FORMAT, "meshsim": "test", "scenario": {"name": "synthetic", "source": str(folder / "none.yaml")},
           "base": base, "axes": axes, "output": "summary", "points": points, "skipped": [], "runs": runs}
    (folder / "manifest.json").write_text(json.dumps(man))
    return folder


def _noise(*key) -> float:
    """A deterministic pseudo-random number in [-1, 1) per key."""
    import hashlib

    h = hashlib.sha256(json.dumps(key, default=str).encode()).digest()
    return int.from_bytes(h[:4], "big") / 2 ** 31 - 1.0


def window_effect(vals: dict, s: int) -> dict:
    """The issue's case: window 16 cuts false isolations 5x and adds delay; alpha does little."""
    w, b = vals[W], vals[B]
    fi = (0.5 if w == 4 else 0.1) * (1.5 if b == 2 else 1.0) + 0.02 * _noise(vals, s, "fi")
    delay = 100 + (150 if w == 16 else 0) + 30 * (b - 2) + 5 * _noise(vals, s, "d")
    return _summary(round(fi, 6), round(delay, 4), 0.0, 0.7 + 0.01 * _noise(vals, s))


@pytest.fixture(scope="module")
def grid3(tmp_path_factory):
    folder = tmp_path_factory.mktemp("views") / "g3"
    return make_sweep(folder, {A: [1.0, 1.6], B: [2.0, 3.0], W: [4, 16]}, [1, 2, 3], window_effect)


def _csv(path: Path) -> list[dict]:
    with open(path) as fh:
        return list(csv.DictReader(fh))


def _f(text: str) -> float | None:
    return float(text) if text != "" else None


# ----------------------------------------------------------------------------------- summary.csv


values_st = st.one_of(st.none(), st.floats(-1e3, 1e3, allow_nan=False), st.booleans())


@settings(max_examples=60, deadline=None)
@given(data=st.data(), npoints=st.integers(1, 4), nseeds=st.integers(1, 5))
def test_summary_intervals_and_differences_match_sweep_stats(data, npoints, nseeds):
    """Every point's se/lo/hi is sweep.stats.interval of its finished runs' values,
    and diff* is sweep.stats.paired against its reference on the seeds both hold."""
    seeds = list(range(1, nseeds + 1))
    rows = []
    for p in range(npoints):
        for s in seeds:
            status = data.draw(st.sampled_from(["ok", "ok", "ok", "failed", "missing"]))
            r = {A: float(p), "seed": s, "point": f"p{p}", "status": status, "error": None}
            if status == "ok":
                r["m"] = data.draw(values_st)
            rows.append(r)
    ref = data.draw(st.integers(0, npoints - 1))
    cols, out = point_rows([A, "seed", "point", "status", "error", "m"], rows, [A], {A: float(ref)})
    assert cols[-9:] == ["se", "lo", "hi", "ref", "diff", "diff_se", "diff_lo", "diff_hi", "diff_n"]
    per = {f"p{p}": {r["seed"]: float(r["m"]) for r in rows if r["point"] == f"p{p}" and r["status"] == "ok"
                     and r.get("m") is not None} for p in range(npoints)}
    for row in out:
        ci = interval(list(per[row["point"]].values()))
        assert row["n"] == ci.n
        for k in ("se", "lo", "hi"):
            want = getattr(ci, k)
            assert (row[k] is None) if math.isnan(want) else row[k] == pytest.approx(want, rel=1e-12, abs=1e-12)
        assert row["ref"] == f"p{ref}"
        d = paired(per[row["point"]], per[f"p{ref}"])
        assert row["diff_n"] == d.n == len(set(per[row["point"]]) & set(per[f"p{ref}"]))
        for k, want in (("diff", d.mean), ("diff_lo", d.lo), ("diff_hi", d.hi)):
            assert (row[k] is None) if math.isnan(want) else row[k] == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_paired_difference_uses_only_shared_seeds(tmp_path):
    # point alpha=1.6 misses seed 4 (not run) and the reference alpha=1.0 failed seed 1: seeds 2 and 3 are shared
    vals = {(1.0, 1): 10.0, (1.0, 2): 20.0, (1.0, 3): 30.0, (1.0, 4): 40.0,
            (1.6, 1): 1000.0, (1.6, 2): 21.0, (1.6, 3): 35.0, (1.6, 4): -999.0}
    folder = make_sweep(tmp_path / "s", {A: [1.0, 1.6]}, [1, 2, 3, 4],
                        lambda v, s: _summary(0.1, vals[(v[A], s)]), missing={((1.6,), 4)}, failed={((1.0,), 1)})
    write_results(folder, reference=["alpha=1.0"])
    rows = {r[A]: r for r in _csv(folder / "summary.csv") if r["metric"] == "detection.delay_mean"}
    ref_point = rows["1.0"]["point"]
    p = rows["1.6"]
    assert p["ref"] == ref_point and p["n"] == "3" and rows["1.0"]["n"] == "3"
    assert p["diff_n"] == "2" and float(p["diff"]) == pytest.approx(((21 - 20) + (35 - 30)) / 2)
    d = paired({2: 21.0, 3: 35.0}, {2: 20.0, 3: 30.0})
    assert float(p["diff_lo"]) == pytest.approx(d.lo) and float(p["diff_hi"]) == pytest.approx(d.hi)
    # the interval of the point itself: its three finished seeds
    ci = interval([1000.0, 21.0, 35.0])
    assert float(p["se"]) == pytest.approx(ci.se) and float(p["lo"]) == pytest.approx(ci.lo)
    # the reference compared with itself: zero difference on its own seeds
    assert rows["1.0"]["diff"] == "0.0" and rows["1.0"]["diff_n"] == "3"


def test_summary_csv_is_what_read_table_computes(grid3):
    write_results(grid3)
    cols, rows, _m = read_table(grid3, "points")
    text = _csv(grid3 / "summary.csv")
    assert list(text[0]) == cols and len(text) == len(rows)
    for a, b in zip(text, rows):
        for k in ("se", "lo", "hi", "diff", "diff_lo", "diff_hi"):
            assert _f(a[k]) == (None if b[k] is None else pytest.approx(b[k]))


def test_default_reference_is_the_scenarios_own_values_on_the_grid(grid3):
    """Base: alpha 1.2 (not a grid value), beta 2, window 8 (not a grid value): the
    reference fixes beta = 2 and each point keeps its own alpha and window."""
    _cols, rows, m = read_table(grid3, "points")
    by_point = {r["point"]: r for r in rows if r["metric"] == "detection.delay_mean"}
    for r in by_point.values():
        ref = by_point[r["ref"]]
        assert ref[B] == 2.0 and ref[A] == r[A] and ref[W] == r[W]
        if r[B] == 3.0:  # beta 3 adds 30 tasks of delay in every seed
            assert r["diff"] == pytest.approx(30, abs=12) and r["diff_n"] == 3
    # a full reference names one point for all
    _cols, rows, _m = read_table(grid3, "points", reference=["alpha=1.6,beta=3", "window=16"])
    assert len({r["ref"] for r in rows}) == 1


def test_no_reference_when_no_base_value_is_on_the_grid(tmp_path):
    folder = make_sweep(tmp_path / "s", {A: [1.0, 1.6]}, [1, 2], lambda v, s: _summary(0.1, 5.0 + s))
    write_results(folder)
    rows = _csv(folder / "summary.csv")
    assert {r["ref"] for r in rows} == {""} and {r["diff"] for r in rows} == {""}


@pytest.mark.parametrize("ref, needle", [("nosuch=1", "not a swept parameter"),
                                         ("alpha=7", "no point of the sweep has protocol.params.alpha = 7"),
                                         ("alpha", "expected PATH=VALUE")])
def test_a_bad_reference_is_one_line_exit_2(grid3, ref, needle):
    res = CliRunner().invoke(main, ["report", str(grid3), "--reference", ref, "-o", str(grid3 / "never.html")])
    assert res.exit_code == 2 and needle in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (grid3 / "never.html").exists()


def test_sweep_checks_its_reference_before_running(tmp_path):
    out = tmp_path / "never"
    res = CliRunner().invoke(main, ["sweep", str(ROOT / "scenarios" / "sweeps" / "window-min-obs.yaml"), "--smoke",
                                    "--out", str(out), "--reference", "window=5", "-q"])
    assert res.exit_code == 2 and "--reference" in res.stderr and "its values: 4, 8" in res.stderr
    assert not out.exists()


# ----------------------------------------------------------------------------------- views


def test_where_keeps_the_points_at_the_fixed_values(grid3):
    from meshsim.plots.sweeps import open_sweep

    sd = open_sweep(grid3, where=["window=16", "protocol.params.beta=3"])
    assert sd.fixed == {W: 16, B: 3.0}
    assert {(r[W], r[B]) for r in sd.rows} == {(16, 3.0)} and len(sd.rows) == 2 * 3
    assert open_sweep(grid3, where="window=16,beta=3").fixed == sd.fixed  # comma-separated works too
    with pytest.raises(InputError, match="no point of the sweep has protocol.params.window = 12"):
        open_sweep(grid3, where=["window=12"])


@pytest.mark.parametrize("args, needle", [(["--where", "windw=16"], "not a swept parameter"),
                                          (["--where", "window=5"], "its values: 4, 16"),
                                          (["--facet", "nosuch"], "not a swept parameter"),
                                          (["--kind", "heatmap", "--facet", "alpha", "--x", "alpha"],
                                           "--facet must be a parameter the figure does not already draw")])
def test_bad_views_are_one_line_exit_2(grid3, tmp_path, args, needle):
    pytest.importorskip("matplotlib")
    res = CliRunner().invoke(main, ["plot", str(grid3), *args, "-o", str(tmp_path / "x.png")])
    assert res.exit_code == 2, res.output
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.png").exists()


def test_heatmap_where_shows_the_slice_and_says_so(grid3):
    pytest.importorskip("matplotlib")
    from meshsim.plots.sweeps import heatmap, open_sweep

    sd = open_sweep(grid3)
    fig = heatmap(sd, "alpha", "beta", "false_isolation_rate", where=["window=16"])
    (ax,) = [a for a in fig.axes if a.images]
    grid = ax.images[0].get_array()
    for i, a in enumerate((1.0, 1.6)):
        for j, b in enumerate((2.0, 3.0)):
            xs = [window_effect({A: a, B: b, W: 16}, s)["detection"]["false_isolation_rate"] for s in (1, 2, 3)]
            assert grid[j, i] == pytest.approx(statistics.fmean(xs))
    assert "fixed: window=16" in fig._suptitle.get_text() and "nothing averaged" in fig._suptitle.get_text()
    # without --where the figure says what it averaged, and the cells are the average over window
    fig = heatmap(sd, "alpha", "beta", "false_isolation_rate")
    assert "averaged over: window (2 values)" in fig._suptitle.get_text()
    grid = [a for a in fig.axes if a.images][0].images[0].get_array()
    xs = [window_effect({A: 1.0, B: 2.0, W: w}, s)["detection"]["false_isolation_rate"] for w in (4, 16)
          for s in (1, 2, 3)]
    assert grid[0, 0] == pytest.approx(statistics.fmean(xs))


def test_facet_draws_one_panel_per_value(grid3, tmp_path):
    pytest.importorskip("matplotlib")
    from meshsim.plots.sweeps import heatmap, sensitivity, tradeoff

    fig = heatmap(grid3, "alpha", "beta", "delay_mean", facet="window")
    panels = [a for a in fig.axes if a.images]
    assert [a.get_title() for a in panels] == ["window = 4", "window = 16"]
    assert "averaged" not in fig._suptitle.get_text().replace("nothing averaged", "")
    # the window = 16 panel holds only window-16 points: 150 tasks more delay everywhere
    g4, g16 = (p.images[0].get_array() for p in panels)
    assert (g16 - g4).min() > 120
    fig = sensitivity(grid3, "alpha", "delay_mean", by="beta", facet="window")
    assert [a.get_title() for a in fig.axes if a.get_visible()] == ["window = 4", "window = 16"]
    fig = tradeoff(grid3, facet="beta")
    titles = [a.get_title() for a in fig.axes if a.get_title()]
    assert titles == ["beta = 2", "beta = 3"]
    res = CliRunner().invoke(main, ["plot", str(grid3), "--kind", "heatmap", "--facet", "window", "-o",
                                    str(tmp_path / "f.png")])
    assert res.exit_code == 0, res.output + res.stderr and (tmp_path / "f.png").stat().st_size > 5000


def test_sensitivity_without_x_has_a_panel_per_parameter(grid3):
    pytest.importorskip("matplotlib")
    from meshsim.plots.sweeps import sensitivity

    fig = sensitivity(grid3, None, "false_isolation_rate")
    assert [a.get_xlabel() for a in fig.axes if a.get_visible()] == ["alpha", "beta", "window"]


@pytest.mark.parametrize("kw", [dict(x=None), dict(x="alpha", by="beta"), dict(x="alpha", by="beta", facet="window"),
                                dict(x="alpha", facet="window")])
def test_sensitivity_legend_sits_below_the_panels_not_on_them(grid3, kw):
    """A small sweep fills its panels: a legend placed "best" inside one still covered the band."""
    pytest.importorskip("matplotlib")
    from meshsim.plots.sweeps import sensitivity

    metric = "delay_mean"
    fig = sensitivity(grid3, metric=metric, **kw)
    fig.draw_without_rendering()
    panels = [a for a in fig.axes if a.get_visible()]
    assert all(a.get_legend() is None for a in panels)
    (leg,) = fig.legends
    box = leg.get_window_extent()
    labels = [t.get_text() for t in leg.get_texts()]
    # with x and a facet, the one other parameter draws the lines (by defaults to beta)
    assert labels == ["beta=2", "beta=3"] if kw["x"] else len(labels) == 3
    assert all(box.y1 <= a.get_tightbbox().y0 + 1 for a in panels)  # below every panel and its tick labels
    assert box.x0 >= 0 and box.x1 <= fig.bbox.x1  # and inside the figure


def test_sensitivity_on_the_callers_axes_keeps_its_legend_there(grid3):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure
    from meshsim.plots.sweeps import sensitivity

    ax = Figure().add_subplot()
    sensitivity(grid3, "alpha", "delay_mean", by="beta", ax=ax)
    assert not ax.figure.legends and [t.get_text() for t in ax.get_legend().get_texts()] == ["beta=2", "beta=3"]
    # the caller's figure without constrained layout has no room below the panels: the legend stays inside
    fig = sensitivity(grid3, "alpha", "delay_mean", by="beta", fig=Figure())
    assert not fig.legends and fig.axes[0].get_legend() is not None


def test_parallel_kind_draws_a_line_per_point(grid3, tmp_path):
    pytest.importorskip("matplotlib")
    from meshsim.plots.sweeps import parallel

    fig = parallel(grid3, metrics=["delay_mean", "false_isolation_rate"], color="accuracy.overall")
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 5]  # 3 parameters + 2 metrics
    front = [ln for ln in lines if ln.get_color() == "black"]
    assert len(lines) - len(front) == 8 and front  # one coloured line per point, Pareto ones edged
    assert [t.get_text() for t in ax.get_xticklabels()] == ["alpha", "beta", "window", "delay_mean",
                                                            "false_isolation_rate"]
    res = CliRunner().invoke(main, ["plot", str(grid3), "--kind", "parallel", "--where", "beta=2", "-o",
                                    str(tmp_path / "p.png")])
    assert res.exit_code == 0, res.output + res.stderr
    assert (tmp_path / "p.png").stat().st_size > 5000


def test_tradeoff_labels_front_points_with_parameters_and_intervals(tmp_path):
    """Front: A (fi 0.1, delay 100), B (fi 0.5, delay 50) clearly apart, C beside A within
    the seed noise (crossing differences): C is on the front but not distinguishable from A."""
    pytest.importorskip("matplotlib")
    from meshsim.plots.sweeps import tradeoff, tradeoff_points, open_sweep

    base = {1.0: (0.1, 100.0), 2.0: (0.5, 50.0), 3.0: (0.11, 99.0), 4.0: (0.6, 120.0)}
    noise = {1: (0.05, 20.0), 2: (-0.05, -20.0), 3: (0.02, 10.0), 4: (-0.02, -10.0)}

    def val(v, s):
        fi, d = base[v[A]]
        nf, nd = noise[s] if v[A] != 3.0 else noise[5 - s]  # C's noise crosses A's: differences flip sign
        return _summary(fi + nf, d + nd)

    folder = make_sweep(tmp_path / "s", {A: [1.0, 2.0, 3.0, 4.0]}, [1, 2, 3, 4], val)
    pts = {p["values"][A]: p for p in tradeoff_points(open_sweep(folder))}
    assert not pts[4.0]["pareto"] and all(pts[a]["pareto"] for a in (1.0, 2.0, 3.0))
    assert [pts[a]["rank"] for a in (1.0, 3.0, 2.0)] == [1, 2, 3]
    assert pts[3.0]["distinct"] is False and pts[2.0]["distinct"] is True
    from meshsim.sweep.stats import proportion_interval

    ci = proportion_interval([0.1 + n[0] for n in noise.values()])  # a rate: Wilson (issue 32)
    assert pts[1.0]["fi_lo"] == pytest.approx(ci.lo) and pts[1.0]["fi_hi"] == pytest.approx(ci.hi)
    fig = tradeoff(folder)
    texts = [t.get_text() for a in fig.axes for t in a.texts]
    box = next(t for t in texts if t.startswith("Pareto front"))
    assert "≈ 2 alpha=3" in box and "  1 alpha=1" in box and "  3 alpha=2" in box
    # the Points table's interval, not clipped to the values observed across the sweep (issue 32)
    assert f"0.1 [{ci.lo:.3g}, {ci.hi:.3g}]" in box and ci.lo < 0.05
    assert "4" in texts  # the dominated point labelled with its parameter value


@pytest.mark.slow  # ~5 s; README's test command stays under 2 minutes
def test_report_covers_every_axis_with_intervals(tmp_path):
    pytest.importorskip("matplotlib")
    folder = make_sweep(tmp_path / "s", {A: [1.0, 1.6], B: [2.0, 3.0], W: [4, 16], M: [2, 5]}, [1, 2, 3],
                        window_effect)
    res = CliRunner().invoke(main, ["report", str(folder)])
    assert res.exit_code == 0, res.output + res.stderr
    text = (folder / "report.html").read_text()
    for a in ("alpha", "beta", "window", "min_obs"):
        assert f"<th>{a}</th>" in text  # the per-point table
    assert "Every parameter&#x27;s effect on detection.false_isolation_rate" in text
    assert "Parallel coordinates" in text and text.count("<img") == 6
    assert "Reference: beta=2, min_obs=2 (the scenario&#x27;s own values); alpha, window: each point&#x27;s own" \
        in text
    assert text.count("reference</small>") == 4 * 4  # 4 reference points (beta 2, min_obs 2) x 4 metrics
    import re

    # beta 3 against its reference (beta 2, same alpha and window, min_obs 2) adds 30 +- 10 tasks of delay in
    # every seed: a difference whose interval excludes 0, in red, on all 8 beta-3 points
    assert len(re.findall(r"<b>Δ (2[0-9]|3[0-9])(\.\d+)? \[", text)) == 8
    from meshsim.plots.sweeps import sensitivity

    fig = sensitivity(folder, None, "false_isolation_rate")
    assert [a.get_xlabel() for a in fig.axes if a.get_visible()] == ["alpha", "beta", "window", "min_obs"]
    # --where and --facet reach the report
    res = CliRunner().invoke(main, ["report", str(folder), "--where", "window=16", "--facet", "beta", "-o",
                                    str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output + res.stderr
    text = (tmp_path / "r.html").read_text()
    assert "sweep at window=16" in text
    assert text.count("<tr>") - 1 == 8  # the 8 points at window 16
