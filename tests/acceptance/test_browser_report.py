"""Reports in a real browser (issue 32 item 6): tests/browser/check_report.py opens report.html in
headless Chromium and fails a page with a figure that does not load, a console error or a height
over the bound. Slow (a browser start each); skipped without Chromium unless MESHSIM_REQUIRE_BROWSER=1
(.ci/run installs Chromium and sets it)."""
from __future__ import annotations

import base64
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "tests" / "browser" / "check_report.py"
sys.path.insert(0, str(CHECK.parent))
from check_report import find_chromium  # noqa: E402

pytestmark = pytest.mark.slow
if find_chromium() is None and not os.environ.get("MESHSIM_REQUIRE_BROWSER"):
    pytestmark = [pytest.mark.slow, pytest.mark.skip(reason="no Chromium (apt-get install -y chromium)")]


def png(w: int = 40, h: int = 30) -> bytes:
    """A small grey PNG, written with the standard library."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\0" + b"\x80" * w for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def page(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "report.html"
    p.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>t</title></head><body>{body}</body></html>")
    return p


GOOD_IMG = f"<img alt='figure' src='data:image/png;base64,{base64.b64encode(png()).decode()}'>"


def check(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), *map(str, args)], capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)


def test_a_report_with_a_figure_pointing_nowhere_fails(tmp_path):
    p = page(tmp_path / "run", GOOD_IMG + "<img alt='gone' src='figures/nowhere.png'>")
    r = check(p)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("FAIL: ") and "figure 2 did not load" in r.stdout and "nowhere.png" in r.stdout
    assert "figure 1 did not load" not in r.stdout


def test_a_broken_inline_figure_fails_too(tmp_path):
    p = page(tmp_path / "run", "<img alt='cut' src='data:image/png;base64,iVBORw0KGgo='>")
    r = check(p)
    assert r.returncode == 1 and "figure 1 did not load" in r.stdout, r.stdout + r.stderr


def test_a_console_error_or_an_uncaught_exception_fails(tmp_path):
    p = page(tmp_path / "a", GOOD_IMG + "<script>console.error('boom')</script>")
    q = page(tmp_path / "b", GOOD_IMG + "<script>undefinedFunction()</script>")
    r = check(p, q)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "console: boom" in r.stdout and "undefinedFunction" in r.stdout


def test_a_good_page_passes_and_its_height_bound_is_a_parameter(tmp_path):
    p = page(tmp_path / "run", GOOD_IMG + "<div style='height:3000px'></div>")
    shots = tmp_path / "shots"
    r = check(p, "--max-height", 4000, "--shots", shots)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok: ") and "1 figures" in r.stdout
    shot = (shots / "run.png").read_bytes()
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", shot[16:24])[0] == 1280
    r = check(p, "--max-height", 2000)
    assert r.returncode == 1 and "over the bound of 2000 px" in r.stdout


def test_a_page_without_figures_fails(tmp_path):
    r = check(page(tmp_path / "run", "<p>tables only</p>"))
    assert r.returncode == 1 and "no figure" in r.stdout


def test_a_real_run_report_loads_every_figure_without_console_errors(tmp_path):
    from click.testing import CliRunner

    from meshsim.cli import main

    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", str(ROOT / "scenarios/meshheal/staggered-math.yaml"), "--smoke", "-q",
                                    "--plot", "--out", str(out)])
    assert res.exit_code == 0, res.output
    r = check(out / "report.html", "--shots", tmp_path / "shots")
    assert r.returncode == 0, r.stdout + r.stderr
    figures = int(r.stdout.split(": ")[2].split()[0])
    assert figures >= 3, r.stdout
