"""Run folders that cannot mix (issue 12): the lock, the layout, provenance,
resume only on matching inputs, stale temp files, Ctrl-C.

Most tests run the CLI in-process (click's CliRunner); real processes only
where the test is about processes: two runs racing for one folder, a lock
holder killed with SIGKILL, and Ctrl-C (SIGINT) in the middle of a run.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from click.testing import CliRunner

import meshsim
from meshsim.cli import main
from meshsim.io import runfolder
from meshsim.io.runfolder import LOCK_NAME, NOT_COMPARED, RunLock, comparable_files

ROOT = Path(__file__).resolve().parents[2]
ROUTING = ROOT / "scenarios" / "routing" / "sparse-failures.yaml"
SHORT = ["--set", "duration=30s", "--set", "events=[]"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_line(res) -> str:
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def meshsim_cmd() -> list[str]:
    exe = shutil.which("meshsim", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "meshsim.cli"]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("MESHSIM_DEBUG", None)
    return e


def meshheal(tmp_path: Path, profile: str = "fake-default", **extra) -> Path:
    """A six-agent MeshHeal scenario with its own copy of the fake profile."""
    prof = tmp_path / "prof.yaml"
    if not prof.exists():
        shutil.copy(ROOT / "backends" / f"{profile}.yaml", prof)
    data = {"name": "mh", "seed": 1, "network": {"topology": {"kind": "complete", "n": 6}},
            "agents": {"profile": "bbh"}, "protocol": {"name": "meshheal"},
            "backend": {"kind": "fake", "profile": "prof.yaml"},
            "tasks": {"dataset": "bbh", "count": 14, "block": 7}}
    data.update(extra)
    path = tmp_path / "mh.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


# ---------------------------------------------------------------- the lock


def test_two_runs_of_different_scenarios_into_one_out_exactly_one_proceeds(tmp_path):
    """Two processes race for one --out: one runs, the other exits 2 (the lock,
    or, had the first finished already, its completed run of another scenario)."""
    out = tmp_path / "shared"
    procs = [subprocess.Popen(meshsim_cmd() + ["run", str(ROUTING), "--out", str(out), "-q", "--set", "events=[]",
                                               "--set", "duration=200s", "--set", f"network.links.loss={loss}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path,
                              stdin=subprocess.DEVNULL)
             for loss in (0.01, 0.05)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    codes = sorted(c for c, _ in results)
    assert codes == [0, 2], results
    winner = [k for k, (c, _) in enumerate(results) if c == 0][0]
    loser_err = results[1 - winner][1]
    assert len(loser_err.splitlines()) == 1 and str(out) in loser_err, loser_err
    assert "in use by another meshsim run (" in loser_err or "different scenario" in loser_err, loser_err
    # the folder is the winner's alone
    resolved = yaml.safe_load((out / "scenario.resolved.yaml").read_text())
    assert resolved["network"]["links"]["loss"] == (0.01, 0.05)[winner]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"] == "routing-sparse-failures"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_a_held_lock_names_its_holder_and_nothing_is_written(tmp_path):
    out = tmp_path / "busy"
    with RunLock(out).acquire({"scenario": "the-other-one"}):
        res = invoke("run", ROUTING, "--out", out, *SHORT)
        assert res.exit_code == 2
        line = one_line(res)
        assert f"pid {os.getpid()}" in line and "scenario 'the-other-one'" in line and str(out) in line, line
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]
    res = invoke("run", ROUTING, "--out", out, *SHORT)  # released: the next run proceeds
    assert res.exit_code == 0, res.stderr


def test_the_lock_dies_with_its_holder(tmp_path):
    """kill -9 of the holder: the kernel drops the flock; the lock file stays and blocks no one."""
    out = tmp_path / "crashed"
    code = ("import sys, time\nfrom meshsim.io.runfolder import RunLock\n"
            "RunLock(sys.argv[1]).acquire({'scenario': 'doomed'})\nprint('locked', flush=True)\ntime.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True, env=env())
    try:
        assert holder.stdout.readline().strip() == "locked"
        res = invoke("run", ROUTING, "--out", out, *SHORT)
        assert res.exit_code == 2 and f"pid {holder.pid}" in one_line(res)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    assert (out / LOCK_NAME).exists()
    res = invoke("run", ROUTING, "--out", out, *SHORT)
    assert res.exit_code == 0, res.stderr


# ---------------------------------------------------------------- layout


def test_one_seed_of_a_multi_seed_scenario_goes_to_its_seed_folder(tmp_path):
    out = tmp_path / "multi"
    res = invoke("run", ROUTING, "--out", out, *SHORT, "--set", "seeds=2")
    assert res.exit_code == 0, res.stderr
    assert sorted(p.name for p in out.iterdir() if p.name not in NOT_COMPARED) == \
        ["aggregate.json", "seed-1", "seed-2"]
    res = invoke("run", ROUTING, "--out", out, *SHORT, "--set", "seeds=2", "--seed", "7")
    assert res.exit_code == 0, res.stderr
    assert (out / "seed-7" / "summary.json").is_file()
    assert not (out / "summary.json").exists() and not (out / "scenario.resolved.yaml").exists()
    assert f"{out / 'seed-7'}/" in res.output
    # from Python too, into a folder that is already multi-seed
    sc = meshsim.load_scenario(ROUTING, ["duration=30s", "events=[]", "seeds=2"])
    r = meshsim.run(sc, seed=8, out=out)
    assert r.out == out / "seed-8" and (out / "seed-8" / "summary.json").is_file()
    # a fresh folder from the command line: the scenario's layout
    res = invoke("run", ROUTING, "--out", tmp_path / "fresh", *SHORT, "--set", "seeds=2", "--seed", "3")
    assert res.exit_code == 0 and (tmp_path / "fresh" / "seed-3" / "summary.json").is_file()


def test_layouts_never_mix(tmp_path):
    single = tmp_path / "single"
    assert invoke("run", ROUTING, "--out", single, *SHORT).exit_code == 0
    res = invoke("run", ROUTING, "--out", single, *SHORT, "--set", "seeds=2", "--force")
    assert res.exit_code == 2 and "holds a single-seed run" in one_line(res)
    multi = tmp_path / "multi"
    assert invoke("run", ROUTING, "--out", multi, *SHORT, "--set", "seeds=2").exit_code == 0
    res = invoke("run", ROUTING, "--out", multi, *SHORT, "--force")
    assert res.exit_code == 2 and "holds a multi-seed run" in one_line(res)
    # another scenario's seeds beside this one's: refused even with --force
    res = invoke("run", ROUTING, "--out", multi, *SHORT, "--set", "seeds=2", "--set", "seed=5",
                 "--set", "network.links.loss=0.1", "--force")
    assert res.exit_code == 2 and "seed-1/ of a different scenario" in one_line(res)
    res = invoke("run", ROUTING, "--out", multi, *SHORT, "--set", "seeds=2", "--set", "network.links.loss=0.1")
    assert res.exit_code == 2 and "different scenario" in one_line(res)
    assert sorted(p.name for p in multi.iterdir() if p.name not in NOT_COMPARED) == \
        ["aggregate.json", "seed-1", "seed-2"]


def test_stale_temp_files_are_removed_by_the_next_run(tmp_path):
    out = tmp_path / "run"
    assert invoke("run", ROUTING, "--out", out, *SHORT, "--set", "seeds=2").exit_code == 0
    stale = [out / ".aggregate.json.k3x9_q2z.tmp", out / "seed-1" / ".events.jsonl.gz.ab12cd34.tmp"]
    for p in stale:
        p.write_bytes(b"half a file from a run killed with -9")
    keep = out / "seed-1" / "notes.tmp"  # not one of meshsim's temp names
    keep.write_text("mine")
    res = invoke("run", ROUTING, "--out", out, *SHORT, "--set", "seeds=2")
    assert res.exit_code == 0 and res.output.count("(resumed)") == 2, res.output
    assert not any(p.exists() for p in stale) and keep.exists()


# ---------------------------------------------------------------- provenance and resume


def test_provenance_records_versions_inputs_and_times_and_is_not_compared(tmp_path):
    sc = meshheal(tmp_path)
    out = tmp_path / "run"
    assert invoke("run", sc, "--out", out).exit_code == 0
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["meshsim"] == meshsim.__version__ and prov["python"] == sys.version.split()[0]
    assert {"numpy", "networkx", "pydantic", "simpy"} <= set(prov["packages"])
    assert prov["git_commit"] is None or len(prov["git_commit"]) == 40
    sha = hashlib.sha256((tmp_path / "prof.yaml").read_bytes()).hexdigest()
    assert prov["inputs"]["profile"] == {"path": str(tmp_path / "prof.yaml"), "bytes": (tmp_path / "prof.yaml")
                                         .stat().st_size, "sha256": sha}
    assert prov["inputs"]["dataset"]["path"].endswith("bbh.yaml")
    assert prov["scenario"]["sha256"] == hashlib.sha256(sc.read_bytes()).hexdigest()
    assert prov["seed"] == 1 and prov["wall_seconds"] >= 0 and prov["started"] <= prov["finished"]
    # a second run elsewhere: every file but provenance.json (and the lock) byte-identical
    assert invoke("run", sc, "--out", tmp_path / "again").exit_code == 0
    assert comparable_files(out) == comparable_files(tmp_path / "again")
    assert (tmp_path / "again" / "provenance.json").read_bytes() != b""
    # a run with the compiled build names its compiled modules; a pure run has no such field
    assert prov.get("compiled", []) == runfolder.compiled_modules()


def test_compiled_modules_are_the_meshsim_modules_loaded_from_extensions(monkeypatch):
    import types

    fast, pure, other = (types.ModuleType(n) for n in ("meshsim.fastpart", "meshsim.purepart", "elsewhere"))
    fast.__file__ = "/x/meshsim/fastpart.cpython-311-x86_64-linux-gnu.so"
    pure.__file__ = "/x/meshsim/purepart.py"
    other.__file__ = "/x/elsewhere.cpython-311-x86_64-linux-gnu.so"
    before = runfolder.compiled_modules()
    for mod in (fast, pure, other):
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
    assert runfolder.compiled_modules() == sorted(before + ["meshsim.fastpart"])


def test_editing_the_profile_after_a_run_is_refused_then_rerun_with_force(tmp_path):
    sc = meshheal(tmp_path)
    out = tmp_path / "run"
    assert invoke("run", sc, "--out", out).exit_code == 0
    before = (out / "summary.json").read_bytes()
    again = invoke("run", sc, "--out", out)
    assert again.exit_code == 0 and "(resumed)" in again.output  # nothing changed: resumed
    prof = tmp_path / "prof.yaml"
    data = yaml.safe_load(prof.read_text())
    data["models"]["weak"]["skill"] = {k: min(1.0, v + 0.3) for k, v in data["models"]["weak"]["skill"].items()}
    prof.write_text(yaml.safe_dump(data, sort_keys=False))
    res = invoke("run", sc, "--out", out)
    assert res.exit_code == 2
    line = one_line(res)
    assert "cannot be resumed" in line and str(prof) in line and "changed since the run" in line, line
    assert "--force" in line and (out / "summary.json").read_bytes() == before  # untouched
    forced = invoke("run", sc, "--out", out, "--force")
    assert forced.exit_code == 0 and "(resumed)" not in forced.output, forced.stderr
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["inputs"]["profile"]["sha256"] == hashlib.sha256(prof.read_bytes()).hexdigest()
    assert invoke("run", sc, "--out", out).output.count("(resumed)") == 1  # and now it resumes again


def test_another_meshsim_version_or_a_missing_provenance_is_refused(tmp_path, monkeypatch):
    import meshsim.io.runfolder as rf

    out = tmp_path / "run"
    assert invoke("run", ROUTING, "--out", out, *SHORT).exit_code == 0
    monkeypatch.setattr(rf, "_ENV", dict(rf.environment(), meshsim="99.0"))
    res = invoke("run", ROUTING, "--out", out, *SHORT)
    assert res.exit_code == 2 and "made by meshsim 0.1.0, this is 99.0" in one_line(res)
    monkeypatch.undo()
    (out / "provenance.json").unlink()
    res = invoke("run", ROUTING, "--out", out, *SHORT)
    assert res.exit_code == 2 and "no readable provenance.json" in one_line(res)
    assert invoke("run", ROUTING, "--out", out, *SHORT, "--force").exit_code == 0


def test_a_cassette_that_only_grew_still_resumes_an_edited_one_does_not(tmp_path):
    cas = tmp_path / "c.jsonl"
    sc = meshheal(tmp_path, backend={"kind": "replay", "mode": "record-missing", "cassette": "c.jsonl",
                                     "backend": {"kind": "fake", "profile": "prof.yaml"}})
    out = tmp_path / "run"
    assert invoke("run", sc, "--out", out).exit_code == 0
    lines = cas.read_bytes().splitlines(keepends=True)
    with open(cas, "ab") as f:  # another run recording more calls
        f.write(lines[0])
    res = invoke("run", sc, "--out", out)
    assert res.exit_code == 0 and "(resumed)" in res.output, res.stderr
    cas.write_bytes(b"".join([lines[1], lines[0]] + lines[2:]))  # same lines, reordered: not an append
    res = invoke("run", sc, "--out", out)
    assert res.exit_code == 2 and "changed (not only appended to)" in one_line(res)


# ---------------------------------------------------------------- Ctrl-C


#: loaded by the interrupted run's interpreter (PYTHONPATH): before simulating
#: its second seed it writes a marker and waits, so the test's SIGINT lands
#: mid-run at a known point however loaded the machine is (no timing race)
PAUSE_HOOK = """
import os, time
if os.environ.get("MESHSIM_TEST_PAUSE_MARKER"):
    import meshsim.simulate.runner as runner
    real, calls = runner.simulate, []

    def simulate(world, progress=None, tables=None):
        calls.append(1)
        if len(calls) == 2:
            open(os.environ["MESHSIM_TEST_PAUSE_MARKER"], "w").close()
            for _ in range(1200):  # Ctrl-C arrives here, in the middle of seed 2 (short sleeps: the
                time.sleep(0.1)    # main thread sees the signal even if another thread took it)
        return real(world, progress, tables)

    runner.simulate = simulate
"""


def _default_ctrl_c() -> None:
    """In the child before exec: SIGINT at its default, unblocked, whatever
    this process's state (a disposition of SIG_IGN would be inherited, and
    Python then never turns Ctrl-C into KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def test_sigint_keeps_completed_seeds_and_a_rerun_resumes_to_the_uninterrupted_result(tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(PAUSE_HOOK)
    marker = tmp_path / "seed-2-started"
    out = tmp_path / "interrupted"
    sets = ["--set", "seeds=3", "--set", "duration=200s", "--set", "events=[]"]
    args = ["run", str(ROUTING), "--out", str(out), "-q", *sets]
    e = dict(env(), PYTHONPATH=str(hook), MESHSIM_TEST_PAUSE_MARKER=str(marker))
    proc = subprocess.Popen(meshsim_cmd() + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=e, cwd=tmp_path, stdin=subprocess.DEVNULL, preexec_fn=_default_ctrl_c)
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    done = sorted(p.parent.name for p in out.glob("seed-*/summary.json"))
    assert proc.returncode == 130, (proc.returncode, err, done)
    assert done == ["seed-1"], (err, done)  # completed seeds kept, the interrupted one not marked complete
    assert err == "interrupted: 1 of 3 seeds complete, rerun to resume\n"
    assert (out / "seed-2" / "scenario.resolved.yaml").exists() and not (out / "aggregate.json").exists()
    assert not [p for p in out.rglob("*.tmp")]
    seed1 = (out / "seed-1" / "summary.json").stat().st_mtime_ns
    res = invoke(*args)  # rerun: resumes seed 1, runs 2 and 3
    assert res.exit_code == 0, res.stderr
    assert (out / "seed-1" / "summary.json").stat().st_mtime_ns == seed1  # resumed, not rerun
    ref = tmp_path / "uninterrupted"
    meshsim.run(meshsim.load_scenario(ROUTING, [s for s in sets if s != "--set"]), out=ref)
    for s in (1, 2, 3):
        assert comparable_files(out / f"seed-{s}") == comparable_files(ref / f"seed-{s}"), s
    assert (out / "aggregate.json").read_bytes() == (ref / "aggregate.json").read_bytes()
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["seeds"] == {"1": "resumed", "2": "ran", "3": "ran"}


def test_interrupt_while_loading_is_exit_130(tmp_path, monkeypatch):
    """Ctrl-C before any run (click turns it into Abort): 130, not 'aborted' and 1."""
    import meshsim.scenario.model as scenario

    def boom(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(scenario, "load_scenario", boom)
    res = invoke("validate", ROUTING)
    assert res.exit_code == 130 and res.stderr.strip().splitlines()[-1] == "interrupted"


def test_every_seed_is_checked_before_anything_is_written(tmp_path):
    """Seeds 1-4 draw a connected G(8, 0.3), seed 5 does not: validate and run
    both say so, naming the seed, and the run writes no seed at all."""
    sc = tmp_path / "g.yaml"
    sc.write_text(yaml.safe_dump({"name": "g", "seed": 1, "seeds": 5, "duration": "10s",
                                  "network": {"topology": {"kind": "gnp", "n": 8, "p": 0.3}}}))
    out = tmp_path / "run"
    for argv in (["validate", sc], ["run", sc, "--out", out]):
        res = invoke(*argv)
        assert res.exit_code == 2
        line = one_line(res)
        assert "graph is disconnected" in line and "in the graph of seed 5" in line, line
    assert not out.exists()
    assert invoke("validate", sc, "--seed", "3").exit_code == 0
