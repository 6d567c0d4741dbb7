"""Issue 22: record tables streamed to the run folder as their rows close.

* the streamed tables are the bytes the in-memory path writes (sequential and
  Poisson arrivals, MeshHeal and a baseline on the shared execution layer);
* a failed or interrupted run leaves no table (and no temp file) behind;
* the summary's running counts equal the list computations they replaced, bit
  for bit (hypothesis), and a run holds no closed row once it handed it on.
"""
from __future__ import annotations

import gc
import math
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meshsim
from meshsim.core.errors import MeshsimError
from meshsim.protocols.ledger import ExactSum, ReviewLedger, TaskLedger
from meshsim.io.records import TableWriter, read_records, write_records
from meshsim.io.runfolder import comparable_files

ROOT = Path(__file__).resolve().parents[2]
MESHHEAL = ROOT / "scenarios" / "meshheal" / "staggered-math.yaml"


def _in_memory_folder(sc, seed: int, dest: Path) -> dict[str, bytes]:
    """The record tables of a run without a folder (rows kept in lists), written as the
    runner wrote them before issue 22: one write_records per table at the end."""
    res = meshsim.run(sc, seed=seed)
    dest.mkdir()
    fmt = sc.output.format
    write_records(dest, "events.jsonl", res.records, fmt)
    for name, rows in res.tables.items():
        write_records(dest, name, rows, fmt)
    return {p.name: p.read_bytes() for p in dest.iterdir()}


def _tables(folder: Path) -> dict[str, bytes]:
    return {k: v for k, v in comparable_files(folder).items() if ".jsonl" in k}


@pytest.mark.parametrize("overrides", [
    [],
    # tasks close out of index order: tasks.jsonl still in index order
    pytest.param(["tasks.arrival=poisson(0.05)"], marks=pytest.mark.slow),
    pytest.param(["output.format=jsonl", "output.trace=states"], marks=pytest.mark.slow),
])
def test_streamed_tables_are_the_in_memory_bytes(tmp_path, overrides):
    sc = meshsim.load_scenario(MESHHEAL, overrides, smoke=True)
    streamed = meshsim.run(sc, seed=2, out=tmp_path / "run")
    assert streamed.tables == {}  # nothing kept: the folder has them
    ref = _in_memory_folder(meshsim.load_scenario(MESHHEAL, overrides, smoke=True), 2, tmp_path / "ref")
    got = _tables(tmp_path / "run")
    assert set(got) == set(ref) and {n.split(".")[0] for n in got} == {"events", "tasks", "states", "reviews"}
    assert got == ref
    assert len(read_records(tmp_path / "run", "tasks.jsonl")) == streamed.summary["tasks"]


def test_poisson_rows_in_index_order(tmp_path):
    sc = meshsim.load_scenario(MESHHEAL, ["tasks.arrival=poisson(0.05)"], smoke=True)
    meshsim.run(sc, seed=2, out=tmp_path)
    rows = read_records(tmp_path, "tasks.jsonl")
    ends = [r["end"] for r in rows]
    assert [r["index"] for r in rows] == sorted(r["index"] for r in rows)
    assert ends != sorted(ends)  # the closes really came out of order


@pytest.mark.slow
@pytest.mark.parametrize("method", ["agentnet", "symphony"])
def test_baseline_streams_the_same_bytes(tmp_path, method):
    path = ROOT / "scenarios" / "compare" / "persistent-bbh.yaml"
    sc = meshsim.load_scenario(path, [f"protocol.name={method}"], smoke=True)
    meshsim.run(sc, seed=1, out=tmp_path / "run")
    ref = _in_memory_folder(meshsim.load_scenario(path, [f"protocol.name={method}"], smoke=True), 1,
                            tmp_path / "ref")
    assert _tables(tmp_path / "run") == ref and "exclusions.jsonl.gz" in ref


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".jsonl" in p.name or p.name.endswith(".tmp"))


def test_failed_run_leaves_no_table(tmp_path):
    # the event budget ends the run mid-stream, after many rows were streamed
    sc = meshsim.load_scenario(MESHHEAL, ["limits.events=3000"], smoke=True)
    with pytest.raises(MeshsimError, match="limits.events"):
        meshsim.run(sc, seed=2, out=tmp_path)
    assert _leftovers(tmp_path) == []
    assert (tmp_path / "error.txt").is_file() and not (tmp_path / "summary.json").exists()


def test_interrupted_run_leaves_no_table(tmp_path):
    sc = meshsim.load_scenario(MESHHEAL, smoke=True)

    def ctrl_c(kind, done, total):
        if done > 0.5 * total:
            raise KeyboardInterrupt

    with pytest.raises(meshsim.simulate.runner.Interrupted):
        meshsim.run(sc, seed=2, out=tmp_path, progress=ctrl_c)
    assert _leftovers(tmp_path) == [] and not (tmp_path / "summary.json").exists()
    meshsim.run(sc, seed=2, out=tmp_path)  # and the rerun completes it
    assert (tmp_path / "summary.json").is_file() and "tasks.jsonl.gz" in _leftovers(tmp_path)


def test_table_writer_abort_and_commit(tmp_path):
    w = TableWriter(tmp_path)
    w.add("tasks.jsonl", {"index": 1})
    w.extend("states.jsonl", [])
    assert _leftovers(tmp_path) and all(n.endswith(".tmp") for n in _leftovers(tmp_path))
    w.abort()
    assert _leftovers(tmp_path) == []
    w = TableWriter(tmp_path, "jsonl")
    w.extend("tasks.jsonl", ({"index": i} for i in range(5000)))  # more than one write chunk
    w.extend("states.jsonl", [])
    w.commit()
    assert _leftovers(tmp_path) == ["states.jsonl", "tasks.jsonl"]
    assert [r["index"] for r in read_records(tmp_path, "tasks.jsonl")] == list(range(5000))


# -- the running counts ---------------------------------------------------------------------------

_floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=100, deadline=None)
@given(xs=st.lists(st.one_of(_floats, st.floats(0, 1), st.integers(-10 ** 6, 10 ** 6)), max_size=60))
def test_exact_sum_mean_is_fmean(xs):
    acc = ExactSum()
    for x in xs:
        acc.add(x)
    assert acc.mean() == (statistics.fmean(xs) if xs else None)
    assert acc.total() == math.fsum(xs)


def _old_review_audit(review_rows, task_rows, tau):
    """The list form of metrics.review_audit before issue 22 (rows in memory), kept as the oracle."""
    def _mean(xs):
        xs = [x for x in xs if x is not None]
        return statistics.fmean(xs) if xs else None

    def frac(k, n):
        return k / n if n else None

    reviews = [r for r in review_rows if r["q0"] is not None]
    pos = [r for r in reviews if r["degraded"]]
    neg = [r for r in reviews if not r["degraded"]]

    def count(rows, pred):
        return sum(1 for r in rows if pred(r))

    flagged_pos = [r for r in pos if r["q0"] <= tau]
    flagged_neg = [r for r in neg if r["q0"] <= tau]
    final_low = lambda r: r["q"] is not None and r["q"] <= tau  # noqa: E731
    fin_to = [r for r in review_rows if r["takeover"] and r["action"] == "finalize"]
    wrong_in = [r for r in fin_to if r["output_correct"] is False]
    right_in = [r for r in fin_to if r["output_correct"] is True]
    changed = [r for r in wrong_in if r.get("answer_changed")]
    task_ok = {t["index"]: bool(t["correct"]) for t in task_rows}
    con_to = [r for r in review_rows if r["takeover"] and r["action"] == "contribute" and r["task"] in task_ok]
    takeover = {
        "count": sum(1 for r in review_rows if r["takeover"]), "finalize": len(fin_to),
        "wrong_entering": len(wrong_in), "wrong_fixed": count(wrong_in, lambda r: r["takeover_correct"] is True),
        "wrong_changed": len(changed), "changes_correct": count(changed, lambda r: r["takeover_correct"] is True),
        "right_entering": len(right_in), "right_broken": count(right_in, lambda r: r["takeover_correct"] is False),
        "contribute": len(con_to), "contribute_final_correct": count(con_to, lambda r: task_ok[r["task"]]),
    }
    takeover.update(
        wrong_fixed_rate=frac(takeover["wrong_fixed"], len(wrong_in)),
        wrong_changed_rate=frac(len(changed), len(wrong_in)),
        changes_correct_rate=frac(takeover["changes_correct"], len(changed)),
        right_broken_rate=frac(takeover["right_broken"], len(right_in)),
        contribute_final_correct_rate=frac(takeover["contribute_final_correct"], len(con_to)))
    return {
        "initial_score_healthy": _mean([r["q0"] for r in neg]),
        "initial_score_degraded": _mean([r["q0"] for r in pos]),
        "initial_score_gap": (_mean([r["q0"] for r in neg]) - _mean([r["q0"] for r in pos])) if neg and pos else None,
        "outputs_healthy": len(neg), "outputs_degraded": len(pos),
        "initial_recall": frac(len(flagged_pos), len(pos)), "initial_false_alarm": frac(len(flagged_neg), len(neg)),
        "committee_rate_degraded": frac(count(pos, lambda r: r["committee"]), len(pos)),
        "committee_rate_healthy": frac(count(neg, lambda r: r["committee"]), len(neg)),
        "committee_recall": frac(count(pos, final_low), len(pos)),
        "committee_false_alarm": frac(count(neg, final_low), len(neg)),
        "flagged_healthy": len(flagged_neg), "flagged_degraded": len(flagged_pos),
        "committee_clears_healthy": frac(count(flagged_neg, lambda r: r["committee"] and not final_low(r)),
                                         count(flagged_neg, lambda r: r["committee"])),
        "committee_keeps_degraded": frac(count(flagged_pos, lambda r: r["committee"] and final_low(r)),
                                         count(flagged_pos, lambda r: r["committee"])),
        "takeover": takeover,
    }


_opt_bool = st.sampled_from([None, False, True])
_score = st.one_of(st.none(), st.floats(0, 1))
_review = st.fixed_dictionaries({
    "task": st.integers(1, 12), "agent": st.sampled_from(["A1", "A2", "A10"]),
    "action": st.sampled_from(["contribute", "finalize"]), "degraded": st.booleans(), "q0": _score, "q": _score,
    "committee": st.booleans(), "takeover": st.booleans(), "output_correct": _opt_bool,
    "takeover_correct": _opt_bool}, optional={"answer_changed": _opt_bool})
_task = st.fixed_dictionaries({"index": st.integers(1, 12), "correct": st.booleans()})


@settings(max_examples=100, deadline=None)
@given(reviews=st.lists(_review, max_size=40), tasks=st.lists(_task, max_size=12, unique_by=lambda t: t["index"]),
       tau=st.sampled_from([0.0, 0.4, 0.55, 1.0]))
def test_review_counts_are_the_list_audit(reviews, tasks, tau):
    led = ReviewLedger(tau)
    for r in reviews:
        led.add(r)
    ok = {t["index"]: bool(t["correct"]) for t in tasks}
    assert led.audit(ok.get) == _old_review_audit(reviews, tasks, tau)
    outputs: dict = {}
    for r in reviews:
        if r["q"] is not None:
            outputs.setdefault(r["agent"], []).append(r["task"])
    assert {a: list(v) for a, v in led.outputs.items()} == outputs


_task_row = st.fixed_dictionaries({
    "correct": st.booleans(), "unanswered": st.sampled_from([None, "timeout", "no_route"]),
    "phase": st.sampled_from([None, "healthy", "degraded"]), "calls": st.integers(0, 40),
    "tokens": st.integers(0, 10 ** 7), "producers": st.lists(st.sampled_from(["A1", "A2", "A3"]), max_size=3)})


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(_task_row, max_size=40))
def test_task_counts_are_the_list_means(rows):
    rows = [dict(r, index=i) for i, r in enumerate(rows, 1)]
    led = TaskLedger(len(rows), producers=True)
    for r in rows:
        led.closed(r["index"], r["correct"])
        led.add(r)

    def fmean(xs):
        return statistics.fmean(xs) if xs else None

    assert led.mean(led.correct, led.n) == fmean([float(r["correct"]) for r in rows])
    assert led.mean(led.tokens, led.n) == fmean([r["tokens"] for r in rows])
    assert led.mean(led.calls, led.n) == fmean([r["calls"] for r in rows])
    assert led.unanswered == sum(1 for r in rows if r["unanswered"])
    phases = list(dict.fromkeys(r["phase"] for r in rows if r["phase"]))
    assert list(led.phases) == phases
    for ph, (n, ok, calls, tokens) in led.phases.items():
        mine = [r for r in rows if r["phase"] == ph]
        assert led.mean(ok, n) == fmean([float(r["correct"]) for r in mine])
        assert led.mean(calls, n) == fmean([r["calls"] for r in mine])
        assert led.mean(tokens, n) == fmean([r["tokens"] for r in mine])
    assert all(led.task_ok(r["index"]) is r["correct"] for r in rows) and led.task_ok(len(rows) + 1) is None


# -- rows are let go ------------------------------------------------------------------------------


class _CountingSink:
    """A run folder's writer that keeps nothing: counts rows, and how many closed rows of
    each table are still alive (tracked by the collector) whenever one comes."""

    def __init__(self):
        self.rows: dict[str, int] = {}
        self.alive_max: dict[str, int] = {}

    def add(self, name, row):
        k = self.rows[name] = self.rows.get(name, 0) + 1
        if k % 25 == 0:
            gc.collect()
            key = {"tasks.jsonl": "true_pair", "reviews.jsonl": "reviewer_views"}.get(name)
            if key:
                # a closed task row has its "end", a review row its time "t"
                alive = sum(1 for o in gc.get_objects() if type(o) is dict and key in o and ("end" in o or "t" in o))
                self.alive_max[name] = max(self.alive_max.get(name, 0), alive)

    def extend(self, name, rows):
        for r in rows:
            self.add(name, r)


@pytest.mark.parametrize("count", [84, pytest.param(252, marks=pytest.mark.slow)])
def test_closed_rows_are_not_kept(count):
    """However long the stream, the run holds at most the open task's row and the
    latest review (the one its detector evidence may still extend)."""
    sc = meshsim.load_scenario(MESHHEAL, [f"tasks.count={count}", "phases=[]", "events=[]"], smoke=True)
    from meshsim.simulate.runner import build, prepare, simulate

    sink = _CountingSink()
    res = simulate(build(sc, 1, prepare(sc, [1]).get(1)), None, sink)
    assert res.tables == {} and sink.rows["tasks.jsonl"] == res.summary["tasks"] == count
    assert sink.rows["reviews.jsonl"] > count
    assert sink.alive_max["tasks.jsonl"] <= 2 and sink.alive_max["reviews.jsonl"] <= 2


# -- meshsim report on a large folder: the review index is columns, not dicts ---------------------


def test_review_columns_yield_the_slim_rows(tmp_path):
    from meshsim.plots.folder import RunFolder

    sc = meshsim.load_scenario(MESHHEAL, smoke=True)
    meshsim.run(sc, seed=2, out=tmp_path)
    want: dict = {}
    for r in read_records(tmp_path, "reviews.jsonl"):  # the slim rows as the index kept them before
        slim = {k: r.get(k) for k in RunFolder._SLIM}
        slim["detector"] = [{k: d.get(k) for k in RunFolder._SLIM_DET} for d in r.get("detector") or ()]
        want.setdefault(r["agent"], []).append(slim)
    rf = RunFolder(tmp_path)
    got = {a: list(cols) for a, cols in rf.review_index().items()}
    assert got == want and any(s["detector"] for rows in want.values() for s in rows)
    assert all(len(rf.agent_reviews(a)) == len(rows) for a, rows in want.items())
    assert [type(s["q"]) for s in got["A1"]] == [type(s["q"]) for s in want["A1"]]
