"""The compiled wheel of tests/benchmarks/build_compiled.py (``--wheel``): the pure wheel plus the compiled files,
retagged for the platform, with a RECORD that pip's own checks accept. Building and installing a real one is
.ci/run's step "compiled wheel, from an empty folder"; here a small wheel checks the rewriting itself."""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import zipfile
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "build_compiled.py"
_spec = importlib.util.spec_from_file_location("meshsim_bench_build_compiled", _PATH)
B = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(B)

DI = "meshsim-0.1.0.dist-info"
WHEEL = "Wheel-Version: 1.0\nGenerator: setuptools (80.0)\nRoot-Is-Purelib: true\nTag: py3-none-any\n\n"


def _pure(tmp: Path, wheel_meta: str = WHEEL) -> Path:
    p = tmp / "meshsim-0.1.0-py3-none-any.whl"
    files = {"meshsim/__init__.py": b"x = 1\n", "meshsim/core/sim.py": b"y = 2\n", f"{DI}/METADATA": b"Name: meshsim\n",
             f"{DI}/WHEEL": wheel_meta.encode()}
    with zipfile.ZipFile(p, "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
        z.writestr(f"{DI}/RECORD", "".join(f"{n},,\n" for n in files) + f"{DI}/RECORD,,\n")
    return p


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_retag_adds_the_compiled_files_and_records_every_hash(tmp_path):
    so = tmp_path / "sim.so"
    so.write_bytes(b"\x7fELF compiled")
    target = tmp_path / "out" / "meshsim-0.1.0-cp311-cp311-linux_x86_64.whl"
    target.parent.mkdir()
    B._retag(_pure(tmp_path), target, "cp311-cp311-linux_x86_64", {"meshsim/core/sim.cpython-311.so": so})
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # no .part left
    with zipfile.ZipFile(target) as z:
        names = z.namelist()
        assert "meshsim/core/sim.cpython-311.so" in names and "meshsim/core/sim.py" in names
        wheel = z.read(f"{DI}/WHEEL").decode()
        assert "Root-Is-Purelib: false" in wheel and "Tag: cp311-cp311-linux_x86_64" in wheel
        assert "py3-none-any" not in wheel
        rows = [r.split(",") for r in z.read(f"{DI}/RECORD").decode().splitlines()]
        assert sorted(r[0] for r in rows) == sorted(names)  # every file, once
        for name, digest, size in rows:
            if name == f"{DI}/RECORD":
                assert digest == size == ""
            else:
                data = z.read(name)
                assert (digest, int(size)) == (_hash(data), len(data))


def test_retag_refuses_a_wheel_it_does_not_know(tmp_path):
    target = tmp_path / "meshsim-0.1.0-cp311-cp311-linux_x86_64.whl"
    with pytest.raises(SystemExit, match="unexpected WHEEL metadata"):
        B._retag(_pure(tmp_path, WHEEL.replace("py3-none-any", "py2.py3-none-any")), target, "cp311-cp311-x", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meshsim-0.1.0-py3-none-any.whl"]  # nothing half-written


def test_compare_reads_run_folders_as_check_does(tmp_path, capsys):
    a, b, empty = tmp_path / "a", tmp_path / "b", tmp_path / "empty"
    for d in (a, b, empty):
        d.mkdir()
    for d in (a, b):
        (d / "summary.json").write_text('{"accuracy": 0.75}\n')
        (d / "provenance.json").write_text(f'{{"folder": "{d.name}"}}\n')  # not compared, as in test_determinism
    assert B.compare(a, b) == 0
    (b / "tasks.jsonl.gz").write_bytes(b"")
    assert B.compare(a, b) == 1
    assert f"only in {a}: -; only in {b}: tasks.jsonl.gz" in capsys.readouterr().out
    (b / "tasks.jsonl.gz").unlink()
    (b / "summary.json").write_text('{"accuracy": 0.76}\n')
    assert B.compare(a, b) == 1
    assert "summary.json differs" in capsys.readouterr().out
    bad_folders = ((empty, "no run files"), (tmp_path / "nope", "does not exist"), (a / "summary.json", "not a folder"))
    for bad, why in bad_folders:
        with pytest.raises(SystemExit) as e:
            B.compare(a, bad)
        assert e.value.code == 2 and why in capsys.readouterr().err
