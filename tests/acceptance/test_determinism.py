"""Same scenario + seed => byte-identical run folders; other seeds differ.

``provenance.json`` (wall-clock times, versions, input hashes) and the lock
file ``.meshsim.lock`` are the only files left out of the comparison
(``meshsim.io.runfolder.NOT_COMPARED``; docs/outputs.md).
"""
from __future__ import annotations

from pathlib import Path

import pytest

import meshsim
from meshsim.io.records import read_records
from meshsim.io.runfolder import NOT_COMPARED, comparable_files
from tests import golden_diff

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "routing" / "sparse-failures.yaml"


def _files(d: Path) -> dict[str, bytes]:
    return comparable_files(d)


def test_same_seed_byte_identical(tmp_path):
    sc = meshsim.load_scenario(SCENARIO, smoke=True)
    meshsim.run(sc, seed=3, out=tmp_path / "a")
    meshsim.run(meshsim.load_scenario(SCENARIO, smoke=True), seed=3, out=tmp_path / "b")
    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert set(a) == {"scenario.resolved.yaml", "summary.json", "events.jsonl.gz"}
    assert a == b
    # exactly the documented files are left out, and they are there
    every = {p.name for p in (tmp_path / "a").iterdir()}
    assert every - set(a) == set(NOT_COMPARED) == {"provenance.json", ".meshsim.lock", ".meshsim-files.json"}


def test_different_seeds_differ(tmp_path):
    sc = meshsim.load_scenario(SCENARIO, smoke=True)
    r1 = meshsim.run(sc, seed=1, out=tmp_path / "a")
    r2 = meshsim.run(sc, seed=2, out=tmp_path / "b")
    assert read_records(tmp_path / "a", "events.jsonl") != read_records(tmp_path / "b", "events.jsonl")
    assert r1.summary["messages"] != r2.summary["messages"]


def test_resolved_scenario_reproduces_the_run(tmp_path):
    sc = meshsim.load_scenario(SCENARIO, smoke=True)
    meshsim.run(sc, seed=4, out=tmp_path / "a")
    again = meshsim.load_scenario(tmp_path / "a" / "scenario.resolved.yaml")
    meshsim.run(again, out=tmp_path / "b")
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_multi_seed_run_writes_aggregate_and_resumes(tmp_path):
    sc = meshsim.load_scenario(SCENARIO, ["seeds=3", "duration=40s", "events=[]"])
    res = meshsim.run(sc, out=tmp_path)
    assert [r.seed for r in res.runs] == [1, 2, 3]
    agg = (tmp_path / "aggregate.json").read_text()
    assert '"messages.total.sent"' in agg
    before = (tmp_path / "seed-2" / "summary.json").stat().st_mtime_ns
    res2 = meshsim.run(sc, out=tmp_path)
    assert all(r.resumed for r in res2.runs)
    assert (tmp_path / "seed-2" / "summary.json").stat().st_mtime_ns == before
    assert res2.aggregate == res.aggregate


#: sha256 over every file of a smoke-size MeshHeal run folder, pinned when the
#: shared execution layer was factored out of MeshHeal (issue 14): the refactor
#: (and every baseline built on it) must not change a byte of MeshHeal's outputs.
#: A change *meant* to alter MeshHeal's behaviour updates these digests and says so, and rewrites the
#: golden files (tests/data/golden/) with `pytest tests/acceptance/test_determinism.py --update-golden`.
#: Updated for issue 10 (backends/fake-default.yaml recalibrated to App. C.5)
#: and issue 11 (every MeshHeal summary gains the network-level `detection`).
#: Updated for issue 18/17 (summary.json only, every record table byte-identical: one
#: false-isolation definition in `detection`, delays in own outputs, the `collapse` section).
#: Updated for issue 19 (scenario.resolved.yaml only: `limits.events` is a new resolved field).
#: Updated for issue 17 (review scores as explicit distributions: byte-identical at the old values;
#: then the reviews of correct finals calibrated to App. C.5's Takeover entry, 32 : 32).
#: Updated for issue 21 item 2 (models.<m>.repair in the shipped profiles: a finalizer reading an
#: unsound draft may re-derive its half; byte-identical with repair 0, tests/protocols/test_repair.py).
#: Updated for issue 34 (staggered-math only: the shipped scenario follows Tab. C5's layout, its
#: healthy phase the App. C.2 warm-up, 42 tasks at smoke size; with protocol.params.warmup=0 the
#: folder is byte-identical to the previous digest, 747c9c2d…).
MESHHEAL_PINNED = {
    ("staggered-math", 2): "3acdfc08eb9a65cbd27e96221450f3bafd2bb859fc3146fb4698cf2180a439da",
    ("persistent-bbh", 1): "4aba3d55d10fede9a7548f85e1b83b13b595a5b63d45532530428cecd00a69e8",
}


def _digest(d: Path) -> str:
    import hashlib

    from meshsim.io.runfolder import comparable_files

    h = hashlib.sha256()
    for name, data in comparable_files(d).items():  # provenance.json and the lock are about the machine
        h.update(name.encode())
        h.update(data)
    return h.hexdigest()


@pytest.fixture(scope="module")
def pinned_runs(tmp_path_factory) -> dict[tuple[str, int], Path]:
    """The run folder of each pinned (scenario, seed), run once for both checks below."""
    root, tmp = SCENARIO.parents[1] / "meshheal", tmp_path_factory.mktemp("pinned")
    out = {}
    for name, seed in MESHHEAL_PINNED:
        out[name, seed] = tmp / f"{name}-seed{seed}"
        meshsim.run(meshsim.load_scenario(root / f"{name}.yaml", smoke=True), seed=seed, out=out[name, seed])
    return out


def test_meshheal_summaries_match_the_golden_files(pinned_runs, update_golden):
    """What changed, readably: the summary and resolved scenario of each pinned run against
    tests/data/golden/ (tests/golden_diff.py; ``pytest --update-golden`` rewrites them)."""
    for (name, seed), run in pinned_runs.items():
        lines = golden_diff.check(golden_diff.golden_dir(name, seed), run, update=update_golden)
        if lines:
            pytest.fail(f"MeshHeal's {name} seed {seed} run differs from its golden files "
                        "(a change meant to alter it: --update-golden, and say why):\n" + golden_diff.report(lines))


def test_meshheal_outputs_are_pinned(pinned_runs):
    """The byte-level guard: every compared file of each pinned run folder, by digest."""
    for (name, seed), run in pinned_runs.items():
        got = _digest(run)
        if got == MESHHEAL_PINNED[name, seed]:
            continue
        lines = golden_diff.check(golden_diff.golden_dir(name, seed), run)
        where = ("what moved, against tests/data/golden/:\n" + golden_diff.report(lines) if lines else
                 "summary.json and scenario.resolved.yaml match tests/data/golden/ (as parsed): the change is "
                 "in the record tables or in those files' bytes")
        raise AssertionError(f"MeshHeal's {name} seed {seed} run folder changed (digest {got}); {where}\n"
                             "(a change meant to alter it: update MESHHEAL_PINNED and the golden files, and say why)")


def test_staggered_without_the_warm_up_is_the_folder_pinned_before_it(tmp_path):
    """Issue 34: the shipped staggered schedule gained Tab. C5's warm-up and nothing else; with
    ``protocol.params.warmup=0`` its smoke run is byte for byte the folder pinned before."""
    root = SCENARIO.parents[1] / "meshheal"
    sc = meshsim.load_scenario(root / "staggered-math.yaml", ["protocol.params.warmup=0"], smoke=True)
    meshsim.run(sc, seed=2, out=tmp_path / "off")
    assert _digest(tmp_path / "off") == "747c9c2d9aa6a5c79b44f2ffd593caeafdf4b32980dd3c640804f02989043f72"
