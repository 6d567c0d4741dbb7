"""What `meshsim run` prints (issue 32): results in words, never a raw None, an isolation before a
degradation labelled so, a collapse that names what collapsed, the folder and the next commands,
progress lines off a terminal, a live bar with an ETA on one."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meshsim.simulate.console as console
from meshsim.cli import main
from meshsim.simulate.console import ProgressLines, collapse_line, next_steps, seed_lines
from tests.helpers import cli_runner as _runner

ROOT = Path(__file__).resolve().parents[2]
STAGGERED = str(ROOT / "scenarios/meshheal/staggered-math.yaml")


def _run(*args: str):
    res = _runner().invoke(main, ["run", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


# ------------------------------------------------------------------ no raw None, on real runs


@pytest.mark.parametrize("scenario", ["meshheal/staggered-math", "meshheal/persistent-math", "sac/sac-complete-7",
                                      "routing/sparse-failures", "adversarial/frame-6"])
def test_no_raw_none_in_a_shipped_scenarios_console_output(scenario, tmp_path):
    res = _run(str(ROOT / f"scenarios/{scenario}.yaml"), "--smoke", "--out", str(tmp_path / "r"))
    assert res.stdout.strip() and "None" not in res.stdout and "None" not in res.stderr
    assert "next: meshsim report" in res.stdout


_maybe_int = st.one_of(st.none(), st.integers(0, 700))
_episode = st.fixed_dictionaries({
    "degraded_at": _maybe_int, "isolated_at": _maybe_int, "recovered_at": _maybe_int,
    "detection_delay": _maybe_int, "detection_delay_outputs": _maybe_int, "closure": st.booleans(),
    "reintegration_delay": _maybe_int, "reintegrated_at": _maybe_int})
_summary = st.fixed_dictionaries({
    "tasks": _maybe_int, "sim_time": st.one_of(st.none(), st.floats(0, 1e6)), "unanswered": _maybe_int,
    "accuracy": st.one_of(st.none(), st.fixed_dictionaries({"overall": st.one_of(st.none(), st.floats(0, 1))})),
    "agents": st.dictionaries(st.sampled_from([f"A{i}" for i in range(1, 12)]), _episode, max_size=8),
    "detection": st.fixed_dictionaries({
        "false_isolations": _maybe_int, "ever_healthy_agents": _maybe_int, "missed": _maybe_int,
        "isolated_before_degradation": _maybe_int, "delay_mean": st.one_of(st.none(), st.floats(0, 100)),
        "delay_outputs_mean": st.one_of(st.none(), st.floats(0, 100)),
        "falsely_isolated": st.lists(st.sampled_from(["A1", "A2", "A7"]), max_size=3)}),
    "collapse": st.fixed_dictionaries({"occurred": st.booleans(), "first_at": _maybe_int, "tasks": _maybe_int,
                                       "spans": st.lists(st.fixed_dictionaries({"ability": st.text("xyz", min_size=1)}),
                                                         max_size=3)}),
    "iaa": st.one_of(st.none(), st.floats(0, 1)), "faa": st.one_of(st.none(), st.floats(0, 1)),
    "bfti": st.one_of(st.none(), st.floats(-1, 1)), "h_majority": st.one_of(st.none(), st.floats(0, 1))})


@settings(max_examples=60, deadline=None)
@given(_summary)
def test_a_summary_with_missing_values_never_prints_none(s):
    """Missing values (None in summary.json: not detected, not recovered, no data) are said in words."""
    lines = seed_lines(s, reference="paper: none; see docs/validation.md")
    assert lines and all(line and "None" not in line for line in lines)


# ------------------------------------------------------------------ what the numbers mean


def test_an_agent_isolated_before_it_degraded_is_labelled_so(tmp_path):
    """Smoke staggered MATH, seed 1: A3 is (falsely) isolated at task 44, before its degradation at 85,
    so its detection delay 0 is no detection; the console says so, with the task of that isolation.
    Without the scenario's Tab. C5 warm-up (42 smoke tasks), as measured: the case needs detection early."""
    out = tmp_path / "r"
    res = _run(STAGGERED, "--smoke", "--seed", "1", "--set", "protocol.params.warmup=0", "--out", str(out))
    a3 = json.loads((out / "summary.json").read_text())["agents"]["A3"]
    assert a3["detection_delay"] == 0 and a3["degraded_at"] == 85  # the case the label is for
    states = [json.loads(x) for x in gzip.open(out / "states.jsonl.gz", "rt")]
    since = [s["task"] for s in states if s["agent"] == "A3" and s["task"] < 85][-1]
    assert [s["new"] for s in states if s["agent"] == "A3" and s["task"] == since][-1] == "isolated"
    (line,) = [x for x in res.stdout.splitlines() if x.strip().startswith("A3 ")]
    assert f"isolated before it degraded (at task {since}, while healthy)" in line
    assert "detected" not in line and "no closure" in line  # it was let back in while degraded
    # the false-isolation line counts it and says what the paper reports
    (fi,) = [x for x in res.stdout.splitlines() if "isolated while healthy" in x]
    assert "A3" in fi and "before its own degradation" in fi
    assert "paper: none; see docs/validation.md in meshsim's source" in fi  # a wheel holds no docs/


def test_without_the_states_table_the_label_still_says_before():
    s = {"agents": {"A3": {"degraded_at": 85, "isolated_at": 85, "detection_delay": 0,
                           "detection_delay_outputs": 0, "closure": True, "recovered_at": None}}}
    (_, line) = seed_lines(s)
    assert line.startswith("A3 degraded at task 85: isolated before it degraded, so no detection delay")


def test_a_detection_and_a_missed_agent_in_words():
    s = {"tasks": 630, "agents": {
        "A5": {"degraded_at": 127, "isolated_at": 135, "detection_delay": 8, "detection_delay_outputs": 1,
               "closure": True, "recovered_at": 379, "reintegration_delay": None},
        "A10": {"degraded_at": 127, "isolated_at": None, "detection_delay": None, "recovered_at": None}},
        "detection": {"false_isolations": 2, "ever_healthy_agents": 6, "falsely_isolated": ["A1", "A2"]}}
    lines = seed_lines(s, reference="paper: none; see docs/validation.md")
    assert lines[1] == ("A5 degraded at task 127: isolated 8 tasks later (1 own output), stayed isolated until it "
                        "recovered at 379, not back in normal routing by the end of the stream (task 630)")
    assert lines[2] == "A10 degraded at task 127: never isolated (missed)"
    assert lines[3] == ("2 of 6 agents isolated while healthy at some point (false isolations: A1, A2; "
                        "paper: none; see docs/validation.md)")


def test_a_collapse_line_names_the_abilities_that_collapsed():
    s = {"collapse": {"occurred": True, "first_at": 140, "tasks": 25,
                      "spans": [{"ability": "algebra", "start": 140}, {"ability": "geometry", "start": 150}]}}
    line = collapse_line(s)
    assert line.startswith("COLLAPSE: every healthy holder of abilities 'algebra', 'geometry' isolated at once, "
                           "from task 140 for 25 tasks")
    assert "docs/meshheal.md#collapse in meshsim's source" in line
    assert collapse_line({"collapse": {"occurred": False}}) is None
    assert "None" not in collapse_line({"collapse": {"occurred": True, "spans": [{"ability": None}]}})


# ------------------------------------------------------------------ the end of a run


@pytest.mark.slow  # (waits on deadlines or runs whole commands: the slow phase keeps it)
def test_the_end_of_a_run_names_the_folder_and_the_next_commands(tmp_path):
    out = tmp_path / "my run"
    res = _run(STAGGERED, "--smoke", "--seed", "3", "--out", str(out))
    tail = res.stdout.splitlines()[-4:]
    assert tail[0] == f"results in {out}/ (docs/outputs.md in meshsim's source says what each file holds)"
    assert tail[1].startswith(f"next: meshsim report '{out}'")  # quoted: pasted into a shell as is
    assert tail[2].strip().startswith(f"meshsim plot '{out}'")
    assert tail[3].strip().startswith(f"meshsim explain '{out}'")  # this seed isolated healthy agents
    # the commands it names work on that folder
    rep = _runner().invoke(main, ["report", str(out)], catch_exceptions=False)
    assert rep.exit_code == 0 and (out / "report.html").exists()


def test_a_quiet_run_prints_nothing_and_a_plotted_run_does_not_suggest_the_report(tmp_path):
    res = _run(STAGGERED, "--smoke", "--seed", "3", "--out", str(tmp_path / "q"), "-q")
    assert res.stdout == "" and res.stderr == ""
    assert next_steps(Path("r"), report_written=True)[1].startswith("next: meshsim plot r")
    assert not any("meshsim report" in x for x in next_steps(Path("r"), report_written=True))
    # called as README's first command does, outside the venv: the commands say how to call it again
    assert next_steps(Path("r"), prog=".venv/bin/meshsim")[1] == \
        "next: .venv/bin/meshsim report r   (report.html: tables and every figure)"


# ------------------------------------------------------------------ progress off a terminal


def test_progress_lines_off_a_terminal_one_per_interval(tmp_path, monkeypatch):
    """CliRunner's stderr is not a terminal: plain lines on stderr, none on stdout, none with -q."""
    monkeypatch.setattr(console, "PROGRESS_EVERY", 0.0)
    res = _run(STAGGERED, "--smoke", "--seeds", "1,2", "--out", str(tmp_path / "r"))
    err = res.stderr.splitlines()
    assert err[0].startswith("meshheal-staggered-math: 2 runs (seeds 1,2)")  # the plan line, first
    prog = [x for x in err[1:] if re.fullmatch(r"meshheal-staggered-math: \d+% done \(seed [12] of 2\), "
                                               r"\d+ s elapsed(, about \d+ s left)?", x)]
    assert len(prog) > 10 and len(prog) == len(err) - 1
    assert "done" not in res.stdout
    quiet = _run(STAGGERED, "--smoke", "--seeds", "1,2", "--out", str(tmp_path / "q"), "-q")
    assert quiet.stderr == ""


def _on_a_terminal(args: list[str], cwd: Path) -> str:
    """``meshsim ARGS`` in a child whose stdout and stderr are a pseudo-terminal (as in a shell), and
    everything it drew there."""
    import os
    import subprocess
    import sys

    master, slave = os.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "meshsim", *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, cwd=cwd, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=300) == 0, b"".join(chunks).decode(errors="replace")[-2000:]
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.slow  # a child process; a few seconds
def test_an_eta_on_a_terminal_that_updates(tmp_path):
    """On a terminal `meshsim run` draws a live bar with the time left (issue 32 item 3), redrawn as the
    run goes: more than one frame, the percentage growing, an ETA with a time in it."""
    out = _on_a_terminal(["run", STAGGERED, "--smoke", "--seeds", "1-3", "--out", str(tmp_path / "r")], tmp_path)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)  # the bar's cursor moves and colours
    frames = re.findall(r"(\d+\.\d)% +(\d+:\d\d:\d\d|-:--:--) ETA (\d+:\d\d:\d\d|-:--:--)", text)
    assert len(frames) >= 2, text[-2000:]
    percents = [float(p) for p, _, _ in frames]
    assert len(set(percents)) >= 2 and max(percents) > min(percents), frames
    assert any(re.fullmatch(r"\d+:\d\d:\d\d", eta) for _, _, eta in frames), frames  # a time, not only -:--:--
    assert "seed 1:" in text and "% done" not in text  # the results follow; no plain progress lines


def test_progress_lines_come_every_interval_of_wall_time_with_the_time_left():
    now = [0.0]
    got: list[str] = []
    p = ProgressLines("x", got.append, seeds=1, first="plan", clock=lambda: now[0], every=10.0)
    for k in range(1, 101):  # one task per second
        now[0] = float(k)
        p("tasks", k, 100)
    assert got[0] == "plan" and len(got) == 1 + 9  # at 11, 21, ..., 91 s
    assert got[1] == "x: 11% done, 10 s elapsed, about 81 s left"
    assert ProgressLines("x", got.append, seeds=5).line(0.5, 600) == "x: 50% done (seed 3 of 5), 10 min elapsed, " \
                                                                     "about 10 min left"


# ------------------------------------------------------------------ typos at first contact


@pytest.mark.parametrize("arg, close", [
    ("meshheal/staggered-mth", ["meshheal/staggered-math"]),
    ("staggered-mth", ["compare/staggered-math", "meshheal/staggered-math"]),
    ("scenarios/meshheal/staggered-mth.yaml", ["meshheal/staggered-math"]),
])
@pytest.mark.parametrize("command", [["run"], ["validate"], ["sweep", "--grid", "protocol.params.alpha=1"]])
def test_a_mistyped_example_name_gets_the_close_names_and_a_pointer(tmp_path, monkeypatch, arg, close, command):
    monkeypatch.chdir(tmp_path)
    res = _runner().invoke(main, [command[0], arg, *command[1:]])
    assert res.exit_code == 2
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: {arg}: scenario file not found, nor a shipped example of that name")
    assert "(did you mean " + " or ".join(f"'{c}'" for c in close) + "?)" in err
    assert "'meshsim scenarios' lists the examples" in err


def test_a_name_close_to_nothing_still_points_at_the_list(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = _runner().invoke(main, ["run", "nosuch.yaml"])
    assert res.exit_code == 2
    assert res.stderr.strip() == ("error: nosuch.yaml: scenario file not found, nor a shipped example of that "
                                  "name; 'meshsim scenarios' lists the examples")
    res = _runner().invoke(main, ["scenarios", "copy", "meshheal/staggerd-math"])
    assert res.exit_code == 2 and "(did you mean 'meshheal/staggered-math'?)" in res.stderr


def test_a_mistyped_backend_profile_lists_the_profiles_on_one_line(tmp_path, monkeypatch):
    from meshsim.core.bundled import bundled

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(Path(STAGGERED).read_text().replace("fake-default", "fake-defualt"))
    assert "fake-defualt" in (tmp_path / "s.yaml").read_text()
    res = _runner().invoke(main, ["validate", "s.yaml"])
    assert res.exit_code == 2
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: s.yaml: backend.profile: backend profile not found")
    shipped = sorted(p.stem for p in bundled("backends").glob("*.yaml"))
    assert "fake-default" in shipped
    assert f"did you mean 'fake-default'?; profiles: {', '.join(shipped)} (got 'fake-defualt')" in err
    # a profile of the user's own, in ./backends, is listed too
    (tmp_path / "backends").mkdir()
    (tmp_path / "backends" / "mine.yaml").write_text("kind: fake\n")
    err = _runner().invoke(main, ["validate", "s.yaml"]).stderr
    assert "profiles: " in err and "mine" in err.split("profiles: ")[1]
