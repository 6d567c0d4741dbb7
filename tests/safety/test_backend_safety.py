"""Real endpoints that misbehave (issue 12): a server on 127.0.0.1 that echoes
the API key and drips its replies, one that is not there, one that refuses
the key; and replay mode, which never touches the network.
"""
from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.helpers import endpoint_scenario, send_json, serve
from meshsim.backends.replay import read_cassette
from meshsim.cli import main
from meshsim.core.redact import MASK, register, scrub
from meshsim.io.runfolder import comparable_files

KEY = "sk-live-REFLECT-me-0123456789-abcdefghijklmnop"
KEY_VAR = "MESHSIM_SAFETY_KEY"
DEADLINE = 3.0  # the profile's timeout: a deadline per request
DRIP = 2.0  # seconds between two bytes of the dripping reply


def key_runs(text: str, n: int = 8) -> list[str]:
    """Every run of ``n`` characters of KEY that ``text`` contains."""
    return sorted({KEY[i:i + n] for i in range(len(KEY) - n + 1) if KEY[i:i + n] in text})


def answer(body: dict, echo: str) -> str:
    """A reply the protocol can use, with the caller's Authorization header echoed into it."""
    sys_msg = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
    if "You review" in sys_msg:
        return json.dumps({"normal_working_score": 0.9, "confidence": 0.8, "specific_failure_found": False,
                           "failure_type": "none", "failure_evidence": "", "one_sentence_reason": echo})
    if "You route tasks" in sys_msg:
        user = body["messages"][-1]["content"]
        ttype = user.split("Task type: ")[1].split("\n")[0]
        pair = user.split(f"- {ttype}: ")[1].split("\n")[0]
        return json.dumps({"abilities": pair.split(", "), "note": echo})
    return f"COMPETENCE_MATCH:partial\nyou said {echo}, key prefix {echo[7:28]}\nAnswer: Yes"


class Evil(BaseHTTPRequestHandler):
    """Echoes the caller's key into replies (in the content of a 200, in a 400
    body) and drips the first chat reply, one byte every DRIP seconds."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall per call

    def do_GET(self):  # noqa: N802 - the preflight: GET /v1/models
        self.server.log.append(("GET", self.path))
        self._send(200, {"data": [{"id": "m"}]})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = self.headers.get("Authorization", "")
        with self.server.lock:
            self.server.log.append(("POST", self.path))
            n = sum(1 for m, _ in self.server.log if m == "POST")
        if n == 1 and self.server.drip:  # drip: headers at once, then a byte every DRIP seconds
            payload = json.dumps({"choices": [{"message": {"content": "x" * 50}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            try:
                for b in payload:  # 60 bytes: two minutes, unless the client gives up
                    self.wfile.write(bytes([b]))
                    self.wfile.flush()
                    time.sleep(DRIP)
            except OSError:
                pass  # the client hung up
            self.close_connection = True
            return
        if n % 5 == 0:  # a 400 whose body holds the key (the client keeps 300 characters of it)
            self._send(400, {"error": {"message": f"bad request; you sent Authorization: {auth}", "pad": "." * 400}})
            return
        self._send(200, {"choices": [{"message": {"role": "assistant", "content": answer(body, auth)},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 40, "completion_tokens": 10}})

    def _send(self, code: int, obj: dict) -> None:
        send_json(self, code, obj)

    def log_message(self, *a):
        pass


@pytest.fixture
def evil():
    with serve(Evil, daemon_threads=True, log=[], lock=threading.Lock(), drip=True) as srv:
        yield srv


def scenario(tmp_path: Path, port: int, mode: str = "record", **profile) -> Path:
    return endpoint_scenario(tmp_path, port, mode, "evil", KEY_VAR, **{"timeout": DEADLINE, **profile})


def every_text(folder: Path) -> str:
    out = []
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            raw = p.read_bytes()
            out.append((gzip.decompress(raw) if p.name.endswith(".gz") else raw).decode("utf-8", "replace"))
    return "\n".join(out)


# 2-6 s end to end: with the slow checks (README's 2-minute budget), which .ci/run runs
@pytest.mark.slow
def test_echoed_key_reaches_no_file_and_a_dripping_reply_is_a_timeout(evil, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", str(scenario(tmp_path, evil.server_address[1])), "--out", str(out)],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    posts = sum(1 for m, _ in evil.log if m == "POST")
    assert evil.log[0] == ("GET", "/v1/models") and posts > 10  # one preflight, then the calls
    assert [m for m, _ in evil.log].count("GET") == 1
    # the server did echo it: the scrubbed marks are there, the key is not, nor any 8 of its characters
    cassette = (tmp_path / "cas.jsonl").read_text()
    assert MASK in cassette
    for where, text in (("cassette", cassette), ("run folder", every_text(out)), ("stdout", res.output),
                        ("stderr", res.stderr)):
        assert key_runs(text) == [], f"{where} holds {key_runs(text)}"
    # the drip: one call, failed as a timeout within 1.5x the deadline
    entries, _ = read_cassette(tmp_path / "cas.jsonl")
    timeouts = [e for e in entries if (e["response"]["error"] or "").startswith("timeout")]
    assert len(timeouts) == 1, [e["response"]["error"] for e in entries if e["response"]["error"]]
    assert DEADLINE * 0.9 <= timeouts[0]["wall"] <= DEADLINE * 1.5, timeouts[0]["wall"]
    errors = json.loads((out / "summary.json").read_text())["backend"]["errors"]
    assert errors.get("timeout") == 1 and errors.get("http_400", 0) >= 1, errors


def test_replay_never_touches_the_network_and_replays_recorded_failures(evil, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    evil.drip = False  # the failures here are the 400s
    port = evil.server_address[1]
    rec = CliRunner().invoke(main, ["run", str(scenario(tmp_path, port)), "--out", str(tmp_path / "rec")],
                             catch_exceptions=False)
    assert rec.exit_code == 0, rec.stderr
    failures = [e for e in read_cassette(tmp_path / "cas.jsonl")[0] if e["response"]["error"]]
    assert failures and all(e["response"]["error"].startswith("http_400") for e in failures)
    seen = len(evil.log)
    monkeypatch.delenv(KEY_VAR)
    rep = CliRunner().invoke(main, ["run", str(scenario(tmp_path, port, "replay")), "--out", str(tmp_path / "rep")],
                             catch_exceptions=False)
    assert rep.exit_code == 0, rep.stderr
    assert len(evil.log) == seen  # not one request, not even the preflight, with the server right there
    # every recorded failure served as that failure: the same run folder, byte for byte
    assert comparable_files(tmp_path / "rec") == comparable_files(tmp_path / "rep")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("command", ["validate", "run"])
def test_no_server_is_exit_2_with_a_hint_before_anything_is_written(command, tmp_path, monkeypatch):
    """The README's record command with the server down: one line, nothing
    recorded, no run folder (not a run of 90 recorded connection failures)."""
    monkeypatch.setenv(KEY_VAR, KEY)
    sc = scenario(tmp_path, _free_port())
    out = tmp_path / "run"
    argv = [command, str(sc)] + (["--out", str(out)] if command == "run" else [])
    t0 = time.monotonic()
    res = CliRunner().invoke(main, argv, catch_exceptions=False)
    assert time.monotonic() - t0 < 10
    assert res.exit_code == 2
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "ep.yaml: base_url: cannot reach the endpoint http://127.0.0.1:" in lines[0], lines[0]
    assert "backends/local-llm.sh start" in lines[0] and "--set backend.mode=replay" in lines[0]
    assert not out.exists() and not (tmp_path / "cas.jsonl").exists()


def test_missing_key_and_refused_key_are_exit_2(tmp_path, monkeypatch):
    class Refuse(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    with serve(Refuse) as srv:
        sc = scenario(tmp_path, srv.server_address[1])
        monkeypatch.delenv(KEY_VAR, raising=False)
        res = CliRunner().invoke(main, ["run", str(sc), "--out", str(tmp_path / "a")], catch_exceptions=False)
        assert res.exit_code == 2 and f"environment variable {KEY_VAR} is not set" in res.stderr, res.stderr
        monkeypatch.setenv(KEY_VAR, "wrong-key-but-set")
        res = CliRunner().invoke(main, ["run", str(sc), "--out", str(tmp_path / "b")], catch_exceptions=False)
        assert res.exit_code == 2 and f"refused the API key in ${KEY_VAR} (HTTP 401)" in res.stderr, res.stderr
        assert len(res.stderr.splitlines()) == 1 and not (tmp_path / "b").exists()


def test_scrub_masks_every_run_of_eight_or_more_key_characters():
    key = "k3y-ABCDEFGHIJKLMNOPQRSTUVWX"
    register(key)
    assert scrub(f"a {key} b") == f"a {MASK} b"
    assert scrub(f"prefix {key[:21]} cut") == f"prefix {MASK} cut"
    assert scrub(f"middle {key[5:13]}.") == f"middle {MASK}."  # exactly 8
    assert scrub(f"short {key[5:12]}.") == f"short {key[5:12]}."  # 7 characters are ordinary text
    assert scrub(f"two {key[:9]} and {key[-10:]}") == f"two {MASK} and {MASK}"
    assert scrub("nothing here") == "nothing here"


class EchoAll(BaseHTTPRequestHandler):
    """Echoes the request line and every header into each reply's content."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802
        self._send(200, {"data": [{"id": "m"}]})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        echo = f"{self.path} " + " ".join(f"{k}={v}" for k, v in self.headers.items())
        self._send(200, {"choices": [{"message": {"role": "assistant", "content": answer(body, echo)},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 40, "completion_tokens": 10}})

    def _send(self, code: int, obj: dict) -> None:
        send_json(self, code, obj)

    def log_message(self, *a):
        pass


@pytest.fixture
def echo_all():
    with serve(EchoAll, daemon_threads=True) as srv:
        yield srv


def test_secrets_in_url_header_and_environment_reach_no_file(echo_all, tmp_path, monkeypatch):
    """Issue 19: credentials in the endpoint URL (user-info, query) and an extra
    header, echoed back by the endpoint, leave no 8-character piece anywhere."""
    port = echo_all.server_address[1]
    secrets = {"user": "alice-the-user-name", "password": "pw-0123456789-secret", "query": "qtok-ABCDEFGHIJKLMNOP",
               "header": "hdr-zyxwvutsrqponmlk", "env": KEY}
    monkeypatch.setenv(KEY_VAR, secrets["env"])
    url = f"http://{secrets['user']}:{secrets['password']}@127.0.0.1:{port}/v1?sig={secrets['query']}"
    sc = scenario(tmp_path, port, base_url=url, headers={"X-Team-Secret": secrets["header"]})
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", str(sc), "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    written = "\n".join([(tmp_path / "cas.jsonl").read_text(), every_text(out), res.output, res.stderr])
    for name, s in secrets.items():
        runs = sorted({s[i:i + 8] for i in range(len(s) - 7) if s[i:i + 8] in written})
        assert runs == [], f"{name}: {runs}"
    resolved = yaml.safe_load((out / "scenario.resolved.yaml").read_text())
    assert resolved  # readable, and the run resumes from it
    res = CliRunner().invoke(main, ["run", str(sc), "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0 and "resum" in (res.output + res.stderr).lower(), res.output + res.stderr


def test_a_one_character_key_corrupts_nothing(echo_all, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VAR, "e")  # the commonest letter: masking it would wreck every file
    out = tmp_path / "run"
    sc = scenario(tmp_path, echo_all.server_address[1])
    res = CliRunner().invoke(main, ["run", str(sc), "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"] if "scenario" in summary else summary  # parses
    assert "e" in (out / "scenario.resolved.yaml").read_text() and MASK not in (tmp_path / "cas.jsonl").read_text()
    assert len(read_cassette(tmp_path / "cas.jsonl")[0]) > 0
    res = CliRunner().invoke(main, ["run", str(sc), "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr  # it reads its own files back


class Fails(BaseHTTPRequestHandler):
    """A preflight that works, then every chat call fails: 500s, HTML, invalid JSON in turn."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802
        send_json(self, 200, {"data": [{"id": "m"}]})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            self.server.n += 1
            n = self.server.n
        body, code, ctype = [(b'{"error": "boom"}', 500, "application/json"),
                             (b"<html>bad gateway</html>", 200, "text/html"),
                             (b'{"choices": [', 200, "application/json")][n % 3]
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_an_endpoint_that_fails_every_call_is_a_nonzero_exit_with_the_failure_counts(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    with serve(Fails, daemon_threads=True, lock=threading.Lock(), n=0) as srv:
        res = CliRunner().invoke(main, ["run", str(scenario(tmp_path, srv.server_address[1])), "--out",
                                        str(tmp_path / "run")], catch_exceptions=False)
    assert res.exit_code == 3, (res.exit_code, res.output, res.stderr)
    line = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(line) == 1 and "LLM calls failed" in line[0] and "http_500" in line[0], res.stderr
    assert "failed" in res.output  # the console's backend line counts them too


def test_a_run_that_answered_nothing_says_so():
    from types import SimpleNamespace

    from meshsim.cli import _loud_failures

    ok = SimpleNamespace(seed=1, summary={"tasks": 10, "unanswered": 3, "backend": {"calls": 50, "errors": {"x": 1}}})
    none = SimpleNamespace(seed=2, summary={"tasks": 10, "unanswered": 10, "backend": {"name": "fake"}})
    assert _loud_failures(ok, 0.5) == 0
    assert _loud_failures(SimpleNamespace(runs=[ok, none]), 0.5) == 3
    half = SimpleNamespace(seed=3, summary={"tasks": 4, "unanswered": 0, "backend": {"calls": 10, "errors": {"t": 6}}})
    assert _loud_failures(half, 0.5) == 3 and _loud_failures(half, 0.7) == 0


class Huge(BaseHTTPRequestHandler):
    """Replies of 3 MB: with a Content-Length on even calls, without one (read to the close) on odd ones."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802
        send_json(self, 200, {"data": [{"id": "m"}]})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            self.server.n += 1
            n = self.server.n
        body = json.dumps({"choices": [{"message": {"content": "x" * 3_000_000}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if n % 2 == 0:
            self.send_header("Content-Length", str(len(body)))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass  # the client stopped reading at its cap

    def log_message(self, *a):
        pass


def test_a_reply_above_the_byte_cap_is_a_failed_call_never_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    with serve(Huge, daemon_threads=True, lock=threading.Lock(), n=0) as srv:
        sc = scenario(tmp_path, srv.server_address[1], max_reply_bytes=100_000)
        res = CliRunner().invoke(main, ["run", str(sc), "--out", str(tmp_path / "run")], catch_exceptions=False)
    assert res.exit_code == 3 and "reply_too_large" in res.stderr, (res.exit_code, res.stderr)
    assert (tmp_path / "cas.jsonl").stat().st_size < 2_000_000  # no 3 MB reply was written
    errors = json.loads((tmp_path / "run" / "summary.json").read_text())["backend"]["errors"]
    assert errors.get("reply_too_large", 0) >= 2, errors
