"""Figures from any folder (issue 32, item 4): a sweep's run folders (output level
summary / records), one seed of a multi-seed scenario, sweep figures that go
stale when the sweep grows, intervals of proportions, long lists in large-run
reports, the topology legend and topology events on the timelines.

The real runs here are the six-agent smoke scenario (a second or two each)."""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
os.environ.setdefault("MPLBACKEND", "Agg")

from tests.helpers import invoke  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STAGGERED = ROOT / "scenarios" / "meshheal" / "staggered-math.yaml"


def one_line(res) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    return lines[0]


def listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    """A one-point, one-seed sweep of the smoke scenario at the default output level (summary)."""
    out = tmp_path_factory.mktemp("figs") / "sw"
    res = invoke("sweep", STAGGERED, "--smoke", "--grid", "protocol.params.beta=2.5", "--seeds", "1",
                 "--out", out, "--workers", "1", "--yes", "-q")
    assert res.exit_code == 0, res.output
    return out


def _point(sweep: Path) -> Path:
    (point,) = sorted((sweep / "runs").iterdir())
    return point


# ------------------------------------------------------------------ a sweep's run folders


@pytest.mark.parametrize("args,need", [((), "timeline needs level 'full'"),
                                       (("--kind", "heatmap"), "heatmap needs level 'records'"),
                                       (("--kind", "detector"), "needs level 'full'")])
def test_plot_of_a_summary_level_run_names_the_output_level_needed(sweep_dir, args, need):
    """Never a silent fallback to the topology figure: exit 2, one line naming the level and --rerun."""
    seed = _point(sweep_dir) / "seed-1"
    before = listing(seed)
    res = invoke("plot", seed, *args)
    assert res.exit_code == 2
    line = one_line(res)
    assert "output level 'summary'" in line and need in line and "--rerun" in line, line
    assert listing(seed) == before  # a refusal writes nothing


def test_report_of_a_sweep_point_names_the_output_level_needed(sweep_dir):
    res = invoke("report", _point(sweep_dir))
    assert res.exit_code == 2
    line = one_line(res)
    assert "output level 'summary'" in line and "report" in line and "--rerun" in line, line
    assert "partial" not in line


def test_explicit_topology_of_a_summary_level_run_still_draws(sweep_dir, tmp_path):
    res = invoke("plot", _point(sweep_dir) / "seed-1", "--kind", "topology", "-o", tmp_path / "t.png")
    assert res.exit_code == 0, res.output
    assert (tmp_path / "t.png").stat().st_size > 2000


def _no_png(monkeypatch):
    """The report's figures are built but not rasterised (the report's HTML is what these tests read)."""
    from meshsim.plots import report

    monkeypatch.setattr(report, "_img", lambda fig: '<img alt="figure" src="data:image/png;base64,AA==">')


def test_rerun_writes_only_its_record_tables_and_lists_them(sweep_dir, tmp_path, monkeypatch):
    import shutil

    _no_png(monkeypatch)

    point = tmp_path / "point"
    shutil.copytree(_point(sweep_dir), point)
    before = {s: listing(point / s) for s in ("seed-1",)}
    res = invoke("report", point, "--rerun")
    assert res.exit_code == 0, res.output
    for s in ("seed-1",):
        now = listing(point / s)
        for name, data in before[s].items():  # summary, scenario, timing: untouched
            assert now[name] == data, name
        new = set(now) - set(before[s]) - {".meshsim.lock"}
        own = json.loads(now[".meshsim-files.json"])["files"]
        assert sorted(new - {".meshsim-files.json"}) == own
        assert set(own) == {"events.jsonl.gz", "tasks.jsonl.gz", "states.jsonl.gz", "reviews.jsonl.gz"}
    text = (point / "report.html").read_text()
    assert "Fig. C1" in text and "<img" in text and "not drawn" not in text
    # the folder now holds full records: plotting needs no rerun
    res = invoke("plot", point / "seed-1", "-o", tmp_path / "tl.png")
    assert res.exit_code == 0, res.output
    from meshsim.plots import open_run
    from meshsim.plots.healing import topology_events

    assert topology_events(open_run(point).first) == []  # degrade / recover only: no topology marks


def test_rerun_refuses_a_table_it_did_not_write(sweep_dir, tmp_path):
    import shutil

    seed = tmp_path / "seed-1"
    shutil.copytree(_point(sweep_dir) / "seed-1", seed)
    (seed / "events.jsonl").write_text("my notes\n")
    before = listing(seed)
    res = invoke("plot", seed, "--rerun")
    assert res.exit_code == 2
    assert "events.jsonl" in one_line(res) and "not written by meshsim" in one_line(res)
    after = listing(seed)
    after.pop(".meshsim.lock", None)
    assert after == before


def test_rerun_refuses_when_it_does_not_reproduce_the_summary(sweep_dir, tmp_path):
    import shutil

    seed = tmp_path / "seed-1"
    shutil.copytree(_point(sweep_dir) / "seed-1", seed)
    summary = json.loads((seed / "summary.json").read_text())
    summary["tasks"] += 1
    (seed / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    before = listing(seed)
    res = invoke("plot", seed, "--rerun")
    assert res.exit_code == 2
    assert "did not reproduce summary.json" in one_line(res)
    after = listing(seed)
    after.pop(".meshsim.lock", None)
    assert after == before


def test_rerun_takes_a_run_folder_not_the_sweep(sweep_dir):
    for cmd in ("plot", "report"):
        res = invoke(cmd, sweep_dir, "--rerun")
        assert res.exit_code == 2 and "--rerun takes a run folder" in one_line(res)


# ------------------------------------------------------------------ one seed of a multi-seed scenario


def test_report_on_one_seed_of_a_multi_seed_scenario(tmp_path, monkeypatch):
    """`meshsim run --seed 2` of a 3-seed scenario leaves seed-2/ and no aggregate.json: the report
    is written (not refused as partial) and says which seed it covers."""
    out = tmp_path / "ms"
    res = invoke("run", STAGGERED, "--smoke", "--set", "seeds=3", "--seed", "2", "-q", "-o", out)
    assert res.exit_code == 0, res.output
    assert (out / "seed-2").is_dir() and not (out / "aggregate.json").exists()
    _no_png(monkeypatch)
    res = invoke("report", out)
    assert res.exit_code == 0, res.stderr
    text = (out / "report.html").read_text()
    assert "seed 2 is its one finished seed" in text and "no aggregate.json" in text
    # an unfinished seed beside it is named, the finished one reported
    (out / "seed-3").mkdir()
    (out / "seed-3" / "scenario.resolved.yaml").write_text((out / "seed-2" / "scenario.resolved.yaml").read_text())
    from meshsim.plots import open_run
    from meshsim.plots.report import _seeds_note

    rs = open_run(out)
    assert rs.seeds == [2] and "unfinished: seed 3" in _seeds_note(rs)
    res = invoke("plot", out, "--seed", "3")
    assert res.exit_code == 2 and "no seed 3" in one_line(res)


# ------------------------------------------------------------------ intervals of proportions


from hypothesis import given, settings, strategies as st  # noqa: E402

from meshsim.sweep.stats import interval, is_proportion, metric_interval, proportion_interval  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=8))
def test_proportion_interval_stays_in_0_1_and_holds_the_mean(xs):
    iv = proportion_interval(xs)
    assert 0.0 <= iv.lo <= iv.mean + 1e-12 and iv.mean - 1e-12 <= iv.hi <= 1.0, iv
    assert iv.n == len(xs)


def test_proportion_interval_near_0_and_1_stays_inside_where_t_does_not():
    near0, near1 = [0.0, 0.0, 0.02], [1.0, 0.97, 1.0]
    assert interval(near0).lo < 0.0 and interval(near1).hi > 1.0  # the t-interval leaves [0, 1]
    for xs in (near0, near1, [0.35, 0.78]):  # two seeds: t gives about -2.2 ... 3.3
        iv = proportion_interval(xs)
        assert 0.0 <= iv.lo < iv.mean < iv.hi <= 1.0
    # far from 0 and 1, with little seed noise, it is the t-interval
    xs = [0.52, 0.55, 0.5, 0.53, 0.51]
    t, w = interval(xs), proportion_interval(xs)
    assert w.lo == pytest.approx(t.lo, abs=2e-3) and w.hi == pytest.approx(t.hi, abs=2e-3)
    # one seed: none; identical seeds and no counts: zero width, as the t-interval (printed as
    # "(n=2, all equal)", never as an interval: test_seeds_that_agree_...)
    assert math.isnan(proportion_interval([0.4]).lo)
    assert (proportion_interval([0.0, 0.0]).lo, proportion_interval([0.0, 0.0]).hi) == (0.0, 0.0)


def test_which_metrics_are_proportions():
    for m in ("accuracy.overall", "accuracy.by_phase.degraded", "detection.false_isolation_rate", "iaa", "faa"):
        assert is_proportion(m), m
    for m in ("detection.delay_mean", "bfti", "tokens_per_task", "detection.false_isolations"):
        assert not is_proportion(m), m
    assert metric_interval("detection.delay_mean", [1.0, 5.0]).lo < 0  # a t-interval, as before


def test_summary_csv_gives_proportions_wilson_and_other_means_t(tmp_path):
    import csv

    from tests.studies.test_sweep_views import A, _summary, make_sweep

    from meshsim.sweep.results import write_results

    accs = {1: 0.35, 2: 0.78}
    folder = make_sweep(tmp_path / "s", {A: [1.0]}, [1, 2], lambda v, s: _summary(0.0, 10.0 * s, 0.0, accs[s]))
    write_results(folder, json.loads((folder / "manifest.json").read_text()))
    rows = {r["metric"]: r for r in csv.DictReader(open(folder / "summary.csv"))}
    acc = rows["accuracy.overall"]
    assert 0.0 <= float(acc["lo"]) < float(acc["mean"]) < float(acc["hi"]) <= 1.0
    assert float(acc["lo"]) == pytest.approx(proportion_interval(list(accs.values())).lo)
    d = rows["detection.delay_mean"]
    assert float(d["lo"]) == pytest.approx(interval([10.0, 20.0]).lo) and float(d["lo"]) < 0


def test_a_rate_with_counts_gets_the_pooled_wilson_interval_never_of_zero_width(tmp_path):
    """Two seeds that agree (1 of 6 agents each) gave 0.167 [0.167, 0.167]: certainty from n = 2.
    With the counts in the rows, the interval also spans the Wilson interval of 2 of 12."""
    import csv

    from tests.studies.test_sweep_views import A, make_sweep

    from meshsim.plots.sweeps import open_sweep
    from meshsim.plots.sweeps.data import _ci, cells
    from meshsim.sweep.results import write_results
    from meshsim.sweep.stats import pooled_proportion_interval, rate_counts

    def summary(v, s):
        return {"detection": {"false_isolation_rate": 1 / 6, "false_isolations": 1, "ever_healthy_agents": 6,
                              "delay_mean": 12.0, "missed_rate": 0.0, "episodes": 2},
                "accuracy": {"overall": 0.7}}

    folder = make_sweep(tmp_path / "s", {A: [1.0]}, [1, 2], summary)
    write_results(folder, json.loads((folder / "manifest.json").read_text()))
    rows = {r["metric"]: r for r in csv.DictReader(open(folder / "summary.csv"))}
    fi = rows["detection.false_isolation_rate"]
    wilson = pooled_proportion_interval([(1, 6), (1, 6)])
    assert float(fi["lo"]) == pytest.approx(wilson.lo) and float(fi["hi"]) == pytest.approx(wilson.hi)
    assert 0.0 < float(fi["lo"]) < 1 / 6 < float(fi["hi"]) < 1.0
    # 0 of 2 episodes missed on both seeds: still an interval, [0, 0.49]
    missed = rows["detection.missed_rate"]
    assert float(missed["lo"]) == 0.0 and float(missed["hi"]) == pytest.approx(pooled_proportion_interval([(0, 4)]).hi)
    assert float(missed["hi"]) > 0.3
    # the report's table and the figures read the same cells
    c = cells(open_sweep(folder), "detection.false_isolation_rate", [A])[(1.0,)]
    assert (c.lo, c.hi) == pytest.approx((wilson.lo, wilson.hi))
    # a mean of per-seed values with no spread and no counts: said so, not an interval
    d = cells(open_sweep(folder), "detection.delay_mean", [A])[(1.0,)]
    assert _ci(d) == "12 (n=2, all equal)"
    # counts that do not give the rate (no whole numerator), or are missing: no pooled interval
    assert rate_counts("detection.false_isolation_rate", [{"detection.false_isolation_rate": 0.3,
                                                          "detection.ever_healthy_agents": 6}]) is None
    assert rate_counts("detection.false_isolation_rate", [{"detection.false_isolation_rate": 0.5}]) is None
    assert rate_counts("detection.delay_mean", [{"detection.delay_mean": 3.0}]) is None


def test_tradeoff_box_quotes_the_points_tables_interval_and_bars_are_cut_at_the_axes(tmp_path):
    """The figure's "95 % interval" is the Points table's (summary.csv's), not one clipped to the range
    observed across the sweep; a bar that runs past the axes ends in an open arrowhead and the
    title says so."""
    from tests.studies.test_sweep_views import A, _summary, make_sweep

    from meshsim.plots.sweeps import open_sweep, tradeoff
    from meshsim.plots.sweeps.data import _ci, _in_range, cells
    from meshsim.plots.sweeps.report import write_sweep_report

    fis = {1: 0.1, 2: 0.9}  # two seeds far apart: an interval spanning most of [0, 1]
    folder = make_sweep(tmp_path / "s", {A: [1.0, 2.0]}, [1, 2],
                        lambda v, s: _summary(fis[s] if v[A] == 1.0 else 0.5 + 0.01 * s, 10.0 * s + 40 * v[A]))
    c = _in_range(cells(open_sweep(folder), "detection.false_isolation_rate", [A])[(1.0,)],
                  "detection.false_isolation_rate")
    fig = tradeoff(folder)
    ax = fig.axes[0]
    box = next(t.get_text() for t in ax.texts if t.get_text().startswith("Pareto front"))
    table = _ci(c)
    assert table in box, (table, box)
    x0, x1 = ax.get_xlim()
    assert c.lo < x0 or c.hi > x1  # the interval runs past the view ...
    cuts = [ln for ln in ax.lines if ln.get_gid() == "interval-cut"]
    assert cuts and all(ln.get_marker() in "<>^v" for ln in cuts)  # ... and its cut ends say so
    title = fig._suptitle.get_text() if fig._suptitle is not None else ax.get_title()
    assert "as in the Points table" in title and "clipped to the axes" in title
    assert "observed values" not in title
    page = write_sweep_report(folder).read_text()
    assert table in page  # the same words in the Points table


def test_sensitivity_band_is_the_points_interval_and_says_what_it_is(tmp_path):
    from tests.studies.test_sweep_views import A, _summary, make_sweep

    from meshsim.plots.sweeps import open_sweep, sensitivity
    from meshsim.plots.sweeps.data import _in_range, cells

    fis = {1.0: (0.1, 0.9), 2.0: (0.748, 0.757)}
    folder = make_sweep(tmp_path / "s", {A: [1.0, 2.0]}, [1, 2],
                        lambda v, s: _summary(fis[v[A]][s - 1], 10.0 * s))
    ax = sensitivity(folder, metric="detection.false_isolation_rate").axes[0]
    band = next(col for col in ax.collections if col.get_label().startswith("band: "))
    assert "over the point's seeds (as in the Points table)" in band.get_label()
    ys = band.get_paths()[0].vertices[:, 1]
    cs = cells(open_sweep(folder), "detection.false_isolation_rate", [A])
    for k in ((1.0,), (2.0,)):
        c = _in_range(cs[k], "detection.false_isolation_rate")
        # each edge is the point's own interval, not bounded by other points' seeds (0.1 ... 0.9)
        assert any(abs(y - c.lo) < 1e-9 for y in ys) and any(abs(y - c.hi) < 1e-9 for y in ys)
    c2 = _in_range(cs[(2.0,)], "detection.false_isolation_rate")
    assert c2.hi - c2.lo < 0.2  # not widened to other points' seeds either
    # averaged over another parameter, the band is that average's interval, and its legend says so
    from tests.studies.test_sweep_views import B, W

    three = make_sweep(tmp_path / "three", {A: [1.0, 2.0], B: [3.0, 4.0], W: [8, 9]}, [1, 2],
                       lambda v, s: _summary(fis[v[A]][s - 1], 10.0 * s + v[B]))
    ax = sensitivity(three, x=A, metric="detection.false_isolation_rate").axes[0]
    labels = [col.get_label() for col in ax.collections if col.get_label().startswith("band: ")]
    assert labels == ["band: 95 % interval over seeds of the average over the other parameters, not any one point's"]


def test_tradeoff_error_bars_are_capped_and_end_inside_the_axes(tmp_path):
    from tests.studies.test_sweep_views import A, _summary, make_sweep

    from meshsim.plots.sweeps import tradeoff

    noise = {1: (0.05, 20.0), 2: (-0.05, -20.0), 3: (0.02, 10.0)}
    base = {1.0: (0.1, 100.0), 2.0: (0.5, 50.0), 3.0: (0.02, 300.0), 4.0: (0.6, 120.0)}
    folder = make_sweep(tmp_path / "s", {A: list(base)}, [1, 2, 3],
                        lambda v, s: _summary(max(0.0, base[v[A]][0] + noise[s][0]), base[v[A]][1] + noise[s][1]))
    ax = tradeoff(folder).axes[0]
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    caps = [ln for ln in ax.lines if isinstance(ln, Line2D) and ln.get_marker() in ("|", "_")]
    assert len(caps) >= 2 * 2 * len(base)  # two ends of two bars per point
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    for coll in ax.collections:
        if isinstance(coll, LineCollection):
            for seg in coll.get_segments():
                for x, y in seg:
                    assert x0 <= x <= x1 and y0 <= y <= y1
    for ln in caps:
        for x, y in zip(ln.get_xdata(), ln.get_ydata()):
            assert x0 <= x <= x1 and y0 <= y <= y1


# ------------------------------------------------------------------ large-run reports stay short


def _many_agents(folder: Path, n_agents: int = 288, n_tasks: int = 120) -> Path:
    """A synthetic single-seed MeshHeal folder with ``n_agents`` agents, a third degraded and
    ~150 isolated at the end (the 288-agent report's shape), records only."""
    import yaml

    import meshsim
    from meshsim.io.records import write_records

    sc = meshsim.load_scenario(ROOT / "scenarios" / "meshheal" / "persistent-math.yaml", [
        f"agents.replicas={n_agents // 6}", f"network.topology={{kind: regular, n: {n_agents}, d: 6}}",
        f"tasks.count={n_tasks}", f"phases=[{{name: healthy, tasks: 20}}, {{name: degraded, tasks: {n_tasks - 20}}}]",
        "events=[]"])
    data = sc.resolved()
    data["seeds"] = 1
    folder.mkdir(parents=True)
    (folder / "scenario.resolved.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    agents = [f"A{i}" for i in range(1, n_agents + 1)]
    degraded = agents[2::3]
    isolated = agents[1::2][:150]
    states, reviews, info = [], [], {}
    for j, a in enumerate(degraded):
        info[a] = {"degraded_at": 21, "recovered_at": None, "isolated_at": 25 + j % 7, "detection_delay": 4 + j % 7,
                   "closure": True, "reintegrated_at": None, "reintegration_delay": None}
    for a in sorted(set(isolated) | set(degraded), key=lambda x: int(x[1:])):
        states.append({"agent": a, "task": 25, "t": 0.0, "old": "normal", "new": "isolated",
                       "degraded": a in info})
    for k in range(1, n_tasks + 1):
        for m in range(2):
            a = agents[(k * 7 + m * 101) % n_agents]
            deg = a in info and k >= 21
            reviews.append({"task": k, "type": "algebra", "agent": a, "probe": False, "degraded": deg,
                            "q": 0.1 if deg else 0.9, "detector": []})
    write_records(folder, "states.jsonl", states, "jsonl")
    write_records(folder, "reviews.jsonl", reviews, "jsonl")
    write_records(folder, "tasks.jsonl", [{"index": k, "phase": "healthy" if k <= 20 else "degraded",
                                            "correct": True, "calls": 10, "tokens": 40000}
                                           for k in range(1, n_tasks + 1)], "jsonl")
    (folder / "summary.json").write_text(json.dumps({
        "scenario": data["name"], "seed": 1, "tasks": n_tasks, "agents": info, "isolated_at_end": isolated,
        "accuracy": {"overall": 0.8, "by_phase": {"healthy": 0.85, "degraded": 0.79}},
        "tokens_per_task": 40000.0, "calls_per_task": 10.0, "detection": {"false_isolations": 75}}))
    return folder


def page_height_proxy(text: str) -> tuple[int, int]:
    """(visible table rows, characters of visible text) before the report's first figure:
    folded <details> bodies and inline images do not count."""
    head = text.split("<img", 1)[0]
    head = re.sub(r"<details>.*?</details>", "", head, flags=re.S)
    visible = re.sub(r"<[^>]+>", "", re.sub(r"<(style|title)>.*?</\1>", "", head, flags=re.S))
    return head.count("<tr"), len(visible)


def test_large_run_report_puts_figures_first_and_folds_long_lists(tmp_path, monkeypatch):
    """The 288-agent report listed ~150 names in one cell and a row per degraded agent above the
    figures (~4,500 px): now the figures come after the summary, and long lists and tables fold."""
    from meshsim.plots import report

    _no_png(monkeypatch)
    folder = _many_agents(tmp_path / "big")
    text = report.build_report(folder)
    rows, chars = page_height_proxy(text)
    assert rows <= 20 and chars <= 1500, (rows, chars)  # before: 108 rows, 4,104 characters
    names = json.loads((folder / "summary.json").read_text())["isolated_at_end"]
    assert f"… and {len(names) - 8} more" in text and ", ".join(names) in text  # folded, not lost
    # the per-agent table: the first rows shown, the rest folded, every agent still there
    tab = text[text.index("Self-healing: detection"):]
    assert "more rows (of 96" in tab
    assert all(f"<td>{a}</td>" in tab for a in ("A3", "A288"))
    assert text.index("<h2>Figures") < text.index("<h2>Tables")


def test_fold_list_keeps_short_lists_whole():
    from meshsim.plots.report import fold_list

    assert fold_list(["A1", "A2"]) == "A1, A2" and fold_list([]) == "none"
    long = fold_list([f"A{i}" for i in range(40)])
    assert long.startswith("<details><summary>A0, A1") and "and 32 more (40 in all)" in long and "A39" in long


# ------------------------------------------------------------------ topology legend


def test_legend_labels_never_read_the_same():
    from meshsim.plots.graph import legend_labels

    common = "abstract_reasoning, algebra, calculus, combinatorics, geometry, number_theory, "
    kinds = [common + "probability", common + "statistics", "strong", "weak"]
    labels = legend_labels(kinds)
    assert len(set(labels.values())) == len(kinds)
    assert labels["strong"] == "strong"
    assert "probability" in labels[kinds[0]] and "statistics" in labels[kinds[1]]
    assert all(len(line) <= 34 for v in labels.values() for line in v.splitlines())


def test_topology_legend_names_each_ability_set(tmp_path):
    import yaml

    from meshsim.plots import topology

    common = "abstract_reasoning, algebra, calculus, combinatorics, geometry, number_theory"
    roles = {f"A{i}": common + (", probability" if i % 2 else ", statistics") for i in range(1, 7)}
    (tmp_path / "summary.json").write_text(json.dumps({"scenario": "t", "seed": 1, "roles": roles}))
    (tmp_path / "scenario.resolved.yaml").write_text(yaml.safe_dump({
        "name": "t", "seed": 1, "seeds": 1, "network": {"topology": {"kind": "complete", "n": 6}},
        "protocol": {"name": "sac", "params": {"rounds": 6, "F": 1}}, "duration": 10}))
    fig = topology(tmp_path, color_by="role")
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(texts) == 2 and len(set(texts)) == 2
    assert any("probability" in t for t in texts) and any("statistics" in t for t in texts)


# ------------------------------------------------------------------ topology events on the timelines


def test_timeline_marks_link_and_topology_events(tmp_path):
    """link_down / link_up at a task, a timed change of every link, a removed link elsewhere: each
    is a line at its task on every panel, solid where it touches the panel's agent."""
    from meshsim.io.records import read_records
    from meshsim.plots import open_run, timeline
    from meshsim.plots.healing import topology_events

    out = tmp_path / "ev"
    res = invoke("run", STAGGERED, "--smoke", "-q", "-o", out, "--set",
                 "events=[{at_task: 43, type: degrade, agents: [A3]}, {at_task: 60, type: link_down, link: [A3, A1]},"
                 " {at_task: 90, type: link_up, link: [A3, A1]}, {at: 3000s, type: set_link, link: all, loss: 0.05},"
                 " {at_task: 150, type: remove_link, link: [A2, A4]}]")
    assert res.exit_code == 0, res.output
    rf = open_run(out).first
    events = topology_events(rf)
    assert [(e["event"], e["task"]) for e in events if e["event"] != "set_link"] == \
        [("link_down", 60), ("link_up", 90), ("remove_link", 150)]
    (timed,) = [e for e in events if e["event"] == "set_link"]
    tasks = read_records(out, "tasks.jsonl")
    assert max(t["index"] for t in tasks if t["start"] <= 3000.0) == timed["task"]
    fig = timeline(rf, agents=["A3", "A2"])
    for ax, agent in zip(fig.axes[:2], ["A3", "A2"]):
        lines = {ln.get_gid().split(":")[1]: ln for ln in ax.lines if (ln.get_gid() or "").startswith("topology:")}
        assert set(lines) == {"link_down", "link_up", "set_link", "remove_link"}
        assert lines["link_down"].get_xdata()[0] == 60
        own = {"link_down", "link_up", "set_link"} if agent == "A3" else {"set_link", "remove_link"}
        assert {k for k, ln in lines.items() if ln.get_linestyle() == "-"} == own, agent
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("topology event" in t for t in legend)


# ------------------------------------------------------------------ figures of a growing sweep


def test_extending_a_sweep_redraws_its_stale_figures(sweep_dir, tmp_path):
    import shutil

    from meshsim.plots.sweeps import FIGURES_STAMP, results_stamp, stale_figures

    sw = tmp_path / "sw"
    shutil.copytree(sweep_dir, sw)
    outside = tmp_path / "elsewhere.png"
    for args in (("--kind", "tradeoff"), ("--kind", "sensitivity", "-o", sw / "sens.png"),
                 ("--kind", "tradeoff", "-o", outside)):
        res = invoke("plot", sw, *args)
        assert res.exit_code == 0, res.output
    stamps = json.loads((sw / FIGURES_STAMP).read_text())["figures"]
    assert set(stamps) == {"tradeoff.png", "sens.png"}  # a figure outside the folder is not followed
    assert stamps["sens.png"]["args"]["kind"] == "sensitivity" and stamps["sens.png"]["runs"] == 1
    assert stale_figures(sw) == []
    before = {n: (sw / n).read_bytes() for n in ("tradeoff.png", "sens.png")}
    far = outside.read_bytes()
    # the same sweep with a second seed: the folder grows, its figures are redrawn at the end
    res = invoke("sweep", STAGGERED, "--smoke", "--grid", "protocol.params.beta=2.5", "--seeds", "1-2",
                 "--out", sw, "--workers", "1", "--yes", "-q")
    assert res.exit_code == 0, res.output
    for n in ("tradeoff.png", "sens.png"):
        assert f"redrew {sw / n} (drawn from 1 finished runs, the folder now holds 2)" in res.output
        assert (sw / n).read_bytes() != before[n]
    assert outside.read_bytes() == far
    stamps = json.loads((sw / FIGURES_STAMP).read_text())["figures"]
    assert {s["digest"] for s in stamps.values()} == {results_stamp(sw)["digest"]} and stale_figures(sw) == []
    # resuming with nothing new redraws nothing
    res = invoke("sweep", "--out", sw, "--workers", "1", "-q")
    assert res.exit_code == 0 and "redrew" not in res.output


def test_a_stale_figure_that_cannot_be_redrawn_is_named(sweep_dir, tmp_path):
    import shutil

    from meshsim.plots.sweeps import FIGURES_STAMP, redraw_stale

    sw = tmp_path / "sw"
    shutil.copytree(sweep_dir, sw)
    (sw / "mine.png").write_bytes(b"png")
    (sw / FIGURES_STAMP).write_text(json.dumps({"format": 1, "figures": {"mine.png": {
        "what": "plot", "digest": "0", "runs": 0, "args": {"kind": "heatmap", "x": "nosuch"}}}}))
    lines = []
    assert redraw_stale(sw, echo=lines.append) == []
    assert len(lines) == 1 and lines[0].startswith(f"stale: {sw / 'mine.png'} (drawn from 0 finished runs")
    assert "meshsim plot redraws it" in lines[0] and (sw / "mine.png").read_bytes() == b"png"


def test_phase_bars_keep_accuracy_error_bars_in_0_1(tmp_path):
    """± std of an accuracy near 1 (1.0 and 0.94 over two seeds: 0.97 ± 0.042) stops at 1."""
    import yaml

    from meshsim.plots import phase_bars

    for s, acc in ((1, 1.0), (2, 0.94)):
        d = tmp_path / f"seed-{s}"
        d.mkdir()
        (d / "summary.json").write_text(json.dumps({
            "seed": s, "tasks": 10, "accuracy": {"overall": acc, "by_phase": {"p": acc}},
            "tokens_per_task": 10.0, "calls_per_task": 2.0, "tokens_per_task_by_phase": {"p": 10.0 + s},
            "calls_per_task_by_phase": {"p": 2.0}}))
        (d / "scenario.resolved.yaml").write_text(yaml.safe_dump({"name": "t", "seed": s, "seeds": 2,
                                                                  "phases": [{"name": "p", "tasks": 10}]}))
    fig = phase_bars(tmp_path)
    from matplotlib.collections import LineCollection

    acc_ax = fig.axes[0]
    tops = [max(y for _x, y in seg) for c in acc_ax.collections if isinstance(c, LineCollection)
            for seg in c.get_segments()]
    assert tops and max(tops) <= 1.0 + 1e-9 and max(tops) == pytest.approx(1.0)
