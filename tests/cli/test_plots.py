"""Figures, tables and the HTML report (meshsim.plots, meshsim.plots.report, ``meshsim plot|report``).

A small real MeshHeal run (two seeds, degradation and staggered recovery) is
made once per module; SAC / CP-WBFT and 576-agent folders are synthetic
records written by the tests. Rendering uses matplotlib's Agg canvas.
"""
from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("matplotlib")
os.environ.setdefault("MPLBACKEND", "Agg")

import meshsim  # noqa: E402
from meshsim import plots  # noqa: E402
from meshsim.plots import report  # noqa: E402
from meshsim.cli import main  # noqa: E402
from meshsim.io.records import find_records, read_records  # noqa: E402
from tests.helpers import cli_runner as _runner, invoke

ROOT = Path(__file__).resolve().parents[2]
PERSISTENT = ROOT / "scenarios" / "meshheal" / "persistent-math.yaml"
# 210 tasks: A3 and A5 degrade at 43, A5 recovers at 85, A3 at 127.
SMALL = ["seeds=2", "tasks.count=210", "tasks.block=42",
         "phases=[{name: healthy, tasks: 42}, {name: degraded, tasks: 42}, {name: A3-degraded, tasks: 42},"
         " {name: recovered, tasks: 84}]",
         "events=[{at_task: 43, type: degrade, agents: [A3, A5]}, {at_task: 85, type: recover, agents: [A5]},"
         " {at_task: 127, type: recover, agents: [A3]}]"]


# ---------------------------------------------------------------------------
# helpers


def png_size(path: Path) -> tuple[int, int]:
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    assert data[12:16] == b"IHDR"
    w, h = struct.unpack(">II", data[16:24])
    assert len(data) > 2000, "suspiciously small PNG"
    return w, h


def assert_png(path: Path, height_in: float) -> None:
    w, h = png_size(path)
    assert w == round(plots.WIDTH * plots.DPI)
    assert abs(h - height_in * plots.DPI) <= 1, (h, height_in)
    import matplotlib.image as mpimg

    img = mpimg.imread(str(path))
    assert img.std() > 0.01, "blank image"


def cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("meshsim", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "meshsim.cli"]
    env = dict(os.environ)
    env.pop("MESHSIM_DEBUG", None)
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, timeout=120)


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error:")
    return lines[0]


def jsonl(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


# ---------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("plots") / "small"
    sc = meshsim.load_scenario(PERSISTENT, SMALL)
    meshsim.run(sc, out=out)
    return out


@pytest.fixture(scope="module")
def sac_dirs(tmp_path_factory) -> list[Path]:
    """Synthetic SAC / CP-WBFT run folders: three topologies x two methods,
    SAC on the complete graph with three seeds (aggregate.json)."""
    base = tmp_path_factory.mktemp("sac")
    dirs = []
    topos = {"complete": {"kind": "complete", "n": 7}, "gnp": {"kind": "gnp", "n": 7, "p": 0.8},
             "merg": {"kind": "merg", "n": 7}}
    for method in ("sac", "cpwbft"):
        for k, (tname, topo) in enumerate(topos.items()):
            d = base / f"{method}-{tname}"
            seeds = [1, 2, 3] if (method, tname) == ("sac", "complete") else [1]
            summaries = []
            for s in seeds:
                sd = d / f"seed-{s}" if len(seeds) > 1 else d
                sd.mkdir(parents=True)
                iaa = 0.53 + 0.01 * k + 0.005 * s
                faa = iaa + (0.02 if method == "sac" else -0.10) + 0.003 * s
                summary = {"scenario": f"{method}-{tname}", "seed": s, "iaa": iaa, "faa": faa, "bfti": faa - iaa,
                           "h_majority": 0.78, "ra": 0.79}
                weak = [0.25 + (0.02 if method == "sac" else 0.05) * r for r in range(7)]
                strong = [0.80 + (0.0 if method == "sac" else -0.05) * r for r in range(7)]
                if method == "sac":  # as metrics.consensus_summary writes it
                    summary["per_round"] = {str(r): {"weak": w, "strong": st, "honest": (w + st) / 2}
                                            for r, (w, st) in enumerate(zip(weak, strong))}
                elif tname == "complete":  # other accepted forms: a list of rounds, or lists per group
                    summary["per_round"] = [{"round": r, "weak": w, "strong": st}
                                            for r, (w, st) in enumerate(zip(weak, strong))]
                elif tname == "gnp":
                    summary["per_round"] = {"weak": weak, "strong": strong}
                (sd / "summary.json").write_text(json.dumps(summary))
                scen = {"name": f"{method}-{tname}", "seed": s, "seeds": 1, "network": {"topology": topo},
                        "protocol": {"name": method, "params": {"rounds": 6, "F": 3}}}
                (sd / "scenario.resolved.yaml").write_text(yaml.safe_dump(scen))
                write_jsonl(sd / "queries.jsonl", [{"query": 1, "round": 0, "agent": "A1", "correct": True}])
                summaries.append(summary)
            if len(seeds) > 1:
                from meshsim.observe.aggregate import aggregate

                (d / "aggregate.json").write_text(json.dumps({"scenario": d.name, "seeds": seeds,
                                                              "metrics": aggregate(summaries)}))
            dirs.append(d)
    return dirs


@pytest.fixture(scope="module")
def big_dir(tmp_path_factory) -> Path:
    """A synthetic 576-agent MeshHeal run folder (Tab. 2b scale), records only."""
    d = tmp_path_factory.mktemp("big") / "run"
    d.mkdir()
    n_tasks, n_agents = 630, 576
    sc = meshsim.load_scenario(PERSISTENT, [
        "agents.replicas=96", "network.topology={kind: regular, n: 576, d: 6}", f"tasks.count={n_tasks}",
        "phases=[{name: healthy, tasks: 126}, {name: degraded, tasks: 504}]", "events=[]"])
    data = sc.resolved()
    data["seeds"] = 1
    (d / "scenario.resolved.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    agents = [f"A{i}" for i in range(1, n_agents + 1)]
    degraded = [a for i, a in enumerate(agents) if i % 6 in (2, 4)]  # A3, A5 of every block of six
    states, reviews, info = [], [], {}
    for j, a in enumerate(degraded):
        b = 127 if j % 2 else 253
        r = 379 if j % 2 else 505
        c, u = b + 3 + j % 9, r + 40 + j % 13
        states += [{"agent": a, "task": b + 1, "t": 0.0, "old": "normal", "new": "watched", "degraded": True},
                   {"agent": a, "task": c, "t": 0.0, "old": "watched", "new": "isolated", "degraded": True},
                   {"agent": a, "task": u - 2, "t": 0.0, "old": "isolated", "new": "watched", "degraded": False},
                   {"agent": a, "task": u, "t": 0.0, "old": "watched", "new": "normal", "degraded": False}]
        info[a] = {"degraded_at": b, "recovered_at": r, "isolated_at": c, "detection_delay": c - b,
                   "closure": True, "reintegrated_at": u, "reintegration_delay": u - r}
    for k in range(1, n_tasks + 1):
        for m in range(3):
            a = agents[(k * 7 + m * 191) % n_agents]
            deg = a in info and info[a]["degraded_at"] <= k < info[a]["recovered_at"]
            q = 0.1 if deg else 0.9
            reviews.append({"task": k, "type": "algebra", "agent": a, "probe": False, "degraded": deg, "q0": q,
                            "q": q, "detector": [{"ability": "calculation", "matched": True, "z": 5.0 if deg
                                                  else 0.1, "state": "normal"}]})
    states.sort(key=lambda s: s["task"])
    write_jsonl(d / "states.jsonl", states)
    write_jsonl(d / "reviews.jsonl", reviews)
    write_jsonl(d / "tasks.jsonl", [{"index": k, "phase": "healthy" if k <= 126 else "degraded", "correct": True,
                                     "calls": 10, "tokens": 40000} for k in range(1, n_tasks + 1)])
    (d / "summary.json").write_text(json.dumps({
        "scenario": data["name"], "seed": 1, "tasks": n_tasks, "agents": info,
        "accuracy": {"overall": 0.81, "by_phase": {"healthy": 0.83, "degraded": 0.80}},
        "tokens_per_task": 40000.0, "calls_per_task": 10.0,
        "tokens_per_task_by_phase": {"healthy": 39000.0, "degraded": 40250.0},
        "calls_per_task_by_phase": {"healthy": 9.5, "degraded": 10.1}, "detection": {"false_isolations": 0}}))
    return d


# ---------------------------------------------------------------------------
# every kind renders a PNG of the expected size


def test_plots_module_does_not_import_matplotlib():
    code = ("import sys, meshsim.plots, meshsim.plots.report, meshsim.cli; "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported at module import'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("kind,height", [
    ("timeline", lambda n: plots.timeline_height(n)),
    ("heatmap", lambda n: plots.heatmap_height(6)),
    ("phases", lambda n: 3.6),
    ("detector", lambda n: 0.9 + 2.8 * n),
    ("topology", lambda n: 6.0),
])
def test_each_kind_renders_png(run_dir, tmp_path, kind, height):
    # per-agent figures show the degraded agents and any falsely isolated ones
    height = height(len(plots.choose_agents(plots.open_run(run_dir).first)[0]))
    out = tmp_path / f"{kind}.png"
    res = invoke("plot", run_dir, "--kind", kind, "-o", out)
    assert res.exit_code == 0, res.output
    assert out.is_file()
    assert_png(out, height)


def test_default_output_path_and_seed(run_dir):
    res = invoke("plot", run_dir, "--seed", 2, "--agents", "A5")
    assert res.exit_code == 0, res.output
    path = run_dir / "timeline-seed-2.png"
    assert_png(path, plots.timeline_height(1))
    path.unlink()


def test_functions_draw_into_given_axes_and_figure(run_dir):
    from matplotlib.figure import Figure

    rf = plots.open_run(run_dir).run(1)
    fig = Figure(figsize=(8, 3))
    ax = fig.add_subplot(1, 1, 1)
    assert plots.agent_timeline(rf, "A3", ax=ax) is ax
    fig2 = Figure(figsize=(8, 3))
    ax2 = fig2.add_subplot(1, 1, 1)
    assert plots.detector_view(rf, "A5", ax=ax2) is ax2
    assert plots.state_heatmap(rf, ax=fig2.add_subplot(2, 1, 2)) is not None
    fig3 = Figure(figsize=(10, 4))
    assert plots.phase_bars(run_dir, fig=fig3) is fig3
    assert plots.timeline(rf, agents=["A5"], fig=Figure(figsize=(10, 3))) is not None


# ---------------------------------------------------------------------------
# the timeline agrees with the records


def _first(rows, pred):
    return next((r["task"] for r in rows if pred(r)), None)


@pytest.mark.parametrize("agent", ["A3", "A5"])
def test_timeline_marks_match_states_jsonl(run_dir, agent):
    seed_dir = run_dir / "seed-1"
    states = sorted((s for s in read_records(seed_dir, "states.jsonl") if s["agent"] == agent),
                    key=lambda s: s["task"])
    reviews = [r for r in read_records(seed_dir, "reviews.jsonl") if r["agent"] == agent]
    # ground truth from the reviews' degraded flags: first degraded review >= 43 (degrade event)
    b = {"A3": 43, "A5": 43}[agent]
    r = {"A3": 127, "A5": 85}[agent]
    assert all(x["degraded"] == (b <= x["task"] < r) for x in reviews)
    # c_i (Sec. 3.2): already isolated when degradation starts, else its first isolation in [b, r)
    before = [s for s in states if s["task"] < b]
    c = b if before and before[-1]["new"] == "isolated" else \
        _first(states, lambda s: b <= s["task"] < r and s["new"] == "isolated")
    last_iso = max(s["task"] for s in states if s["new"] == "isolated")
    u = _first(states, lambda s: s["task"] > last_iso and s["new"] == "normal")
    u = max(u, r) if u is not None else None

    fig = plots.timeline(plots.open_run(run_dir).run(1), agents=[agent])
    ax = fig.axes[0]
    lines = {ln.get_gid().split(":")[0]: ln.get_xdata()[0] for ln in ax.lines if ln.get_gid()}
    title = ax.get_title(loc="left")
    if c is None:  # the model's prediction for this seed: never isolated in its degraded span
        assert "detection" not in lines and "reintegration" not in lines
        assert "never isolated" in title
        return
    assert lines["detection"] == c
    if u is None:
        assert "reintegration" not in lines
    else:
        assert lines["reintegration"] == u
    assert f"detection delay {c - b}" in title
    if u is not None:
        assert f"reintegration delay {u - r}" in title
    # the pink span covers exactly [b, r)
    spans = [p for p in ax.patches if p.get_label() == "injected degradation"]
    assert spans
    # one marker per reviewed output with a score
    n_points = sum(len(coll.get_offsets()) for coll in ax.collections if coll.get_offsets().shape[1:] == (2,)
                   and len(coll.get_offsets()) and coll.get_offsets()[0][1] <= 1.0 and
                   type(coll).__name__ == "PathCollection")
    assert n_points == sum(1 for x in reviews if x["q"] is not None)


def test_marks_and_intervals_agree_with_summary(run_dir):
    rf = plots.open_run(run_dir).run(2)
    summ = json.loads((run_dir / "seed-2" / "summary.json").read_text())
    iv = plots.degraded_intervals(rf)
    for a in ("A3", "A5"):
        m = plots.healing_marks(rf, a)[0]
        assert m["isolated_at"] == summ["agents"][a]["isolated_at"]
        assert iv[a] == [(summ["agents"][a]["degraded_at"], summ["agents"][a]["recovered_at"])]
        series = plots.state_series(rf, a)
        assert series[m["isolated_at"]] == "isolated" and series[m["isolated_at"] - 1] != "isolated"


# ---------------------------------------------------------------------------
# tables


def test_phase_table_matches_aggregate(run_dir, tmp_path):
    agg = json.loads((run_dir / "aggregate.json").read_text())["metrics"]
    t = report.phase_table(run_dir)
    assert [r[0] for r in t.data] == ["healthy", "degraded", "A3-degraded", "recovered", "all"]
    for row in t.data:
        rec = dict(zip(t.data_columns, row))
        key = "accuracy.overall" if rec["phase"] == "all" else f"accuracy.by_phase.{rec['phase']}"
        assert rec["accuracy_mean"] == pytest.approx(agg[key]["mean"])
        assert rec["accuracy_std"] == pytest.approx(agg[key]["std"])
        assert rec["accuracy_n"] == agg[key]["n"] == 2
        tkey = "tokens_per_task" if rec["phase"] == "all" else f"tokens_per_task_by_phase.{rec['phase']}"
        assert rec["tokens_per_task_mean"] == pytest.approx(agg[tkey]["mean"])
        ckey = "calls_per_task" if rec["phase"] == "all" else f"calls_per_task_by_phase.{rec['phase']}"
        assert rec["calls_per_task_std"] == pytest.approx(agg[ckey]["std"])
    # the CLI prints it and writes CSV + Markdown next to the PNG
    out = tmp_path / "ph.png"
    res = invoke("plot", run_dir, "--kind", "phases", "-o", out)
    assert res.exit_code == 0
    assert "Accuracy and cost per phase" in res.output
    import csv

    rows = list(csv.DictReader((tmp_path / "ph-phases.csv").open()))
    healthy = next(r for r in rows if r["phase"] == "healthy")
    assert float(healthy["accuracy_mean"]) == pytest.approx(agg["accuracy.by_phase.healthy"]["mean"], rel=1e-5)
    md = (tmp_path / "ph.md").read_text()
    m, s = agg["accuracy.by_phase.healthy"]["mean"], agg["accuracy.by_phase.healthy"]["std"]
    assert f"| healthy | 1–42 | {m:.3f} ± {s:.3f} |" in md
    heal = list(csv.DictReader((tmp_path / "ph-self-healing.csv").open()))
    for r in heal:
        d = agg[f"agents.{r['agent']}.detection_delay"]
        assert float(r["detection_delay_mean"]) == pytest.approx(d["mean"])
        assert float(r["detection_delay_min"]) == d["min"] and float(r["detection_delay_max"]) == d["max"]
        assert int(r["closure_seeds"]) == agg[f"agents.{r['agent']}.closure"]["true"]
    assert "Self-healing" in md and "/2 |" in md


def test_single_seed_tables(run_dir):
    t = report.phase_table(run_dir / "seed-1")
    summ = json.loads((run_dir / "seed-1" / "summary.json").read_text())
    assert t.rows[0][2] == f"{summ['accuracy']['by_phase']['healthy']:.3f}"
    h = report.healing_table(run_dir / "seed-1")
    a5 = next(r for r in h.rows if r[0] == "A5")
    det = summ["agents"]["A5"]["detection_delay"]
    assert a5[3] == (str(det) if det is not None else "∞ (never isolated)")
    assert a5[4] == ("1/1" if summ["agents"]["A5"]["closure"] else "0/1")


# ---------------------------------------------------------------------------
# SAC


def test_sac_plots_and_table(sac_dirs, tmp_path):
    out = tmp_path / "sac.png"
    res = invoke("plot", *sac_dirs, "--kind", "sac", "-o", out)
    assert res.exit_code == 0, res.output
    assert_png(out, 3.8)
    runs = plots.sac_runs(sac_dirs)
    sac_complete = next(r for r in runs if r.method == "SAC" and r.topology == "Complete")
    assert sac_complete.seeds == 3 and sac_complete.metrics["bfti"].n == 3
    assert len(sac_complete.strong) == 7 and sac_complete.strong[0] == pytest.approx(80.0)
    cp_complete = next(r for r in runs if r.method == "CP-WBFT" and r.topology == "Complete")
    assert cp_complete.weak[-1] == pytest.approx(55.0)  # the list form of per_round
    t = report.sac_table(sac_dirs)
    assert len(t.rows) == 6
    assert any(r[0] == "CP-WBFT" and r[4].startswith("-") for r in t.rows)  # negative BFTI


def test_sac_tolerates_missing_fields(sac_dirs, tmp_path):
    d = tmp_path / "bare"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({"seed": 1, "iaa": 0.5, "faa": 0.52}))  # no bfti, no per_round
    (d / "scenario.resolved.yaml").write_text(yaml.safe_dump({"name": "bare", "protocol": {"name": "sac"}}))
    runs = plots.sac_runs([d])
    assert runs[0].metrics["bfti"].mean == pytest.approx(0.02)
    out = tmp_path / "bare.png"
    assert invoke("plot", d, "-o", out).exit_code == 0  # default kind for a SAC run is sac
    assert_png(out, 3.8)
    path = report.write_report(d)
    text = path.read_text()
    assert "SAC vs CP-WBFT" in text and "data:image/png;base64," in text


# ---------------------------------------------------------------------------
# report


def test_report_is_self_contained(run_dir):
    res = invoke("report", run_dir)
    assert res.exit_code == 0, res.output
    text = (run_dir / "report.html").read_text()
    for needle in ("Accuracy and cost per phase", "Self-healing", "Fig. C1", "Detector statistic", "Topology",
                   "scenario.resolved.yaml", "meshheal"):
        assert needle in text, needle
    assert not re.search(r'(src|href)="(https?:|file:|/)', text)
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(images) >= 4
    for b64 in images:
        assert base64.b64decode(b64)[:8] == b"\x89PNG\r\n\x1a\n"
    assert (run_dir / "phases.csv").is_file() and (run_dir / "tables.md").is_file()


def test_run_with_plot_writes_report(tmp_path):
    out = tmp_path / "smoke"
    res = invoke("run", PERSISTENT, "--smoke", "-q", "--plot", "-o", out)
    assert res.exit_code == 0, res.output
    assert (out / "report.html").is_file() and (out / "summary.json").is_file()
    assert "data:image/png;base64," in (out / "report.html").read_text()


# ---------------------------------------------------------------------------
# missing or partial run folders: one line, exit 2


def _copy_seed(run_dir: Path, dst: Path) -> Path:
    shutil.copytree(run_dir / "seed-1", dst)
    return dst


@pytest.mark.parametrize("case", ["absent", "not-a-run", "unfinished", "no-reviews",
                                  "bad-jsonl", "cut-gzip", "bad-seed", "sac-kind"])
def test_missing_or_partial_folder_exit_2(run_dir, tmp_path, case):
    args = []
    if case == "absent":
        target, expect = tmp_path / "nope", "run folder not found"
    elif case == "not-a-run":
        target, expect = tmp_path, "not a run folder"
    elif case == "unfinished":
        target = _copy_seed(run_dir, tmp_path / "r")
        (target / "summary.json").unlink()
        expect = "summary.json missing"
    elif case == "no-reviews":
        target = _copy_seed(run_dir, tmp_path / "r")
        find_records(target, "reviews.jsonl").unlink()
        args, expect = ["--kind", "timeline"], "reviews.jsonl missing"
    elif case == "bad-jsonl":  # a plain table with a cut last line
        target = _copy_seed(run_dir, tmp_path / "r")
        gz = find_records(target, "states.jsonl")
        (target / "states.jsonl").write_bytes(gzip.decompress(gz.read_bytes()) + b'{"agent": "A1", "ta')
        gz.unlink()
        args, expect = ["--kind", "heatmap"], "not valid JSON"
    elif case == "cut-gzip":  # a compressed table cut short
        target = _copy_seed(run_dir, tmp_path / "r")
        gz = find_records(target, "states.jsonl")
        gz.write_bytes(gz.read_bytes()[:-12])
        args, expect = ["--kind", "heatmap"], "truncated file"
    elif case == "bad-seed":
        target, args, expect = run_dir, ["--seed", "99"], "no seed 99"
    else:
        target, args, expect = run_dir, ["--kind", "sac"], "not a SAC or CP-WBFT run"
    if case == "absent":  # one real process: the exit code and stderr as a shell sees them
        proc = cli("plot", target, *args, cwd=tmp_path)
        code, err = proc.returncode, proc.stderr
    else:
        res = invoke("plot", target, *args)
        code, err = res.exit_code, res.stderr
    assert code == 2, err
    line = one_error_line(err)
    assert expect in line, line
    if case not in ("bad-seed", "sac-kind"):
        res = invoke("report", target)
        assert res.exit_code == 2 and expect in one_error_line(res.stderr)


def test_report_on_partial_seed_names_what_is_missing(run_dir, tmp_path):
    target = tmp_path / "multi"
    shutil.copytree(run_dir, target)
    (target / "seed-2" / "summary.json").unlink()
    res = invoke("report", target)
    assert res.exit_code == 2
    assert "seed-2/summary.json" in one_error_line(res.stderr)


# ---------------------------------------------------------------------------
# 576 agents


def test_576_agent_heatmap(big_dir, tmp_path):
    rf = plots.open_run(big_dir).first
    assert len(rf.agents()) == 576
    out = tmp_path / "heat.png"
    res = invoke("plot", big_dir, "-o", out)  # default kind for a large run: heatmap
    assert res.exit_code == 0, res.output
    assert_png(out, plots.heatmap_height(576))
    # the timeline with too many agents falls back to the heatmap; a few chosen agents stay panels
    fig = plots.timeline(rf, agents=[f"A{i}" for i in range(1, 31)])
    assert len(fig.axes) == 1
    fig = plots.timeline(rf, agents=["A3", "A5"])
    assert len([a for a in fig.axes if a.get_title(loc="left")]) == 2
    out2 = tmp_path / "topo.png"
    res = invoke("plot", big_dir, "--kind", "topology", "-o", out2)
    assert res.exit_code == 0, res.output
    assert_png(out2, 3.8)


def test_default_agents_of_a_large_run_say_which_were_chosen(big_dir):
    rf = plots.open_run(big_dir).first
    chosen, note = plots.choose_agents(rf)
    assert chosen == ["A3", "A5", "A9", "A11"]  # the first degraded agents by name
    assert note == "showing 4 of 192 degraded agents: the first 4 by name"
    fig = plots.timeline(rf)
    assert note in fig._suptitle.get_text()
    # agents named by the caller: nothing to explain
    assert "showing" not in plots.timeline(rf, agents=["A3"])._suptitle.get_text()


def test_small_run_shows_every_degraded_agent_without_a_note(run_dir):
    rf = plots.open_run(run_dir).first
    chosen, note = plots.choose_agents(rf)
    assert chosen[:2] == ["A3", "A5"]  # every degraded agent first, then falsely isolated ones
    false = {s["agent"] for s in rf.states() if s["new"] == "isolated"} - {"A3", "A5"}
    assert set(chosen[2:]) <= false and len(chosen) == min(4, 2 + len(false))
    # a note exactly when some agent is left out, saying how many and which ones were shown
    assert (note is None) == (2 + len(false) <= 4)
    if note is not None:
        assert f"{len(chosen) - 2} of {len(false)} falsely isolated" in note


@pytest.mark.parametrize("suffix,magic", [(".pdf", b"%PDF"), (".svg", b"<?xml"), (".png", b"\x89PNG")])
def test_out_suffix_chooses_the_format(run_dir, tmp_path, suffix, magic):
    out = tmp_path / f"fig{suffix}"
    res = invoke("plot", run_dir, "--kind", "phases", "-o", out)
    assert res.exit_code == 0, res.stderr
    data = out.read_bytes()
    assert data.startswith(magic)
    if suffix == ".svg":
        assert b"<svg" in data[:2000]
    again = tmp_path / f"again{suffix}"
    assert invoke("plot", run_dir, "--kind", "phases", "-o", again).exit_code == 0
    assert again.read_bytes() == data  # no dates or random ids inside


def test_unknown_figure_suffix_is_one_line_exit_2(run_dir, tmp_path):
    res = invoke("plot", run_dir, "-o", tmp_path / "fig.jpg")
    assert res.exit_code == 2
    assert "fig.jpg" in one_error_line(res.stderr) and ".pdf" in res.stderr
    assert not (tmp_path / "fig.jpg").exists()


@pytest.mark.parametrize("argv", [["run", "--plot"], ["report"], ["plot"]])
def test_without_matplotlib_plotting_stops_first_in_one_line(argv, tmp_path, monkeypatch, run_dir):
    """An environment without matplotlib (a core dependency since issue 32): say so before simulating anything."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    out = tmp_path / "run"
    if argv[0] == "run":
        args = ["run", str(PERSISTENT), "--out", str(out), *[f"--set={s}" for s in SMALL], "--plot"]
    else:
        args = [*argv, str(run_dir)]
    res = _runner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 2
    line = one_error_line(res.stderr)
    assert "matplotlib" in line and "pip install 'matplotlib" in line
    assert not out.exists()  # nothing was simulated
