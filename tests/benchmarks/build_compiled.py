"""Compile meshsim's hot modules with mypyc, in place, for the compiled-path measurements of docs/scaling.md
(issue 33 item 3). The pure-Python package stays the default: ``pip install .`` never installs this build.

    python tests/benchmarks/build_compiled.py          # builds *.so beside the modules below (~80 s of mypy + gcc)
    python tests/benchmarks/build_compiled.py --clean  # removes them again: back to the pure path
    python tests/benchmarks/build_compiled.py --check  # pure runs, build, the same runs compiled, compare, clean
    python tests/benchmarks/build_compiled.py --wheel dist/   # a wheel of the package with the build inside
    python tests/benchmarks/build_compiled.py --compare RUN_A RUN_B   # two run folders, file for file

``--wheel DIR`` writes ``meshsim-<version>-cp3XX-cp3XX-<platform>.whl``: the package as ``pip wheel .`` builds it
(every .py stays in) plus the compiled modules (built first, in place, and removed again afterwards unless a
build was there before or ``--keep``), for this interpreter and platform only. ``pip install`` it like any
wheel, on machines of the same kind (a cluster's workers); a run's provenance.json then lists the compiled
modules (``compiled``).

A compiled module is imported in place of its .py as long as its .so is there. ``--check`` is what shows the two
paths give the same outputs (``.ci/run`` runs it): it runs CHECK_RUNS pure, builds, runs them again compiled and
compares the files of each run folder that two runs of one seed write byte for byte the same (all but provenance,
lock and file list, as tests/acceptance/test_determinism.py), and runs BUILD_TESTS (the machine-integer stream,
the written-out draws, the native records, the native clock and events) on the build; then it removes the build (``--keep`` leaves it). It prints each run's CPU
seconds on both paths (information, not a benchmark). A run's provenance.json names the compiled modules it used
(``compiled``). Needs mypy (the test extra) and gcc.
"""
from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[2]
#: the modules of the per-task path (profile: docs/scaling.md); meshsim/protocols/meshheal/params.py holds
#: pydantic models, which mypyc does not compile
MODULES = ["meshsim/core/sim.py", "meshsim/core/calldata.py", "meshsim/backends/fake.py",
           "meshsim/backends/profiles.py", "meshsim/backends/_rng64.py", "meshsim/backends/fake_review.py",
           "meshsim/backends/texts.py", "meshsim/net/node.py", "meshsim/net/messages.py",
           "meshsim/net/links.py", "meshsim/net/reliable.py", "meshsim/net/routing.py", "meshsim/net/network.py",
           "meshsim/protocols/execution.py", "meshsim/protocols/llm.py", "meshsim/protocols/ledger.py",
           "meshsim/protocols/meshheal/agent.py", "meshsim/protocols/meshheal/review.py",
           "meshsim/protocols/meshheal/detector.py", "meshsim/protocols/meshheal/method.py"]

#: the runs --check compares: MeshHeal at paper scale on a short stream (4,032 tasks, a third of the agents degrading
#: half-way: detection and isolation), the README's scenario, Byzantine agents of every kind, and SAC under them
_SLICE = ["--set", "tasks.count=4032", "--set", "phases=[{name: healthy, tasks: 2016}, {name: degraded, tasks: 2016}]",
          "--set", "events=[{at_task: 2017, type: degrade, agents: targets}]"]
#: tests --check runs on the build: the machine-integer stream and the written-out draws draw for draw, the native
#: records' round trips, the native clock and events against SimPy's
BUILD_TESTS = ["tests/backends/test_rng64.py", "tests/unit/test_sim_draws.py", "tests/unit/test_calldata.py",
               "tests/unit/test_simpy_internals.py"]
CHECK_RUNS: dict[str, list[str]] = {
    "scale-576-slice": ["scenarios/meshheal/scale-576-sparse.yaml", *_SLICE],
    "staggered-math": ["scenarios/meshheal/staggered-math.yaml"],
    "mixed-6": ["scenarios/adversarial/mixed-6.yaml"],
    "sac-gray-byzantine": ["scenarios/adversarial/sac-gray-byzantine.yaml"],
}
_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
# the shared runtime goes inside the package (meshsim/_compiled__mypyc.*.so), so that any interpreter that imports
# meshsim finds it (an editable install puts only the package on the path, not the checkout's root)
setup(name="meshsim-compiled", ext_modules=mypycify(["--config-file", sys.argv.pop()] + sys.argv[3:],
                                                    opt_level="3", group_name="meshsim._compiled"),
      script_args=["build_ext", "--inplace"])
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Without an option: build in place (about a minute; needs mypy and gcc).")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--clean", action="store_true", help="remove the compiled modules (back to pure Python)")
    what.add_argument("--check", action="store_true",
                      help="run CHECK_RUNS pure and compiled and compare their run folders (exit 1 if any differs)")
    what.add_argument("--wheel", metavar="DIR", type=Path,
                      help="build, write a wheel of the package with the compiled modules inside to DIR, and remove "
                           "the in-place build again (unless one was there before, or --keep)")
    what.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"), type=Path,
                      help="compare two run folders as --check does (exit 1 if they differ)")
    ap.add_argument("--keep", action="store_true", help="with --check or --wheel: leave the build in place afterwards")
    args = ap.parse_args()
    if args.keep and not (args.check or args.wheel):
        ap.error("--keep goes with --check or --wheel")
    if args.clean:
        print(f"removed {clean()} compiled files")
    elif args.check:
        sys.exit(check(keep=args.keep))
    elif args.wheel:
        print(f"wrote {wheel(args.wheel, keep=args.keep)}")
    elif args.compare:
        sys.exit(compare(*args.compare))
    else:
        build()


def _bad(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def compare(a: Path, b: Path) -> int:
    """0 when two run folders hold the same files, byte for byte (as --check compares them), 1 otherwise."""
    for d in (a, b):
        if not d.exists():
            _bad(f"--compare: {d}: does not exist")
        if not d.is_dir():
            _bad(f"--compare: {d}: not a folder")
        if not _outputs(d):
            _bad(f"--compare: {d}: no run files in it (summary.json, tasks.jsonl.gz, ...)")
    diffs = _differences(a, b)
    print(f"{a} and {b}: " + ("identical" if not diffs else "DIFFERENT: " + "; ".join(diffs)))
    return 1 if diffs else 0


def _so_files() -> list[Path]:
    return sorted(p for p in (ROOT / "meshsim").rglob("*.so")) + sorted(ROOT.glob("*__mypyc*.so"))


def clean() -> int:
    built = _so_files()
    for p in built:
        p.unlink()
    return len(built)


def build() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ini = Path(tmp) / "mypyc.ini"
        # mypyc stops at any message: the project's mypy section reports notes on unused overrides
        ini.write_text("[mypy]\npython_version = 3.11\nfollow_imports = silent\nignore_missing_imports = true\n"
                       "check_untyped_defs = true\n")
        setup = Path(tmp) / "setup.py"
        setup.write_text(_SETUP)
        cmd = [sys.executable, str(setup), "build_ext", "--inplace", *MODULES, str(ini)]
        rc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}).returncode
    if rc:
        sys.exit(f"mypyc build failed (exit {rc})")
    print(f"compiled {len(MODULES)} modules; python tests/benchmarks/build_compiled.py --clean goes back")


def _built() -> list[Path]:
    """The in-place build's files: each module's .so and the shared runtime (exit if one is missing)."""
    out = []
    for mod in [*MODULES, "meshsim/_compiled__mypyc.py"]:  # the last: the shared runtime (no source of its own)
        src = ROOT / mod
        so = sorted(src.parent.glob(src.stem + ".*.so"))
        if len(so) != 1:
            sys.exit(f"the build has {len(so)} compiled files for {mod}, not 1")
        out.append(so[0])
    return out


#: what the package's wheel is built from (pyproject.toml's package data follows meshsim/data's links into
#: scenarios/ and backends/); copied, so that no build/ folder or stale file of the checkout gets in
_SOURCES = ("pyproject.toml", "README.md", "meshsim", "scenarios", "backends")


def wheel(out: Path, keep: bool = False) -> Path:
    """A wheel of the package with the compiled modules inside, tagged for this interpreter and platform.
    Always builds first: a module's .so is a small stub whose date says nothing about the code (that sits in
    the shared runtime), so an older build cannot be told from a current one. The in-place build is removed
    afterwards unless it was there before or ``keep``: a later run from the checkout is pure Python again."""
    _writable(out)
    had = bool(_so_files())
    try:
        build()
        return _wheel(out)
    finally:
        if not (had or keep):
            print(f"removed the in-place build ({clean()} compiled files); --keep leaves it")


def _writable(out: Path) -> None:
    """Exit 2 now, not after a minute's build, when ``out`` cannot take the wheel."""
    if out.exists() and not out.is_dir():
        _bad(f"--wheel: {out}: not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".meshsim-wheel-", suffix=".part"):
            pass
    except OSError as e:
        _bad(f"--wheel: {out}: {e.strerror or e}")


def _wheel(out: Path) -> Path:
    so = _built()
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    tag = f"{py}-{py}-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.egg-info")
        for name in _SOURCES:
            p = ROOT / name
            if p.is_dir():
                shutil.copytree(p, src / name, symlinks=True, ignore=skip)
            else:
                shutil.copy2(p, src / name)
        rc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp, str(src)]).returncode
        if rc:  # pip's own message is above; build isolation fetches setuptools>=68 from the index
            sys.exit(f"pip wheel of the package failed (exit {rc})")
        (pure,) = Path(tmp).glob("meshsim-*-py3-none-any.whl")
        target = out / pure.name.replace("py3-none-any", tag)
        _retag(pure, target, tag, {str(p.relative_to(ROOT)): p for p in so})
    return target


def _retag(pure: Path, target: Path, tag: str, extra: dict[str, Path]) -> None:
    """``pure`` with the ``extra`` files added (archive name -> file), marked a platform wheel (WHEEL) and its
    RECORD rewritten with every file's hash; written to ``target`` whole or not at all."""
    part = target.with_name(target.name + ".part")
    try:
        _rewrite(pure, part, tag, extra)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    part.replace(target)


def _record_line(name: str, data: bytes) -> str:
    """A RECORD row (the wheel format's urlsafe base64 sha256, unpadded, and the size)."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _rewrite(pure: Path, part: Path, tag: str, extra: dict[str, Path]) -> None:
    with zipfile.ZipFile(pure) as zin, zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as zout:
        names = zin.namelist()
        (record,) = [n for n in names if n.endswith(".dist-info/RECORD")]
        (wheel_meta,) = [n for n in names if n.endswith(".dist-info/WHEEL")]
        lines = []
        for n in names:
            if n == record:
                continue
            data = zin.read(n)
            if n == wheel_meta:
                text = data.decode()
                if "Root-Is-Purelib: true" not in text or "Tag: py3-none-any" not in text:
                    sys.exit(f"{pure.name}: unexpected WHEEL metadata:\n{text}")
                data = text.replace("Root-Is-Purelib: true", "Root-Is-Purelib: false").replace(
                    "Tag: py3-none-any", f"Tag: {tag}").encode()
            zout.writestr(zin.getinfo(n), data)
            lines.append(_record_line(n, data))
        for name, path in sorted(extra.items()):
            data = path.read_bytes()
            zout.writestr(name, data)
            lines.append(_record_line(name, data))
        zout.writestr(record, "\n".join(lines + [f"{record},,"]) + "\n")


def _run(name: str, argv: list[str], out: Path) -> float:
    """One run folder from the CLI in a child process: its CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "meshsim", "run", *argv, "--seed", "1", "-q", "-o", str(out / name)],
                   cwd=ROOT, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _outputs(folder: Path) -> list[Path]:
    """A run folder's files that two runs of the same scenario and seed write byte for byte the same (all but
    provenance, lock and file list: ``meshsim.io.runfolder.NOT_COMPARED``), in every seed's folder."""
    from meshsim.io.runfolder import NOT_COMPARED  # here, not above: --clean must work beside a stale build

    return sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and p.name not in NOT_COMPARED)


def _differences(a: Path, b: Path) -> list[str]:
    fa, fb = _outputs(a), _outputs(b)
    if fa != fb:
        only_a, only_b = sorted(map(str, set(fa) - set(fb))), sorted(map(str, set(fb) - set(fa)))
        return [f"only in {a}: {', '.join(only_a) or '-'}; only in {b}: {', '.join(only_b) or '-'}"]
    out = []
    for rel in fa:
        x, y = (a / rel).read_bytes(), (b / rel).read_bytes()
        if x != y:
            where = ""
            if rel.suffix == ".gz":  # say where the text first differs
                tx, ty = gzip.decompress(x).splitlines(), gzip.decompress(y).splitlines()
                k = next((i for i, (u, v) in enumerate(zip(tx, ty)) if u != v), min(len(tx), len(ty)))
                where = f" (first at line {k + 1})"
            out.append(f"{rel} differs{where}")
    return out


def check(keep: bool = False) -> int:
    """Pure runs, build, compiled runs, compare: 0 when every run folder is the same on both paths."""
    removed = clean()
    if removed:
        print(f"removed {removed} compiled files left from an earlier build (the first runs must be pure)")
    with tempfile.TemporaryDirectory() as tmp:
        pure, comp = Path(tmp) / "pure", Path(tmp) / "compiled"
        cpu = {name: [_run(name, argv, pure)] for name, argv in CHECK_RUNS.items()}
        build()
        try:
            for name, argv in CHECK_RUNS.items():
                cpu[name].append(_run(name, argv, comp))
            tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                                    *BUILD_TESTS], cwd=ROOT,
                                   env={**os.environ, "MESHSIM_REQUIRE_COMPILED": "1"}).returncode
        finally:
            if not keep:
                clean()
        bad = 0
        for name in CHECK_RUNS:
            diffs = _differences(pure / name, comp / name)
            bad += bool(diffs)
            p, c = cpu[name]
            print(f"{name:20s} cpu pure {p:6.1f} s, compiled {c:6.1f} s ({p / c:.2f}x): "
                  + ("identical" if not diffs else "DIFFERENT: " + "; ".join(diffs)))
    print("compiled and pure outputs: " + ("identical" if not bad else f"{bad} of {len(CHECK_RUNS)} runs differ"))
    if tests:
        print(f"{' or '.join(BUILD_TESTS)} failed on the compiled build")
    return 1 if bad or tests else 0


if __name__ == "__main__":
    main()
