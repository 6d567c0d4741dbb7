"""``meshsim sweep --search optuna`` (issue 18): a noise-aware search on the
sweep's executors writes front.csv with intervals and a recommendation, is
deterministic given its seed whatever the worker count, resumes after
``kill -9`` without telling any finished trial again, and refuses bad input in
one line.

Smoke-sized: the staggered schedule on 210 tasks (about 0.3 s a run), 6
trials in batches of 3 on 2 seeds, refined up to 4 seeds.
"""
from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("optuna")

from meshsim.cli import main  # noqa: E402
from meshsim.core.errors import InputError  # noqa: E402
from meshsim.sweep.results import comparable_results  # noqa: E402
from meshsim.sweep.search import Objective, SearchSpec, parse_constraint, parse_range  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STAGGERED = str(ROOT / "scenarios" / "meshheal" / "staggered-math.yaml")
SEARCH = [STAGGERED, "--smoke", "--search", "optuna", "--range", "protocol.params.alpha=0.8:2.0",
          "--range", "protocol.params.beta=2.1:4", "--range", "protocol.params.window=4:12:int",
          "--minimize", "detection.delay_mean", "--minimize", "detection.false_isolation_rate",
          "--constraint", "detection.missed==0", "--trials", "6", "--batch", "3", "--seeds", "1-2",
          "--max-seeds", "3"]


def _rows(path: Path) -> list[dict]:
    with open(path) as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("search") / "s"
    res = CliRunner().invoke(main, ["sweep", *SEARCH, "--workers", "2", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output + res.stderr
    return out, res.output


def test_search_writes_trials_front_with_intervals_and_a_recommendation(study):
    out, text = study
    trials = _rows(out / "trials.csv")
    assert [int(t["trial"]) for t in trials] == list(range(6))
    assert [t["generation"] for t in trials] == ["0", "0", "0", "1", "1", "1"]  # one generation per batch
    assert all(t["state"] == "COMPLETE" for t in trials)
    for t in trials:  # parameters within their ranges, int stays int, floats rounded to 4 digits
        assert 0.8 <= float(t["protocol.params.alpha"]) <= 2.0 and 2.1 <= float(t["protocol.params.beta"]) <= 4
        assert t["protocol.params.window"].isdigit() and 4 <= int(t["protocol.params.window"]) <= 12
        assert len(t["protocol.params.alpha"].replace(".", "").lstrip("0")) <= 4
    # a trial's value is the mean over the common seeds 1-2 of its runs
    res = _rows(out / "results.csv")
    t0 = trials[0]
    xs = [float(r["detection.delay_mean"]) for r in res if r["point"] == t0["point"] and r["seed"] in ("1", "2")]
    assert float(t0["detection.delay_mean"]) == pytest.approx(sum(xs) / 2)
    # every trial ran the same seeds (common random numbers)
    seeds_of = {}
    for r in res:
        seeds_of.setdefault(r["point"], set()).add(int(r["seed"]))
    assert all({1, 2} <= s for s in seeds_of.values()) and all(s <= {1, 2, 3} for s in seeds_of.values())
    assert sum(1 for r in res if int(r["seed"]) > 2) <= 3  # the refinement budget: a quarter of 6 x 2 runs

    front = _rows(out / "front.csv")
    assert front and [int(r["rank"]) for r in front] == list(range(1, len(front) + 1))
    for r in front:
        n = int(r["detection.delay_mean.n"])
        assert n == int(r["seeds"]) and 2 <= n <= 3
        lo, mean, hi = (float(r[f"detection.delay_mean.{k}"]) for k in ("lo", "mean", "hi"))
        se = float(r["detection.delay_mean.se"])
        assert lo <= mean <= hi and hi - mean == pytest.approx(se * {2: 12.706, 3: 4.303, 4: 3.182}[n], rel=1e-3)
        assert float(r["detection.missed.mean"]) == 0  # the constraint holds on the front
        mine = [float(x["detection.delay_mean"]) for x in res if x["point"] == r["point"] and x["status"] == "ok"]
        assert mean == pytest.approx(sum(mine) / len(mine)) and len(mine) == n
    # no front point is beaten on both objectives by another front point
    for a in front:
        for b in front:
            assert not (float(b["detection.delay_mean.mean"]) < float(a["detection.delay_mean.mean"])
                        and float(b["detection.false_isolation_rate.mean"])
                        < float(a["detection.false_isolation_rate.mean"]))
    if len(front) > 1:
        assert front[0]["distinct_prev"] == "" and front[0]["distinct_next"] in ("True", "False")
    assert sum(r["recommended"] == "True" for r in front) == 1
    rec = json.loads((out / "recommended.json").read_text())
    (row,) = [r for r in front if r["recommended"] == "True"]
    assert rec["point"] == row["point"] and rec["set"].startswith("--set protocol.params.alpha=")
    assert f"  {rec['set']}" in text.splitlines()
    # the search folder is a sweep folder: its manifest lists every run, the tables cover them
    man = json.loads((out / "manifest.json").read_text())
    assert man["axes"] == ["protocol.params.alpha", "protocol.params.beta", "protocol.params.window"]
    assert len(man["runs"]) == len(res) and man["search"]["objectives"][0] == "minimize detection.delay_mean"


@pytest.mark.slow  # on another xdist worker it would build the module's study a second time (README's 2-minute budget)
def test_the_recommended_setting_reproduces_with_meshsim_run(study, tmp_path):
    out, _ = study
    rec = json.loads((out / "recommended.json").read_text())
    sets = [x for p, v in rec["values"].items() for x in ("--set", f"{p}={v}")]
    res = CliRunner().invoke(main, ["run", STAGGERED, "--smoke", "--seed", "1", "-q", "--out", str(tmp_path / "r"),
                                    *sets])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r" / "summary.json").read_bytes() == \
        (out / "runs" / rec["point"] / "seed-1" / "summary.json").read_bytes()


def test_the_sampler_is_seeded_per_search_seed_and_trial():
    import optuna

    from meshsim.sweep.search import SearchPlan
    from meshsim.sweep.search.study import seeded_sampler

    def first_asks(seed):
        sp = SearchPlan(None, SearchSpec([parse_range("a=0:1")], [Objective("m", "minimize")], batch=3, seed=seed))
        study = optuna.create_study(directions=["minimize"])
        out = []
        for n in range(3):
            study.sampler = seeded_sampler(sp, n)
            out.append(study.ask({"a": sp.spec.ranges[0].distribution()}).params["a"])
        return out

    assert first_asks(0) == first_asks(0)
    assert first_asks(0) != first_asks(7) and len(set(first_asks(0))) == 3


def _tells(journal: Path) -> dict[int, int]:
    """How often each trial was told (its state set to a finished one) in the study's journal."""
    from optuna.storages.journal._storage import JournalOperation

    counts: dict[int, int] = {}
    for line in journal.read_text().splitlines():
        log = json.loads(line)
        if log["op_code"] == JournalOperation.SET_TRIAL_STATE_VALUES and log["state"] in (1, 4):  # COMPLETE, FAIL
            counts[log["trial_id"]] = counts.get(log["trial_id"], 0) + 1
    return counts


@pytest.mark.slow  # README's test command stays under 2 minutes; .ci/run runs the slow ones
def test_kill_9_mid_study_then_rerun_repeats_no_finished_trial_and_gives_the_same_study(study, tmp_path):
    """Same seed twice gives byte-identical tables, here across a kill -9 and a worker count changed on rerun."""
    out, _ = study
    dest = tmp_path / "killed"
    cmd = [sys.executable, "-m", "meshsim.cli", "sweep", *SEARCH, "--workers", "2", "--out", str(dest), "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    # after the first batch is told (trials.csv appears) and a run of the second one has finished
    while time.monotonic() < deadline and not ((dest / "trials.csv").exists()
                                               and len(list(dest.glob("runs/*/seed-*/summary.json"))) >= 7):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (dest / "front.csv").exists(), "the kill did not land mid-study"
    told = _tells(dest / "study.journal")
    assert len(told) >= 3
    before = {p: p.stat().st_mtime_ns for p in dest.rglob("summary.json")}
    rerun = [a if a != "2" or cmd[i - 1] != "--workers" else "1" for i, a in enumerate(cmd[:-1])]
    assert "1" in rerun
    res = subprocess.run(rerun, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "3 resumed" in res.stdout or "6 resumed" in res.stdout, res.stdout
    after = _tells(dest / "study.journal")
    assert sorted(after) == sorted(set(after)) and all(c == 1 for c in after.values()) and len(after) == 6
    assert {p: p.stat().st_mtime_ns for p in before} == before  # no finished run ran again
    for name in ("trials.csv", "front.csv", "recommended.json"):
        assert (dest / name).read_bytes() == (out / name).read_bytes(), name
    # results.csv: byte-identical but for each run's wall and CPU seconds
    assert comparable_results(dest) == comparable_results(out)


@pytest.mark.slow  # README's test command stays under 2 minutes; .ci/run runs the slow ones
def test_a_changed_study_is_refused_and_a_bigger_budget_extends_it(study, tmp_path):
    import shutil

    out = tmp_path / "s"
    shutil.copytree(study[0], out)
    args = [a if a != "protocol.params.beta=2.1:4" else "protocol.params.beta=2.1:5" for a in SEARCH]
    res = CliRunner().invoke(main, ["sweep", *args, "--out", str(out)])
    assert res.exit_code == 2 and not res.stdout, res.output
    (line,) = res.stderr.strip().splitlines()
    assert "the folder holds a different search: ranges" in line
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--grid", "protocol.params.beta=3",
                                    "--seeds", "1-2", "--out", str(out)])
    assert res.exit_code == 2 and "holds a search" in res.stderr, res.output
    dry = CliRunner().invoke(main, ["sweep", *SEARCH, "--trials", "9", "--out", str(out), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "folder: 6 trials finished, 0 to resume, 3 to ask" in dry.output
    assert "9 trials in batches of 3 x 2 seeds (seeds 1-2) = up to 18 runs" in dry.output


def test_an_invalid_draw_is_replaced_and_listed(tmp_path):
    out = tmp_path / "inv"
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--search", "optuna", "--range",
                                    "protocol.params.alpha=0.8:2.5", "--range", "protocol.params.beta=1.5:3",
                                    "--minimize", "detection.delay_mean", "--trials", "3", "--seeds", "1",
                                    "--max-seeds", "1", "--workers", "1", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    assert "3 trials: 3 complete (0 resumed), 0 failed, 2 invalid draws replaced" in res.output
    rows = _rows(out / "trials.csv")
    bad = [r for r in rows if r["state"] == "FAIL"]
    assert len(rows) == 5 and len(bad) == 2 and all("alpha must be < beta" in r["reason"] for r in bad)
    assert all(float(r["protocol.params.alpha"]) >= float(r["protocol.params.beta"]) for r in bad)
    assert all(r["generation"] == "0" and r["batch"] == "0" for r in rows if r["state"] == "COMPLETE")
    man = json.loads((out / "manifest.json").read_text())
    assert len(man["skipped"]) == 2 and len(man["runs"]) == 3


def test_dry_run_writes_nothing(tmp_path):
    res = CliRunner().invoke(main, ["sweep", *SEARCH, "--out", str(tmp_path / "d"), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "ranges: alpha 0.8..2 (float), beta 2.1..4 (float), window 4..12 (int)" in res.output
    assert "subject to detection.missed==0" in res.output and "folder: new" in res.output
    assert not (tmp_path / "d").exists()


# ----------------------------------------------------------------------------------- bad input


def _replace(args: list[str], old: str, new: list[str]) -> list[str]:
    i = args.index(old)
    return args[:i - 1] + new + args[i + 1:]


@pytest.mark.parametrize("args,needle", [
    (_replace(SEARCH, "protocol.params.alpha=0.8:2.0", ["--range", "protocol.params.alpha=0.8"]), "malformed range"),
    (_replace(SEARCH, "protocol.params.alpha=0.8:2.0", ["--range", "protocol.params.alpha=2:0.8"]), "HIGH must be"),
    (_replace(SEARCH, "protocol.params.alpha=0.8:2.0", ["--range", "protocol.params.alpha=0.8:2:cubic"]),
     "unknown range kind"),
    (_replace(SEARCH, "protocol.params.alpha=0.8:2.0", ["--range", "protocol.params.alpha=0:2:log"]), "LOW > 0"),
    (_replace(SEARCH, "protocol.params.window=4:12:int", ["--range", "protocol.params.window=4.5:12:int"]),
     "integer ends"),
    (_replace(SEARCH, "protocol.params.window=4:12:int", ["--range", "protocol.params.window=4:12"]),
     "an integer parameter"),
    (_replace(SEARCH, "protocol.params.alpha=0.8:2.0", ["--range", "protocol.params.alpah=0.8:2.0"]),
     "--range: unknown path"),
    (_replace(SEARCH, "protocol.params.alpha=0.8:2.0", ["--range", "seeds=1:3"]), "--range"),
    (_replace(SEARCH, "detection.missed==0", ["--constraint", "detection.missed=0"]), "expected METRIC<=VALUE"),
    (_replace(SEARCH, "detection.missed==0", ["--constraint", "detection.missed<=x"]), "must be a number"),
    (_replace(SEARCH, "detection.missed==0", ["--constraint", "detection.misses<=0"]),
     "--constraint: unknown metric; did you mean detection.missed"),
    (_replace(SEARCH, "detection.delay_mean", ["--minimize", "false_isolation_rate"]),
     "did you mean detection.false_isolation_rate"),
    (_replace(SEARCH, "detection.delay_mean", ["--maximize", "no_such_metric"]), "--maximize: unknown metric"),
    (_replace(SEARCH, "detection.false_isolation_rate", ["--minimize", "detection.delay_mean"]), "objective twice"),
    ([a for a in SEARCH if a not in ("--search", "optuna")], "--range goes with --search optuna"),
    (SEARCH + ["--grid", "protocol.params.beta=3"], "--search takes --range"),
    (SEARCH + ["--max-seeds", "1"], "--max-seeds"),
])
def test_bad_search_input_is_one_line_exit_2(args, needle, tmp_path):
    res = CliRunner().invoke(main, ["sweep", *args, "--out", str(tmp_path / "s")])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and not res.stdout, res.output
    assert not (tmp_path / "s").exists(), "a refused search must write nothing"


def test_range_and_constraint_parsing():
    assert parse_range("x=1e-3:1:log") == parse_range("x=0.001:1:log")
    r = parse_range("protocol.params.window=4:16:int")
    assert (r.low, r.high, r.kind) == (4, 16, "int") and r.applied(7.0) == 7 and isinstance(r.applied(7.0), int)
    f = parse_range("protocol.params.alpha=0.8:2.5")
    assert f.applied(1.234567) == 1.235 and f.applied(2.5000001) == 2.5
    c = parse_constraint("detection.missed == 0")
    assert c.holds(0.0) and not c.holds(0.5) and c.violation(0.5) == 0.5
    assert parse_constraint("a.b<=0.1").holds(0.1) and not parse_constraint("a.b>=2").holds(1.0)
    assert not c.holds(math.nan)
    with pytest.raises(InputError):
        parse_range("x=1:1")


# ----------------------------------------------------------------------------------- the front's rules

from hypothesis import given, settings, strategies as st  # noqa: E402

from meshsim.sweep.search.front import (_dominates, _nondominated, _order, _recommend,  # noqa: E402
                                        interval_dominates)
from meshsim.sweep.stats import distinguishable, interval  # noqa: E402


class _SP:
    def __init__(self, objectives):
        self.spec = SearchSpec([], objectives)


_OBJS = [Objective("d", "minimize"), Objective("f", "minimize")]
_SEEDS = [1, 2, 3, 4]
_point = st.fixed_dictionaries({m: st.lists(st.integers(0, 6), min_size=4, max_size=4) for m in ("d", "f")})


@settings(max_examples=60, deadline=None)
@given(st.lists(_point, min_size=1, max_size=8))
def test_front_and_recommendation_rules(pts):
    sp = _SP(_OBJS)
    stt = {f"p{i}": {m: dict(zip(_SEEDS, map(float, v))) for m, v in p.items()} for i, p in enumerate(pts)}
    keys = sorted(stt)
    front = _order(sp, _nondominated(sp, keys, stt), stt)
    assert front
    for k in keys:  # the front is undominated, and everything off it is dominated by a front point
        if k in front:
            assert not any(_dominates(sp, stt[q], stt[k]) for q in keys)
        else:
            assert any(_dominates(sp, stt[f], stt[k]) for f in front)
    rows = [{"rank": i + 1, "point": k, "trial": i, "seeds": 4, "_stats": stt[k],
             "intervals": {m: interval(list(stt[k][m].values())) for m in ("d", "f")}} for i, k in enumerate(front)]
    rec = _recommend(sp, rows)
    (chosen,) = [r for r in rows if r["point"] == rec["point"]]
    c = stt[chosen["point"]]
    undominated = [k for k in front if not any(interval_dominates(sp, stt[q], stt[k]) for q in front if q != k)]
    if undominated:  # never dominated within the front by the interval rule
        assert chosen["point"] in undominated
        assert not any(interval_dominates(sp, stt[q], c) for q in front)
    pool = undominated or front
    best_f = min(pool, key=lambda k: (_mean(stt[k]["f"]), front.index(k)))
    # never distinguishably worse than the best on the second objective
    assert not (_mean(c["f"]) > _mean(stt[best_f]["f"]) and distinguishable(c["f"], stt[best_f]["f"]))
    kept = [k for k in pool if k == best_f or not (_mean(stt[k]["f"]) > _mean(stt[best_f]["f"])
                                                  and distinguishable(stt[k]["f"], stt[best_f]["f"]))]

    def bound(k):
        iv = interval(list(stt[k]["d"].values()))
        return iv.hi if math.isfinite(iv.hi) else iv.mean
    top = min(kept, key=lambda k: (bound(k), front.index(k)))
    # the first objective's best bound does not beat it distinguishably, and among those so tied it has the
    # lowest mean on the second objective: a first-objective lead within the noise buys nothing
    assert not (_mean(stt[top]["d"]) < _mean(c["d"]) and distinguishable(stt[top]["d"], c["d"]))
    tied = [k for k in kept if k == top or not (_mean(stt[top]["d"]) < _mean(stt[k]["d"])
                                                and distinguishable(stt[top]["d"], stt[k]["d"]))]
    assert _mean(c["f"]) == min(_mean(stt[k]["f"]) for k in tied)


def _mean(xs):
    return sum(xs.values()) / len(xs)


def test_the_reported_repro_a_zero_false_isolation_point_beats_one_only_noise_faster():
    """Issue 29: a 12-trial search on staggered-math recommended false-isolation rate 0.111 [-0.128, 0.350]
    over 0 [0, 0]. A first-objective lead the seeds cannot tell from noise no longer buys a worse mean on
    the objective traded away; a distinguishable lead still does (that is the trade the user asked for)."""
    sp = _SP(_OBJS)
    a = {"d": {1: 5.0, 2: 6.0, 3: 4.0}, "f": {1: 0.0, 2: 0.0, 3: 1 / 3}}  # faster by noise, 0.111
    b = {"d": {1: 6.0, 2: 6.0, 3: 5.0}, "f": {1: 0.0, 2: 0.0, 3: 0.0}}
    rows = [{"rank": i + 1, "point": k, "trial": i, "seeds": 3, "_stats": v,
             "intervals": {m: interval(list(v[m].values())) for m in ("d", "f")}}
            for i, (k, v) in enumerate([("pa", a), ("pb", b)])]
    assert _recommend(sp, rows)["point"] == "pb"
    a["d"] = {1: 2.0, 2: 2.1, 3: 1.9}  # now distinguishably faster, and not distinguishably worse on f
    rows[0]["intervals"] = {m: interval(list(a[m].values())) for m in ("d", "f")}
    assert _recommend(sp, rows)["point"] == "pa"


def test_constraints_hold_on_every_seed_for_equality_and_on_the_mean_for_bounds():
    missed = parse_constraint("detection.missed==0")
    assert missed.holds_on({1: 0.0, 2: 0.0, 3: 0.0}) and not missed.holds_on({1: 0.0, 2: 1.0, 3: 0.0})
    assert missed.seed_violation({1: 0.0, 2: 2.0, 3: 0.0}) == 2.0 and not missed.holds_on({})
    rate = parse_constraint("detection.false_isolation_rate<=0.1")
    assert rate.holds_on({1: 0.0, 2: 0.25, 3: 0.0}) and not rate.holds_on({1: 0.2, 2: 0.25, 3: 0.0})
    acc = parse_constraint("accuracy.overall>=0.5")
    assert acc.holds_on({1: 0.4, 2: 0.7}) and not acc.holds_on({1: 0.4, 2: 0.5})


def test_intervals_of_rates_and_counts_stay_in_their_range():
    from meshsim.sweep.stats import clip, metric_bounds

    assert metric_bounds("detection.false_isolation_rate") == (0.0, 1.0)
    assert metric_bounds("accuracy.overall") == (0.0, 1.0)
    assert metric_bounds("detection.delay_outputs_mean") == (0.0, math.inf)
    assert metric_bounds("detection.missed") == (0.0, math.inf)
    assert metric_bounds("audit.initial_score_gap") == (-math.inf, math.inf)
    raw = interval([0.0, 0.0, 1 / 3])
    iv = clip(raw, metric_bounds("detection.false_isolation_rate"))
    assert raw.lo < 0 and iv.lo == 0.0 and (iv.mean, iv.hi, iv.n) == (raw.mean, raw.hi, 3)
    assert clip(interval([0.9, 1.0, 1.0]), (0.0, 1.0)).hi == 1.0
    from meshsim.plots.sweeps.data import Cell, _in_range  # the sweep report's table clips the same way

    c = _in_range(Cell(raw.mean, raw.se, raw.lo, raw.hi, 3, {}, [], 1), "detection.false_isolation_rate")
    assert (c.lo, c.hi) == (0.0, raw.hi)


@pytest.mark.slow
def test_dask_localcluster_asks_and_tells_the_same_study(tmp_path):
    pytest.importorskip("distributed")
    small = [a if a not in ("6", "3") else {"6": "3", "3": "3"}[a] for a in SEARCH]
    res = subprocess.run([sys.executable, "-m", "meshsim.cli", "sweep", *small, "--max-seeds", "2", "--executor",
                          "dask", "--workers", "2", "--out", str(tmp_path / "dask")], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    one = CliRunner().invoke(main, ["sweep", *small, "--max-seeds", "2", "--workers", "1", "--out",
                                    str(tmp_path / "one"), "-q"])
    assert one.exit_code == 0, one.output
    for name in ("trials.csv", "front.csv"):
        assert (tmp_path / "dask" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name
    assert comparable_results(tmp_path / "dask") == comparable_results(tmp_path / "one")


def test_objectives_keep_their_command_line_order():
    from meshsim.cli import _objectives

    argv = ["S", "--maximize", "accuracy.overall", "--range", "a=1:2", "--minimize=detection.delay_mean",
            "--minimize", "detection.false_isolation_rate"]
    assert _objectives(argv) == [("maximize", "accuracy.overall"), ("minimize", "detection.delay_mean"),
                                 ("minimize", "detection.false_isolation_rate")]


def test_a_journal_line_cut_by_kill_9_and_a_stale_lock_do_not_block_the_rerun(tmp_path):
    from meshsim.sweep.search import SearchPlan
    from meshsim.sweep.search.study import open_study

    sp = SearchPlan(None, SearchSpec([parse_range("a=0:1")], [Objective("m", "minimize")], batch=2))
    study = open_study(sp, tmp_path).study
    t = study.ask({"a": sp.spec.ranges[0].distribution()})
    study.tell(t.number, [0.5])
    with open(tmp_path / "study.journal", "ab") as fh:
        fh.write(b'{"op_code": 4, "worker_id": "x", "trial_id"')  # a write cut short
    (tmp_path / "study.journal.lock").write_text("")  # the journal's lock, left by the killed process
    again = open_study(sp, tmp_path).study
    assert [x.values for x in again.get_trials()] == [[0.5]]
    again.tell(again.ask({"a": sp.spec.ranges[0].distribution()}).number, [0.25])
    assert [x.values for x in open_study(sp, tmp_path).study.get_trials()] == [[0.5], [0.25]]


def test_no_feasible_setting_gives_no_recommendation(tmp_path):
    out = tmp_path / "none"
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--search", "optuna", "--range",
                                    "protocol.params.beta=2.1:4", "--maximize", "accuracy.overall",
                                    "--constraint", "detection.missed>=5", "--trials", "2", "--seeds", "1",
                                    "--workers", "1", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    assert "recommended: none (no trial satisfies the constraints)" in res.output
    assert _rows(out / "front.csv") == [] and json.loads((out / "recommended.json").read_text()) is None
    assert [r["feasible"] for r in _rows(out / "trials.csv")] == ["False", "False"]


@pytest.mark.parametrize("number", [0, 1, 3, 4])  # the random first generation and NSGA-II's children
@pytest.mark.parametrize("held", [1, 2])
def test_a_trial_cut_mid_ask_gets_the_parameters_the_uninterrupted_ask_drew(number, held):
    import optuna

    from meshsim.sweep.optuna_seam import Trials
    from meshsim.sweep.search import SearchPlan
    from meshsim.sweep.search.study import seeded_sampler, trial_params

    sp = SearchPlan(None, SearchSpec([parse_range("a=0:1"), parse_range("b=1:100:log"), parse_range("c=2:9:int")],
                                     [Objective("m", "minimize"), Objective("n", "minimize")], batch=3, seed=5))
    dists = {r.path: r.distribution() for r in sp.spec.ranges}

    def study_with(n, storage=None):  # trials 0..n-1 asked and told as the search does
        study = optuna.create_study(storage=storage, directions=["minimize", "minimize"])
        for k in range(n):
            study.sampler = seeded_sampler(sp, k)
            t = study.ask(fixed_distributions=dists)
            study.tell(t.number, [t.params["a"] + t.params["c"], t.params["b"] - t.params["a"]])
        return study

    whole = study_with(number)
    whole.sampler = seeded_sampler(sp, number)
    want = whole.ask(fixed_distributions=dists).params
    storage = optuna.storages.InMemoryStorage()
    cut = study_with(number, storage)
    cut_trials = Trials(cut, storage)
    tid = storage.create_new_trial(cut_trials.study_id)
    for r in sp.spec.ranges[:held]:  # what reached the journal before the kill
        storage.set_trial_param(tid, r.path, dists[r.path].to_internal_repr(want[r.path]), dists[r.path])
    cut.sampler = seeded_sampler(sp, 0)  # a resumed process: whatever sampler the study was opened with
    got = trial_params(sp, cut_trials, cut.get_trials(deepcopy=False)[number])
    assert got == want


def test_refinement_spends_seeds_where_the_recommendation_is_decided_and_drops_a_point_a_new_seed_breaks():
    """Issue 29: extra seeds go to the recommendation and the points it cannot yet be told from, not to the
    ends of the front; a point that broke ``missed==0`` on a refinement seed is never recommended."""
    from types import SimpleNamespace

    from meshsim.sweep.search import SearchPlan
    from meshsim.sweep.search.front import refine

    import numpy as np

    def noise(seed, salt, sd):  # a shared part per seed (common random numbers) and an own part per point
        shared = np.random.default_rng([seed, 0]).normal()
        return sd * (shared + np.random.default_rng([seed, salt]).normal())

    def pt(d, f, salt, missed=lambda s: 0.0):
        return {"d": lambda s: d + noise(s, salt, 0.3), "f": lambda s: max(0.0, f + noise(s, salt + 100, 0.02)),
                "detection.missed": missed}

    # along the front: a fast end that isolates many (told apart on both objectives), the middle where
    # the choice is made (points the seeds cannot tell apart yet), a slow end no better on false isolations
    table = {"p0-fast-end": pt(1.0, 0.9, 1), "p1": pt(2.0, 0.7, 2), "p2": pt(3.0, 0.06, 3), "p3": pt(3.05, 0.06, 4),
             "p4-slow-end": pt(9.0, 0.05, 5),
             "trap": pt(2.9, 0.03, 6, missed=lambda s: 1.0 if s == 4 else 0.0)}  # breaks the constraint on seed 4
    sp = SearchPlan(SimpleNamespace(seeds=[1, 2]), SearchSpec([], _OBJS, [parse_constraint("detection.missed==0")],
                                                              max_seeds=8, refine_runs=60))

    class Runner:
        points = {k: SimpleNamespace(key=k, values={}) for k in table}
        ran: list = []

        def run(self, pairs, label):
            self.ran += [(p.key, s) for p, s in pairs]

        def values(self, k, s):
            return {m: f(s) for m, f in table[k].items()}

        def series(self, k, m, seeds):
            return {s: float(table[k][m](s)) for s in seeds}

    runner = Runner()
    complete = [SimpleNamespace(number=i, user_attrs={"point": k}) for i, k in enumerate(table)]
    rows, rec = refine(sp, runner, complete, lambda m: None)
    grown = {k for k, _s in runner.ran}
    assert ("trap", 4) in runner.ran  # it led after the trials' seeds, so it was refined ...
    assert rec["point"] != "trap" and "trap" not in {r["point"] for r in rows}  # ... and seed 4 ruled it out
    assert not grown & {"p0-fast-end", "p4-slow-end"}  # the ends are told apart: no seeds there
    assert rec["point"] in grown and rec["constraints"]["detection.missed==0"]["worst_seed"] == 0.0
    (row,) = [r for r in rows if r["point"] == rec["point"]]
    assert rec["seeds"] == row["seeds"] == 2 + sum(1 for k, _s in runner.ran if k == rec["point"])


def _search_data(out: Path, **search):
    """The search folder as the plots read it, with its manifest's search section changed (what another
    search with these objectives / constraints would hold)."""
    from meshsim.plots.sweeps import SweepData
    from meshsim.sweep.results import read_table

    cols, rows, man = read_table(out, "runs")
    man = json.loads(json.dumps(man))
    man["search"].update(search)
    return SweepData(out, cols, rows, man)


def test_a_search_folders_trade_off_draws_its_objectives_its_violators_and_its_recommendation(study):
    """Issue 29: the trade-off of a search folder plots the search's own objectives, never puts a constraint
    violator on the front, marks the recommendation and states each point's seed count truly."""
    pytest.importorskip("matplotlib")
    from meshsim.plots.sweeps import open_sweep, seed_counts, tradeoff, tradeoff_points

    out, _ = study
    rec = json.loads((out / "recommended.json").read_text())
    res = _rows(out / "results.csv")
    sd = open_sweep(out)
    pts = tradeoff_points(sd)
    assert {p["metrics"]["fi"] for p in pts} == {"detection.false_isolation_rate"}  # x: the second objective
    assert {p["metrics"]["delay"] for p in pts} == {"detection.delay_mean"}  # y: the first
    (r,) = [p for p in pts if p["recommended"]]
    assert r["point"] == rec["point"] and r["pareto"] and not r["violates"]
    for p in pts:  # missed==0 judged on every seed of the point
        missed = [float(x["detection.missed"]) for x in res if x["point"] == p["point"] and x["status"] == "ok"]
        assert bool(p["violates"]) == any(m != 0 for m in missed)
        assert not (p["violates"] and p["pareto"])
    per = {}
    for x in res:
        per[x["point"]] = per.get(x["point"], 0) + (x["status"] == "ok")
    counts = sorted(set(per.values()))
    text = seed_counts(sd)
    for n in counts:
        assert f"× {n} seed" in text
    if len(counts) > 1:
        assert text.startswith(f"{len(per)} points: ")
    # another search's objectives are drawn, and a bound on the mean makes violators, never on the front
    delays = sorted(float(x["detection.delay_mean"]) for x in res if x["detection.delay_mean"])
    other = _search_data(out, objectives=["minimize detection.delay_outputs_mean",
                                          "maximize accuracy.overall"],
                         constraints=[f"detection.delay_mean<={delays[len(delays) // 2]}"])
    pts = tradeoff_points(other)
    assert {p["metrics"]["fi"] for p in pts} == {"accuracy.overall"}
    assert {p["metrics"]["delay"] for p in pts} == {"detection.delay_outputs_mean"}
    bad = [p for p in pts if p["violates"]]
    assert bad and not any(p["pareto"] for p in bad) and any(p["pareto"] for p in pts)
    front = [p for p in pts if p["pareto"]]
    for p in front:  # maximised accuracy: no feasible point has more accuracy and less delay
        assert not any(q["fi"] > p["fi"] and q["delay"] < p["delay"] for q in pts if not q["violates"])
    fig = tradeoff(other)
    texts = " ".join([fig._suptitle.get_text() if fig._suptitle else ""] + [a.get_title() for a in fig.axes]
                     + [t.get_text() for a in fig.axes for t in a.get_legend().get_texts()] if fig.axes[0].get_legend()
                     else [])
    assert "violates detection.delay_mean<=" in texts and seed_counts(other) in texts


def test_a_search_folders_report_section_states_the_recommendation(study):
    from meshsim.plots.sweeps import open_sweep, search_info
    from meshsim.plots.sweeps.report import _search_section

    out, _ = study
    rec = json.loads((out / "recommended.json").read_text())
    sd = open_sweep(out)
    page = _search_section(sd, search_info(sd), sd.names())
    assert "Recommended" in page and rec["set"] in page and f"{rec['seeds']} seeds" in page
    assert "detection.missed==0" in page and "worst seed 0" in page
    assert "detection.false_isolation_rate to [0, 1]" in page  # a clipped interval says so


@pytest.mark.slow  # ~10 s: every figure of the report
def test_a_search_folders_report_states_the_recommendation(study, tmp_path):
    pytest.importorskip("matplotlib")
    out, _ = study
    rec = json.loads((out / "recommended.json").read_text())
    res = CliRunner().invoke(main, ["report", str(out), "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output + res.stderr
    page = (tmp_path / "r.html").read_text()
    assert "<h2>Search</h2>" in page and "Recommended" in page and rec["set"] in page
    assert "★ recommended" in page and "Trade-off of the search: detection.delay_mean against " \
        "detection.false_isolation_rate" in page
    assert "detection.missed==0" in page and "worst seed 0" in page
