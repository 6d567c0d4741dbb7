"""Figures from any folder (issue 32, item 4): a sweep's run folders (output level
summary / records), one seed of a multi-seed scenario, sweep figures that go
stale when the sweep grows, intervals of proportions, long lists in large-run
reports, the topology legend and topology events on the timelines.

The real runs here are the six-agent smoke scenario (a second or two each)."""
from __future__ import annotations

import json
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
