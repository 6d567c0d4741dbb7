"""Every malformed scenario in tests/data/bad_scenarios/ fails cleanly.

Each file starts with ``# expect: <substring>``. Both ``meshsim validate FILE``
and ``meshsim run FILE --out DIR`` must exit 2 with exactly one line on
stderr that starts with ``error:``, names the file and contains the expected
substring (normally the field path) -- never a traceback -- within 10 s and
300 MB, and ``run`` must leave nothing behind (no run folder at all: every
check finishes before the folder is touched).

The corpus holds every input of issue 12's attack list (NaN / infinite
numbers, alias bombs, recursive aliases, 5000-deep nesting, duplicate keys,
GraphML parallel edges and self-loops, events on removed agents, out-of-range
seeds and sizes, ``/dev/zero`` as an input file, names that would escape
``runs/``); command-line cases (``--set PATH=``, ``--seed -1``, unwritable
``--out``) are in :data:`CLI_CASES` below.

The commands run in-process through click's CliRunner (the same ``main`` the
console script calls: its exit code and stderr are the contract), with the
process's resident memory sampled while each runs; a few of the most
expensive inputs also run in a fresh process whose peak memory is measured
by the kernel, and one case goes through the installed ``meshsim`` entry
point (tests/cli/test_cli.py holds more of those).
"""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshsim.cli import main

BAD_DIR = Path(__file__).parents[1] / "data" / "bad_scenarios"
BAD_FILES = sorted(BAD_DIR.glob("*.yaml"))
EXPECT_PREFIX = "# expect: "
GOOD = Path(__file__).resolve().parents[2] / "scenarios" / "routing" / "sparse-failures.yaml"
#: what one bad input may cost (issue 12)
MAX_SECONDS = 10.0
MAX_MB = 300.0


class PeakRSS:
    """Resident memory of this process sampled every 2 ms while the block runs:
    ``grew_mb`` is the peak above the level at entry (C and Rust allocations
    included, which tracemalloc would miss)."""

    def __init__(self):
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._stop = threading.Event()

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self._page

    def _watch(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self._rss())

    def __enter__(self) -> "PeakRSS":
        self.base = self.peak = self._rss()
        self._t = threading.Thread(target=self._watch, daemon=True)
        self._t.start()
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.monotonic() - self.t0
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self._rss())
        self.grew_mb = (self.peak - self.base) / 2 ** 20


def invoke(argv: list[str]):
    # catch_exceptions=False: an exception escaping main() fails the test with its traceback
    with PeakRSS() as cost:
        res = CliRunner().invoke(main, argv, catch_exceptions=False, env={"COLUMNS": "200"})
    assert cost.seconds < MAX_SECONDS, f"{argv}: took {cost.seconds:.1f} s"
    assert cost.grew_mb < MAX_MB, f"{argv}: memory grew by {cost.grew_mb:.0f} MB"
    return res


def meshsim_cmd() -> list[str]:
    """The ``meshsim`` console script of this interpreter, else ``python -m meshsim.cli``."""
    exe = shutil.which("meshsim", path=str(Path(sys.executable).parent)) or shutil.which("meshsim")
    return [exe] if exe else [sys.executable, "-m", "meshsim.cli"]


def expected_substring(path: Path) -> str:
    lines = path.read_text().splitlines()
    first = lines[0] if lines else ""
    assert first.startswith(EXPECT_PREFIX), f"{path.name}: first line must be '{EXPECT_PREFIX}<substring>'"
    expect = first[len(EXPECT_PREFIX):].strip()
    assert expect, f"{path.name}: empty expect substring"
    return expect


def check_one_line(code: int, err: str, path: Path) -> None:
    assert code == 2, f"exit {code}, stderr: {err!r}"
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    line = lines[0]
    assert line.startswith("error:"), line
    assert path.name in line, f"error does not name the file: {line}"
    expect = expected_substring(path)
    assert expect in line, f"expected {expect!r} in: {line}"


def test_folder_has_enough_cases():
    assert len(BAD_FILES) >= 15
    for path in BAD_FILES:  # every file carries its '# expect:' line
        expected_substring(path)


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("path", BAD_FILES, ids=[p.stem for p in BAD_FILES])
def test_bad_scenario_fails_cleanly(path: Path, command: str, tmp_path, monkeypatch):
    monkeypatch.delenv("MESHSIM_DEBUG", raising=False)  # would turn internal errors into tracebacks
    monkeypatch.chdir(tmp_path)
    out = tmp_path / path.stem
    argv = ["validate", str(path)] if command == "validate" else ["run", str(path), "--out", str(out)]
    res = invoke(argv)
    check_one_line(res.exit_code, res.stderr, path)
    if command == "run":
        assert not out.exists(), f"a run that failed its checks left {sorted(p.name for p in out.iterdir())}"
        assert not (tmp_path / "runs").exists()


def test_corpus_holds_every_attack_of_issue_12():
    """The inputs issue 12 lists, by file (so a deleted case is noticed)."""
    names = {p.stem for p in BAD_FILES}
    for stem in ("meshheal-alpha-nan", "meshheal-beta-inf", "duration-inf", "latency-nan", "latency-inf",
                 "latency-lognormal-sigma-huge", "yaml-alias-bomb-in-smoke", "yaml-recursive-alias",
                 "yaml-nesting-5000-deep", "yaml-duplicate-key", "graphml-parallel-edges", "graphml-self-loop",
                 "event-set-link-after-remove-agent", "event-remove-agent-by-task-then-set-link-by-time",
                 "event-add-agent-duplicate-link", "seed-negative", "seed-above-2-128", "topology-n-beyond-c-range",
                 "name-300-characters", "topology-file-dev-zero", "tasks-file-dev-zero", "name-dotdot"):
        assert stem in names, stem
    deep = (BAD_DIR / "yaml-nesting-5000-deep.yaml").read_text()
    assert deep.count("[") == 5000
    bomb = (BAD_DIR / "yaml-alias-bomb-in-smoke.yaml").read_text()
    assert bomb.count("*a8") == 9  # nine levels of nine: 9**9 values when expanded


# ---------------------------------------------------------------- the command line

#: (id, arguments after the scenario, substring of the error line); both validate and run
CLI_CASES = [
    ("set-empty-value", ["--set", "protocol.params="], "--set: protocol.params: empty value"),
    ("set-empty-value-spaces", ["--set", "duration=  "], "--set: duration: empty value"),
    ("seed-negative", ["--seed", "-1"], "'--seed': -1 is not in the range 0<=x<=9223372036854775807"),
    ("seed-above-2-128", ["--seed", str(2 ** 128 + 1)], "'--seed'"),
    ("set-seed-negative", ["--set", "seed=-1"], "seed: Input should be greater than or equal to 0"),
    ("set-alias-bomb", ["--set", "smoke={a: &a [x, x, x, x, x, x, x, x, x, x], b: &b [*a, *a, *a, *a, *a, *a, *a, "
                        "*a, *a, *a], c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b], d: &d [*c, *c, *c, *c, *c, *c, "
                        "*c, *c, *c, *c], e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d], f: &f [*e, *e, *e, *e, *e, "
                        "*e, *e, *e, *e, *e], g: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]}"],
     "aliases expand to more than"),
    ("set-nan", ["--set", "network.links.loss=.nan"], "network.links.loss: must be a finite number"),
    ("set-inf-duration", ["--set", "duration=inf"], "duration: must be a finite duration"),
]


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("args, expect", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_bad_command_line_fails_cleanly(args, expect, command, tmp_path, monkeypatch):
    monkeypatch.delenv("MESHSIM_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    argv = [command, str(GOOD), *args] + (["--out", str(out)] if command == "run" else [])
    res = invoke(argv)
    assert res.exit_code == 2, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in res.stderr, res.stderr
    assert expect in lines[0], lines[0]
    assert not out.exists() and not (tmp_path / "runs").exists()


SHORT = ["--set", "duration=30s", "--set", "events=[]"]


@pytest.mark.parametrize("out, expect", [
    ("/proc/self/x", "/proc/self/x: cannot create the run folder: No such file or directory"),
    ("/proc/version/x", "/proc/version/x: cannot create the run folder: Not a directory"),
    ("/sys/meshsim-run", "/sys/meshsim-run: cannot create the run folder:"),
], ids=["proc-self", "under-a-file", "read-only-sysfs"])
def test_unwritable_out_is_one_line_exit_2(out, expect, tmp_path, monkeypatch):
    """Only ``run`` writes (``validate`` has no --out): path and reason, exit 2."""
    monkeypatch.chdir(tmp_path)
    res = invoke(["run", str(GOOD), *SHORT, "--out", out])
    assert res.exit_code == 2, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and expect in lines[0], res.stderr


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS, errno.EIO], ids=["disk-full", "read-only", "io-error"])
def test_output_disk_failing_mid_write_is_exit_2_with_path_and_reason(err, tmp_path, monkeypatch):
    """The disk fails while the run writes its tables (as a full or read-only
    file system does): exit 2 naming the file and the reason, no summary.json,
    no temp file left; the next run (disk back) completes the folder."""
    import meshsim.io.records as records

    real = records.os.fdopen

    class Failing:
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            raise OSError(err, os.strerror(err))

        def __getattr__(self, name):
            return getattr(self.fh, name)

    def fdopen(fd, *a, **kw):
        return Failing(real(fd, *a, **kw))

    out = tmp_path / "out"
    monkeypatch.setattr(records.os, "fdopen", fdopen)
    res = invoke(["run", str(GOOD), *SHORT, "--out", str(out)])
    monkeypatch.undo()
    assert res.exit_code == 2, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert str(out) in lines[0] and os.strerror(err) in lines[0], lines[0]
    assert not (out / "summary.json").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    again = invoke(["run", str(GOOD), *SHORT, "--out", str(out)])
    assert again.exit_code == 0, again.stderr
    assert (out / "summary.json").is_file()


def test_names_never_leave_runs(tmp_path, monkeypatch):
    """Without --out, a name with slashes and dots still names one folder inside runs/."""
    monkeypatch.chdir(tmp_path)
    res = invoke(["run", str(GOOD), *SHORT, "--set", "name=../../up/and/away"])
    assert res.exit_code == 0, res.stderr
    made = [p for p in tmp_path.rglob("summary.json")]
    assert len(made) == 1 and made[0].parent.parent == tmp_path / "runs", made
    assert not (tmp_path.parent / "up").exists()
    # '..' and 300 characters, without --out: refused before runs/ is made (was: the run folder
    # written into the current directory, and an internal error from a too-long file name)
    shutil.rmtree(tmp_path / "runs")
    for stem in ("name-dotdot", "name-300-characters"):
        res = invoke(["run", str(BAD_DIR / f"{stem}.yaml")])
        check_one_line(res.exit_code, res.stderr, BAD_DIR / f"{stem}.yaml")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# ---------------------------------------------------------------- a fresh process

HEAVY = ["yaml-alias-bomb-in-smoke", "yaml-nesting-5000-deep", "topology-file-dev-zero", "tasks-file-dev-zero",
         "topology-n-beyond-c-range", "topology-complete-links-above-limit"]


def test_heaviest_inputs_in_a_fresh_process_stay_within_10s_and_300mb(tmp_path):
    """The kernel's own count: one process validates and runs the most
    expensive inputs; its peak resident memory (interpreter and imports
    included) and its time stay within the budget."""
    code = ("import sys\nfrom click.testing import CliRunner\nfrom meshsim.cli import main\n"
            "for p in sys.argv[2:]:\n"
            "    for argv in (['validate', p], ['run', p, '--out', sys.argv[1]]):\n"
            "        r = CliRunner().invoke(main, argv)\n"
            "        assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1, (argv, r.exit_code, r.stderr)\n"
            # VmHWM: this process's own peak since exec (ru_maxrss would also count the
            # forking test worker's memory, whatever other tests left there)
            "hwm = open('/proc/self/status').read().split('VmHWM:')[1].split()[0]\n"
            "open(sys.argv[1] + '.hwm', 'w').write(hwm)\n")
    env = dict(os.environ)
    env.pop("MESHSIM_DEBUG", None)
    err_path = tmp_path / "stderr.txt"
    t0 = time.monotonic()
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "o")]
                                + [str(BAD_DIR / f"{s}.yaml") for s in HEAVY],
                                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=tmp_path)
    watchdog = threading.Timer(MAX_SECONDS * len(HEAVY), proc.kill)
    watchdog.start()
    try:
        # wait4: this child's own rusage (ru_maxrss: its peak resident memory in KiB)
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        watchdog.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    assert proc.returncode == 0, err_path.read_text()
    hwm = tmp_path / "o.hwm"
    peak_mb = (int(hwm.read_text()) if hwm.is_file() else usage.ru_maxrss) / 1024
    assert peak_mb < MAX_MB, f"peak {peak_mb:.0f} MB"
    assert wall < MAX_SECONDS * len(HEAVY), f"{wall:.1f} s for {len(HEAVY)} inputs"


@pytest.mark.parametrize("command", ["validate", "run"])
def test_installed_entry_point_fails_cleanly(command: str, tmp_path):
    """The console script itself: exit 2 and one line, for one bad file."""
    path = BAD_FILES[0]
    env = dict(os.environ)
    env.pop("MESHSIM_DEBUG", None)
    argv = ["validate", str(path)] if command == "validate" else ["run", str(path), "--out", str(tmp_path / "o")]
    proc = subprocess.run(meshsim_cmd() + argv, capture_output=True, text=True, env=env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, timeout=120)
    check_one_line(proc.returncode, proc.stderr, path)


@pytest.mark.parametrize("kind", ["fifo", "directory", "oversized", "binary"])
def test_special_and_oversized_topology_files_are_refused_at_once(kind, tmp_path, monkeypatch):
    """A FIFO (no writer: reading would block forever), a directory, a sparse
    300 MiB file (above the 256 MiB cap: refused by its size, never read) and
    a binary file as the topology: one line, exit 2, from validate and run."""
    monkeypatch.chdir(tmp_path)
    topo = tmp_path / "topo.edgelist"
    if kind == "fifo":
        os.mkfifo(topo)
    elif kind == "directory":
        topo.mkdir()
    elif kind == "oversized":
        with open(topo, "wb") as f:
            f.truncate(300 * 2 ** 20)
    else:
        topo.write_bytes(b"A1 A2\n\xff\xfe\x00binary\n")
    sc = tmp_path / f"{kind}.yaml"
    sc.write_text("# expect: network.topology.path\nname: s\nduration: 10s\n"
                  "network: {topology: {kind: file, path: topo.edgelist}}\n")
    expect = {"fifo": "not a regular file", "directory": "is a directory",
              "oversized": "above the 256 MiB limit for topology files", "binary": "not a UTF-8 text file"}[kind]
    for argv in (["validate", str(sc)], ["run", str(sc), "--out", str(tmp_path / "o")]):
        res = invoke(argv)
        check_one_line(res.exit_code, res.stderr, sc)
        assert expect in res.stderr and "topo.edgelist" in res.stderr, res.stderr
    assert not (tmp_path / "o").exists()
