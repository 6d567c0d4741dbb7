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
from click.testing import CliRunner

pytest.importorskip("matplotlib")
os.environ.setdefault("MPLBACKEND", "Agg")

from meshsim.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STAGGERED = ROOT / "scenarios" / "meshheal" / "staggered-math.yaml"


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        return CliRunner()


def invoke(*args):
    return _runner().invoke(main, [str(a) for a in args], catch_exceptions=False)


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


def test_rerun_writes_only_its_record_tables_and_lists_them(sweep_dir, tmp_path):
    import shutil

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
    assert "Fig. C1" in text and "data:image/png;base64," in text
    # the folder now holds full records: plotting needs no rerun
    res = invoke("plot", point / "seed-1", "-o", tmp_path / "tl.png")
    assert res.exit_code == 0, res.output


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


def test_report_on_one_seed_of_a_multi_seed_scenario(tmp_path):
    """`meshsim run --seed 2` of a 3-seed scenario leaves seed-2/ and no aggregate.json: the report
    is written (not refused as partial) and says which seed it covers."""
    out = tmp_path / "ms"
    res = invoke("run", STAGGERED, "--smoke", "--set", "seeds=3", "--seed", "2", "-q", "-o", out)
    assert res.exit_code == 0, res.output
    assert (out / "seed-2").is_dir() and not (out / "aggregate.json").exists()
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
    # one seed: none; identical seeds: zero width, as the t-interval
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

    from test_sweep_views import A, _summary, make_sweep

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


def test_tradeoff_error_bars_are_capped_and_end_inside_the_axes(tmp_path):
    from test_sweep_views import A, _summary, make_sweep

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
