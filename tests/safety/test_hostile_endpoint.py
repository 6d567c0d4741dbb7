"""Bytes from an endpoint are bounded as they arrive (issue 30): hostile
servers on 127.0.0.1 send gzip bombs (256 kB inflating to 256 MiB, and the
same bomb gzipped twice), a 400 MiB body, headers or bodies one byte at a
time, JSON nested 100k deep; cassettes hold wrong-typed values.

The bomb and flood cases run the CLI in a child process and measure its peak
resident memory (``ru_maxrss`` of the child, read by a small wrapper): under
300 MB whatever the endpoint sends. Each server thread stops by itself (a
bounded loop that ends when the client hangs up or the test ends).
"""
from __future__ import annotations

import asyncio
import gzip
import json
import os
import struct
import subprocess
import sys
import threading
import time
import zlib
from functools import lru_cache
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from tests.helpers import endpoint_scenario, send_json, serve
from meshsim.core.calls import CallKind, Request, TaskRef
from meshsim.backends.openai import OpenAIBackend, load_openai_profile
from meshsim.backends.wire import MAX_ENCODINGS, BadEncoding, BodyTooLarge, BoundedBody, content_codings
from meshsim.cli import main

KEY_VAR = "MESHSIM_HOSTILE_KEY"
KEY = "sk-hostile-0123456789abcdef"
PEAK_MB = 300
MIB = 1 << 20
TASK = TaskRef(index=1, id="bbh/object_counting/1", type="object_counting", question="How many?", answer="3",
               required=("arithmetic", "instruction_parsing"), dataset="bbh")


@lru_cache(maxsize=None)
def bomb(mib: int) -> bytes:
    """A valid gzip of ``mib`` MiB of zeros (about 1 kB per MiB), built without
    holding the zeros: one fully flushed deflate block repeated."""
    zeros = bytes(MIB)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    end = c.flush()
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(zeros, crc)
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + piece * mib + end + struct.pack("<II", crc, (mib * MIB) % 2**32)


def completion(content: str) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3}}


class Hostile(BaseHTTPRequestHandler):
    """GET (the preflight) and POST (chat) each answer as ``server.modes[method]`` says."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):  # noqa: N802
        self._answer(self.server.modes.get("GET", "ok"), {"data": [{"id": "m"}]})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            self.server.posts += 1
        self._answer(self.server.modes.get("POST", "ok"), completion("COMPETENCE_MATCH:yes\nAnswer: Yes"))

    def _answer(self, mode: str, ok: dict) -> None:
        srv = self.server
        try:
            if mode == "ok":
                send_json(self, 200, ok)
            elif mode in ("bomb", "bomb2"):
                body = bomb(256) if mode == "bomb" else gzip.compress(bomb(256))
                self._head(len(body), {"Content-Encoding": "gzip" if mode == "bomb" else "gzip, gzip"})
                self.wfile.write(body)
            elif mode in ("flood", "flood_close"):  # 400 MiB, written a MiB at a time, never built whole
                if mode == "flood":
                    self._head(400 * MIB)
                else:  # no Content-Length to refuse up front: the body runs to the close
                    self.send_response(200)
                    self.send_header("Connection", "close")
                    self.end_headers()
                block = b" " * MIB
                for _ in range(400):
                    if srv.done.is_set():
                        break
                    self.wfile.write(block)
            elif mode == "big":  # a valid reply of 300 kB: a server that ignores max_tokens
                send_json(self, 200, completion("COMPETENCE_MATCH:yes\nAnswer: Yes " + "y" * 300_000))
            elif mode == "deep":
                body = b"[" * 100_000
                self._head(len(body))
                self.wfile.write(body)
            elif mode == "header_drip":  # the status line, then one header byte every DRIP seconds
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                for b in b"Content-Type: application/json\r\nX-Slow: " + b"x" * 40:
                    if srv.done.wait(srv.drip):
                        break
                    self.wfile.write(bytes([b]))
                    self.wfile.flush()
            elif mode == "body_drip":  # the headers at once, then one body byte every DRIP seconds
                body = json.dumps(ok).encode()
                self._head(len(body))
                self.wfile.flush()
                for b in body[:60]:
                    if srv.done.wait(srv.drip):
                        break
                    self.wfile.write(bytes([b]))
                    self.wfile.flush()
            else:  # pragma: no cover - a test's typo
                raise ValueError(mode)
        except OSError:
            pass  # the client stopped reading: that is the point
        self.close_connection = mode != "ok"

    def _head(self, length: int, extra: dict | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(length))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def log_message(self, *a):
        pass


@pytest.fixture
def hostile():
    with serve(Hostile, daemon_threads=True, modes={}, lock=threading.Lock(), posts=0, drip=1.5,
               done=threading.Event()) as srv:
        yield srv
        srv.done.set()  # every dripping or flooding handler ends at its next step


def scenario(tmp_path: Path, srv, **profile) -> Path:
    return endpoint_scenario(tmp_path, srv.server_address[1], "record", "hostile", KEY_VAR,
                             **{"timeout": 2, **profile})


_MEASURE = ("import json, resource, subprocess, sys, time\n"
            "t = time.monotonic()\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=120)\n"
            "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'err': p.stderr, 'wall': time.monotonic() - t,\n"
            "                  'peak_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))\n")


def measured(*args: str, cwd: Path) -> dict:
    """``meshsim ARGS`` in a child process: its exit code, output, wall time and peak RSS (MB)."""
    cmd = [sys.executable, "-c", "from meshsim.cli import main; main()", *args]
    env = dict(os.environ, **{KEY_VAR: KEY})
    p = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], capture_output=True, text=True, cwd=cwd, env=env,
                       timeout=150)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    return lines[0]


# ------------------------------------------------------------------ memory: bombs and floods, measured
@pytest.mark.parametrize("mode, needle", [("bomb", "decoded body above 4194304 bytes"),
                                          ("flood", "Content-Length 419430400 above 4194304 bytes"),
                                          ("flood_close", "body above 4194304 bytes")])
@pytest.mark.slow  # (waits on deadlines or runs whole commands: the slow phase keeps it)
def test_a_bomb_or_a_400_mib_body_on_the_preflight_is_one_line_under_300_mb(hostile, tmp_path, mode, needle):
    """The preflight's GET /models body is capped like a reply (max_reply_bytes,
    counted while it is inflated): exit 2 naming the endpoint, never 588 / 876 MB."""
    hostile.modes["GET"] = mode
    got = measured("validate", str(scenario(tmp_path, hostile, timeout=20)), cwd=tmp_path)
    assert got["rc"] == 2, got
    line = one_error_line(got["err"])
    assert "ep.yaml: base_url:" in line and "GET /models" in line and needle in line, line
    assert got["peak_mb"] < PEAK_MB, got["peak_mb"]


# 2-6 s end to end: with the slow checks (README's 2-minute budget), which .ci/run runs
@pytest.mark.slow
def test_bombs_and_overlong_chat_replies_are_bounded_per_call_and_per_run_under_300_mb(hostile, tmp_path):
    """Chat replies in turn: a 256 kB gzip of 256 MiB, that gzip gzipped again
    (``Content-Encoding: gzip, gzip``), and a valid 300 kB reply from a server
    that ignores max_tokens. The bombs fail their calls as reply_too_large at
    the 4 MiB cap (it was 720 MB; nested, unbounded); the long texts are cut
    at 16 characters per max_tokens token, so neither memory nor the run
    folder grows with max_reply_bytes times the calls (1 MB replies took a run
    to 340 MB and 141 MB of files)."""
    class Turns(Hostile):
        def do_POST(self):  # noqa: N802
            with self.server.lock:
                n = self.server.posts
            self.server.modes["POST"] = ("bomb", "bomb2", "big")[n % 3]
            super().do_POST()

    hostile.RequestHandlerClass = Turns
    bomb(256)  # built before the child starts its clock
    got = measured("run", str(scenario(tmp_path, hostile, timeout=20)), "--out", str(tmp_path / "run"),
                   cwd=tmp_path)
    assert got["rc"] == 3, got
    line = one_error_line(got["err"])
    assert "reply_too_large" in line, line
    assert hostile.posts >= 6  # every kind was served, twice
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())["backend"]
    assert set(summary["errors"]) == {"reply_too_large"} and summary["truncated"] >= 2, summary
    assert got["peak_mb"] < PEAK_MB, got["peak_mb"]
    written = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    assert written < 5 * MIB, written


def test_a_reply_text_beyond_16_characters_per_max_token_is_cut_and_flagged(hostile):
    hostile.RequestHandlerClass = Coded
    hostile.coded = (json.dumps(completion("Answer: 3 " + "z" * 20_000)).encode(), None)
    b = _backend(hostile, max_tokens=100)
    try:
        r = asyncio.run(b.complete(_req()))
    finally:
        b.close()
    assert r.error is None and len(r.text) == 1600 and r.text.startswith("Answer: 3 zz")
    assert r.fields["truncated"] is True


# ------------------------------------------------------------------ time: one deadline for the whole request
@pytest.mark.slow  # (waits on deadlines or runs whole commands: the slow phase keeps it)
def test_a_preflight_dripping_one_header_byte_every_1_5_s_ends_at_its_deadline(hostile, tmp_path):
    """httpx's timeout is per read; 1.5 s between bytes never trips a 2 s one.
    The preflight's deadline covers connect, headers and body together."""
    hostile.modes["GET"] = "header_drip"
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["validate", str(scenario(tmp_path, hostile, timeout=2))], env={KEY_VAR: KEY})
    took = time.monotonic() - t0
    assert res.exit_code == 2, res.output
    assert "did not answer GET /models within 2s" in one_error_line(res.stderr)
    assert took < 8, took  # the 2 s deadline (plus building the scenario), not the 60 s of dripping


@pytest.mark.slow  # (waits on deadlines or runs whole commands: the slow phase keeps it)
@pytest.mark.parametrize("mode", ["header_drip", "body_drip"])
def test_a_dripping_chat_reply_is_a_timeout_at_the_deadline(hostile, mode):
    hostile.modes["POST"] = mode
    hostile.drip = 0.5
    b = _backend(hostile, timeout=1.5)
    try:
        t0 = time.monotonic()
        r = asyncio.run(b.complete(_req()))
        took = time.monotonic() - t0
    finally:
        b.close()
    assert r.error is not None and r.error.startswith("timeout: no complete reply within 1.5s"), r.error
    assert 1.4 < took < 3.5, took


def test_the_preflight_deadline_is_the_timeout_at_most_ten_seconds():
    prof = {"base_url": "http://127.0.0.1:9/v1", "models": {"strong": {"id": "m"}}}
    assert OpenAIBackend(load_openai_profile(None, prof)).preflight_deadline() == 10.0
    assert OpenAIBackend(load_openai_profile(None, dict(prof, timeout=2.5))).preflight_deadline() == 2.5


# ------------------------------------------------------------------ codings and JSON, call by call
def _backend(srv, **over) -> OpenAIBackend:
    prof = {"name": "h", "base_url": f"http://127.0.0.1:{srv.server_address[1]}/v1", "models": {"strong": {"id": "m"}},
            "retries": {"max": 0}, "timeout": 5, **over}
    return OpenAIBackend(load_openai_profile(None, prof))


def _req(kind=CallKind.FINALIZE) -> Request:
    return Request(kind=kind, agent="A1", model="strong", task=TASK, abilities=("arithmetic",), context={},
                   sample=0, seed=1)


class Coded(Hostile):
    """A chat reply sent with the server's ``coded`` (body, Content-Encoding)."""

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        body, coding = self.server.coded
        self._head(len(body), {"Content-Encoding": coding} if coding else None)
        try:
            self.wfile.write(body)
        except OSError:
            pass
        self.close_connection = True


OK = json.dumps(completion("Answer: 3")).encode()
CODED = {
    "gzip": (gzip.compress(OK), "gzip", None),
    "gzip twice": (gzip.compress(gzip.compress(OK)), "gzip, gzip", None),
    "two gzip members": (gzip.compress(OK[:25]) + gzip.compress(OK[25:]), "gzip", None),
    "deflate (zlib)": (zlib.compress(OK), "deflate", None),
    "deflate (raw)": (zlib.compress(OK)[2:-4], "deflate", None),
    "identity": (OK, "identity", None),
    "three layers": (gzip.compress(gzip.compress(gzip.compress(OK))), "gzip, gzip, gzip",
                     "bad_encoding: 3 layers of Content-Encoding"),
    "brotli": (OK, "br", "bad_encoding: unsupported Content-Encoding 'br'"),
    "not gzip": (b"plain bytes, not gzip", "gzip", "bad_encoding: gzip body does not decode"),
    "JSON nested 100k deep": (b"[" * 100_000, None, "malformed_json: reply nests JSON deeper"),
}


@pytest.mark.parametrize("case", list(CODED))
def test_reply_codings_are_decoded_or_refused_by_name(hostile, case):
    hostile.RequestHandlerClass = Coded
    body, coding, error = CODED[case]
    hostile.coded = (body, coding)
    b = _backend(hostile)
    try:
        r = asyncio.run(b.complete(_req()))
    finally:
        b.close()
    if error is None:
        assert r.error is None and r.text == "Answer: 3", r.error
    else:
        assert r.error is not None and r.error.startswith(error), r.error


def test_a_review_whose_text_nests_json_100k_deep_is_unparsed_not_a_crash(hostile):
    hostile.RequestHandlerClass = Coded
    hostile.coded = (json.dumps(completion('{"a":' * 100_000)).encode(), None)  # the parser closes the braces
    b = _backend(hostile)
    try:
        r = asyncio.run(b.complete(_req(CallKind.REVIEW)))
    finally:
        b.close()
    assert r.error is None and r.fields["parsed"] is False and r.fields["score"] == 0.5


def test_a_run_whose_replies_nest_json_100k_deep_exits_3_with_the_counts(hostile, tmp_path):
    """Deep JSON is a malformed reply (a failed call, counted), as docs/backends.md
    says of unreadable bodies: exit 3 with the counts, never an internal error."""
    hostile.modes["POST"] = "deep"
    res = CliRunner().invoke(main, ["run", str(scenario(tmp_path, hostile)), "--out", str(tmp_path / "run")],
                             env={KEY_VAR: KEY})
    assert res.exit_code == 3, (res.exit_code, res.output)
    assert "malformed_json" in one_error_line(res.stderr)


# ------------------------------------------------------------------ the decoder itself
ENCODERS = {"gzip": ("gzip", gzip.compress), "deflate": ("deflate", zlib.compress),
            "raw deflate": ("deflate", lambda b: zlib.compress(b)[2:-4])}


@given(payload=st.binary(max_size=3000), codings=st.lists(st.sampled_from(sorted(ENCODERS)), max_size=2),
       cuts=st.lists(st.integers(0, 4000), max_size=6), cap=st.integers(1, 4000))
def test_bounded_body_decodes_any_split_or_refuses_past_the_cap(payload, codings, cuts, cap):
    """Whatever the chunking of the raw bytes: the decoded body is the payload
    when it (and each layer) fits the cap, else BodyTooLarge; never more than
    cap bytes kept."""
    raw, sizes = payload, [len(payload)]
    for c in codings:  # applied in order, so the header lists them in order
        raw = ENCODERS[c][1](raw)
        sizes.append(len(raw))
    body = BoundedBody([ENCODERS[c][0] for c in codings], cap)
    bounds = sorted({0, len(raw), *(min(c, len(raw)) for c in cuts)})
    try:
        for a, b in zip(bounds, bounds[1:]):
            body.feed(raw[a:b])
    except BodyTooLarge:
        assert max(sizes) > cap
        assert sum(map(len, body.parts)) <= cap
    else:
        assert max(sizes) <= cap and body.body() == payload


def test_a_bomb_fed_whole_inflates_no_more_than_the_cap_plus_one_chunk():
    body = BoundedBody(["gzip", "gzip"], 4 * MIB)
    with pytest.raises(BodyTooLarge, match="decoded body above"):
        body.feed(gzip.compress(bomb(256)))
    assert sum(map(len, body.parts)) <= 4 * MIB


def test_more_layers_than_allowed_or_unknown_codings_are_refused():
    class H(dict):
        def get_list(self, name, split_commas=False):
            return [v for v in self.get(name, "").split(",")]

    assert content_codings(H({"content-encoding": "gzip, identity"})) == ["gzip"]
    with pytest.raises(BadEncoding, match="at most 2"):
        content_codings(H({"content-encoding": ", ".join(["gzip"] * (MAX_ENCODINGS + 1))}))
    with pytest.raises(BadEncoding, match="zstd"):
        content_codings(H({"content-encoding": "zstd"}))


# ------------------------------------------------------------------ cassettes: wrong types are input errors
def _cassette_line(request=None, **response) -> str:
    resp = {"text": "Answer: 3", "fields": {"answer": "3"}, "correct": True, "prompt_tokens": 5,
            "completion_tokens": 2, "latency": None, "error": None}
    resp.update(response)
    req = {"kind": "finalize", "agent": "A1", "model": "strong", "abilities": ["arithmetic"], "sample": 0,
           "task": {"index": 1, "id": "bbh/x/1", "type": "x", "dataset": "bbh"}, "context": {"round": 1}}
    req = request if request is not None else req
    return json.dumps({"v": 1, "key": "ab" * 32, "backend": "openai:x", "request": req, "response": resp}) + "\n"


WRONG = {
    "prompt_tokens a word": (_cassette_line(prompt_tokens="many"), "response.prompt_tokens: must be a whole number"),
    "prompt_tokens a float": (_cassette_line(prompt_tokens=1.5), "response.prompt_tokens"),
    "completion_tokens negative": (_cassette_line(completion_tokens=-3), "response.completion_tokens"),
    "text a number": (_cassette_line(text=42), "response.text: must be a string"),
    "fields a list": (_cassette_line(fields=[1, 2]), "response.fields: must be an object"),
    "error a number": (_cassette_line(error=5), "response.error: must be a string or null"),
    "latency negative": (_cassette_line(latency=-1), "response.latency"),
    "correct a string": (_cassette_line(correct="yes"), "response.correct"),
    "pair a string": (_cassette_line(fields={"pair": "ab"}), "response.fields.pair"),
    "score a list": (_cassette_line(fields={"score": [1]}), "response.fields.score"),
    "request a list": (_cassette_line(request=[1]), "request: must be an object"),
    "request.task a string": (_cassette_line(request={"task": "t"}), "request.task: must be an object"),
    "request.context.round a word": (_cassette_line(request={"context": {"round": "two"}}),
                                     "request.context.round: must be a number"),
    "response a string": (json.dumps({"key": "k", "response": "ok"}) + "\n", "response: the recorded reply"),
    "key a list": (json.dumps({"key": [1], "response": {}}) + "\n", "line 2: key"),
    "nested 100k deep": ('{"key": "k", "response": ' + "[" * 100_000 + "\n", "line 2: corrupt cassette line"),
}


@pytest.mark.parametrize("command", ["validate", "run", "backends fit"])
@pytest.mark.parametrize("case", list(WRONG))
def test_a_wrong_typed_cassette_value_is_one_line_naming_line_call_and_field(tmp_path, case, command):
    line, needle = WRONG[case]
    sc = endpoint_scenario(tmp_path, 9, "replay", "hostile", KEY_VAR)
    # a good first line, the bad one second, a good third (so the bad one is not a crash's partial tail)
    (tmp_path / "cas.jsonl").write_text(_cassette_line() + line + _cassette_line())
    args = {"validate": ["validate", str(sc)], "run": ["run", str(sc), "--out", str(tmp_path / "run")],
            "backends fit": ["backends", "fit", str(tmp_path / "cas.jsonl"), "-o", str(tmp_path / "fit.yaml")]}
    args = args[command]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, (res.exit_code, res.output)
    err = one_error_line(res.stderr)
    assert "cas.jsonl: line 2" in err and needle in err, err
    if case not in ("response a string", "key a list", "nested 100k deep"):
        assert "(call abababababab)" in err, err
    assert not (tmp_path / "run").exists() and not (tmp_path / "fit.yaml").exists()
