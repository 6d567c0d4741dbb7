"""Compile meshsim's hot modules with mypyc, in place, for the compiled-path measurements of docs/scaling.md
(issue 33 item 3). The pure-Python package stays the default: nothing installs this build.

    python tests/benchmarks/build_compiled.py          # builds *.so beside the modules below (~40 s of mypy + gcc)
    python tests/benchmarks/build_compiled.py --clean  # removes them again: back to the pure path

A compiled module is imported in place of its .py as long as its .so is there; outputs are byte-identical to the pure
path's (checked by hand on the 4,032-task slice, docs/scaling.md). Needs mypy (the test extra) and gcc.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the modules of the per-task path (profile: docs/scaling.md); meshsim/protocols/meshheal/__init__.py holds
#: pydantic models, which mypyc does not compile
MODULES = ["meshsim/core/sim.py", "meshsim/backends/fake.py", "meshsim/backends/profiles.py",
           "meshsim/backends/fake_review.py", "meshsim/backends/texts.py", "meshsim/net/node.py",
           "meshsim/net/links.py", "meshsim/net/reliable.py", "meshsim/net/routing.py", "meshsim/net/network.py",
           "meshsim/protocols/execution.py", "meshsim/protocols/llm.py", "meshsim/protocols/ledger.py",
           "meshsim/protocols/meshheal/agent.py", "meshsim/protocols/meshheal/review.py",
           "meshsim/protocols/meshheal/detector.py"]

_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
setup(name="meshsim-compiled", ext_modules=mypycify(["--config-file", sys.argv.pop()] + sys.argv[3:],
                                                    opt_level="3"), script_args=["build_ext", "--inplace"])
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clean", action="store_true", help="remove the compiled modules (back to pure Python)")
    args = ap.parse_args()
    built = sorted(p for p in (ROOT / "meshsim").rglob("*.so")) + sorted(ROOT.glob("*__mypyc*.so"))
    if args.clean:
        for p in built:
            p.unlink()
        print(f"removed {len(built)} compiled files")
        return
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


if __name__ == "__main__":
    main()
