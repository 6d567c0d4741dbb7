"""A Dask scheduler address is checked before any work (issue 30): a bounded
TCP connect and the handshake a scheduler sends on accepting, together within
docs/sweeps.md's 3 s. A port that accepts and stays silent, or an HTTP server
(which waits for a request), hung a sweep past 40 s; bytes that are not a
handshake made Dask try to allocate a 3 EiB frame.
"""
from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshsim.cli import main
from meshsim.core.errors import InputError
from meshsim.sweep import executors
from meshsim.sweep.executors import CONNECT_TIMEOUT, make_executor
from tests.helpers import serve

pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]
STAGGERED = str(ROOT / "scenarios" / "meshheal" / "staggered-math.yaml")


class _Listener:
    """A TCP port on 127.0.0.1 whose connections get ``reply`` (None: nothing at all)."""

    def __init__(self, reply: bytes | None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.reply, self.held, self.done = reply, [], threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.done.is_set():  # ends with the test
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.held.append(conn)  # held open, silent, until the test ends
            if self.reply is not None:
                try:
                    conn.sendall(self.reply)
                except OSError:
                    pass

    def close(self) -> None:
        self.done.set()
        for c in self.held:
            c.close()
        self.sock.close()


@pytest.fixture
def silent():
    srv = _Listener(None)
    yield f"tcp://127.0.0.1:{srv.port}"
    srv.close()


@pytest.fixture
def http_server():
    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    with serve(H, daemon_threads=True) as srv:
        yield f"tcp://127.0.0.1:{srv.server_address[1]}"


def _refused(address: str) -> tuple[str, float]:
    t0 = time.monotonic()
    with pytest.raises(InputError) as exc:
        make_executor("dask", 1, address)
    return str(exc.value), time.monotonic() - t0


@pytest.mark.parametrize("server", ["silent", "http_server"])
def test_a_silent_port_or_an_http_server_is_refused_within_the_connect_timeout(server, request, monkeypatch):
    """Connect and handshake share one deadline (1 s here, to keep the test short; 3 s by default)."""
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT", 1.0)
    address = request.getfixturevalue(server)
    msg, took = _refused(address)
    assert msg.startswith("--scheduler: cannot reach the Dask scheduler: it accepts connections but sent no "
                          "Dask handshake within 1 s") and address in msg, msg
    assert 0.9 <= took < 2.0, took


@pytest.mark.parametrize("reply", [b"HTTP/1.1 400 Bad Request\r\n\r\n",  # read as a 3 EiB frame by Dask
                                   b"\x00\x00\x00\x10\x00\x00\x00\x00" + b"\x00" * 8,  # a 256 MiB frame
                                   b"\x20\x00\x00\x00\x00\x00\x00\x00" + b"\xff" * 32])  # the size, not a frame table
def test_bytes_that_are_not_a_dask_handshake_are_refused_at_once(reply):
    srv = _Listener(reply)
    try:
        msg, took = _refused(f"tcp://127.0.0.1:{srv.port}")
    finally:
        srv.close()
    assert "it answered, but not with a Dask handshake" in msg, msg
    assert took < CONNECT_TIMEOUT + 1.0, took


@pytest.mark.slow  # (waits on deadlines or runs whole commands: the slow phase keeps it)
def test_the_sweep_command_ends_with_one_line_and_exit_2_before_writing(silent, tmp_path):
    import distributed  # noqa: F401  (imported before the clock starts)

    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--grid", "protocol.params.beta=2.5",
                                    "--executor", "dask", "--scheduler", silent, "--out", str(tmp_path / "s")])
    took = time.monotonic() - t0
    assert res.exit_code == 2 and not res.stdout, res.output
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: --scheduler: cannot reach the Dask scheduler: it accepts connections"), line
    assert not (tmp_path / "s").exists()
    assert CONNECT_TIMEOUT == 3.0  # what docs/sweeps.md promises
    assert took < 15, took  # 3 s for the scheduler, the rest loading the scenario on a busy machine; it hung 40 s+


def test_a_real_scheduler_passes_the_check():
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=0, processes=False, dashboard_address=None, protocol="tcp://",
                           host="127.0.0.1")
    try:
        ex = make_executor("dask", 1, cluster.scheduler_address)
        try:
            assert ex.describe().startswith(f"Dask distributed on scheduler {cluster.scheduler_address}")
        finally:
            ex.close()
    finally:
        cluster.close()
