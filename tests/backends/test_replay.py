"""Record / replay: cassettes reproduce replies exactly, offline, and never hold a secret."""
from __future__ import annotations

import asyncio
import gzip
import json
import os
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest
import yaml

from tests.helpers import cli_runner, endpoint_scenario, send_json, serve

import meshsim
from meshsim.core.calls import CallKind, Request, TaskRef
from meshsim.backends.fake import FakeBackend, load_fake_profile
from meshsim.backends.openai import OpenAIBackend, load_openai_profile
from meshsim.backends.replay import ReplayBackend, read_cassette
from meshsim.core.errors import InputError
from meshsim.io.runfolder import comparable_files

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-live-DO-NOT-RECORD-987654321"
TASK = TaskRef(index=3, id="bbh/navigate/3", type="navigate", question="Take 2 steps left. Take 2 steps right.",
               answer="Yes", required=("arithmetic", "spatial_reasoning"), dataset="bbh")


def prof(**over):
    data = {"name": "t", "base_url": "http://llm.test/v1", "api_key_env": "MESHSIM_TEST_KEY",
            "models": {"strong": {"id": "big"}, "weak": {"id": "small"}},
            "retries": {"max": 0}}
    data.update(over)
    return load_openai_profile(None, data)


def reply_for(body: dict) -> str:
    sys_msg = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
    if "You review" in sys_msg:
        score = 0.25 + 0.25 * (len(body["messages"][-1]["content"]) % 3)
        return json.dumps({"half_correct": score, "normal_working_score": score, "confidence": 0.8,
                           "specific_failure_found": score <= 0.4, "failure_type": "other",
                           "failure_evidence": "x" if score <= 0.4 else "", "one_sentence_reason": f"seed {body['seed']}"})
    if "You route tasks" in sys_msg:
        user = body["messages"][-1]["content"]
        ttype = user.split("Task type: ")[1].split("\n")[0]
        pair = user.split(f"- {ttype}: ")[1].split("\n")[0]
        return json.dumps({"abilities": pair.split(", ")})
    return f"COMPETENCE_MATCH:partial\nwork for seed {body['seed']}\nAnswer: Yes"


def handler(counter):
    def h(request: httpx.Request):
        counter.append(request)
        body = json.loads(request.content)
        return httpx.Response(200, json={"choices": [{"message": {"content": reply_for(body)}, "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 50, "completion_tokens": len(counter)}})
    return h


def refuse(request):
    raise AssertionError("replay must not touch the network")


def openai(transport, key=True):
    env = {"MESHSIM_TEST_KEY": SECRET} if key else {}
    return OpenAIBackend(prof(), transport=httpx.MockTransport(transport), environ=env, require_key=key)


def reqs():
    out = []
    for k in range(3):
        out.append(Request(kind=CallKind.REVIEW, agent="A2", model="strong", task=TASK, abilities=("arithmetic",),
                           context={"action": "contribute", "output_text": "left 2, right 2", "output_correct": True},
                           sample=k, seed=k))
    out.append(Request(kind=CallKind.FINALIZE, agent="A4", model="weak", task=TASK, abilities=("spatial_reasoning",),
                       context={"drafts": ["net 0 steps"]}, seed=99))
    out.append(Request(kind=CallKind.INFER, agent="A1", model="strong", task=TASK, context={}, seed=5))
    return out


def record(path, mode="record"):
    seen = []
    rb = ReplayBackend(openai(handler(seen)), mode, path)
    try:
        out = [asyncio.run(rb.complete(r)) for r in reqs()]
    finally:
        rb.close()
    return out, seen, rb


def test_record_then_replay_reproduces_exactly_offline(tmp_path):
    cas = tmp_path / "c.jsonl"
    recorded, seen, rb = record(cas)
    assert len(seen) == 5 and rb.recorded == 5
    assert recorded[3].correct is True and recorded[4].fields["pair"] == ["arithmetic", "spatial_reasoning"]
    entries, _ = read_cassette(cas)
    assert len(entries) == 5 and all(e["wall"] >= 0 and e["attempts"] == 1 for e in entries)
    # replay: no key in the environment, a transport that fails the test if used, no event loop needed
    rp = ReplayBackend(openai(refuse, key=False), "replay", cas)
    assert rp.synchronous
    again = [rp.complete_sync(r) for r in reqs()]
    assert again == recorded
    assert asyncio.run(rp.complete(reqs()[0])) == recorded[0]
    assert rp.transport()["hits"] == 6 and rp.transport()["misses"] == 0
    assert rp.describe()["calls"] == 6 and rp.describe()["completion_tokens"] == sum(
        r.completion_tokens for r in recorded) + recorded[0].completion_tokens


def test_cassette_never_holds_the_key_or_auth_header(tmp_path):
    cas = tmp_path / "c.jsonl"
    _, seen, _ = record(cas)
    assert seen[0].headers["authorization"] == f"Bearer {SECRET}"  # it was sent...
    text = cas.read_text()
    assert SECRET not in text  # ...and never written
    assert "bearer" not in text.lower() and "authorization" not in text.lower()
    assert "MESHSIM_TEST_KEY" not in text


def test_replay_miss_is_one_line_naming_the_call(tmp_path):
    cas = tmp_path / "c.jsonl"
    record(cas)
    rp = ReplayBackend(openai(refuse, key=False), "replay", cas)
    other = Request(kind=CallKind.REVIEW, agent="A6", model="strong", task=TASK, abilities=("arithmetic",),
                    context={"action": "finalize", "output_text": "something else"}, sample=1)
    with pytest.raises(InputError) as ei:
        rp.complete_sync(other)
    msg = str(ei.value)
    assert "\n" not in msg and "review by A6" in msg and "bbh/navigate/3" in msg and "sample 1" in msg
    with pytest.raises(InputError):
        ReplayBackend(openai(refuse, key=False), "replay", tmp_path / "absent.jsonl")


def test_key_covers_model_messages_params_seed_sample(tmp_path):
    b = openai(refuse)
    rb = ReplayBackend(b, "record-missing", tmp_path / "k.jsonl")
    base = reqs()[0]
    k0 = rb.key(base)
    assert rb.key(base) == k0
    from dataclasses import replace
    assert rb.key(replace(base, sample=1)) != k0
    assert rb.key(replace(base, model="weak")) != k0
    assert rb.key(replace(base, context=dict(base.context, output_text="other"))) != k0
    assert rb.key(replace(base, agent="A5", seed=777)) == k0  # fixed seed mode: same prompt -> same reply
    hot = ReplayBackend(OpenAIBackend(prof(temperature=0.9), transport=httpx.MockTransport(refuse),
                                      environ={"MESHSIM_TEST_KEY": SECRET}), "record-missing", tmp_path / "k.jsonl")
    assert hot.key(base) != k0


def test_identical_calls_in_one_run_get_one_reply_even_from_a_nondeterministic_endpoint(tmp_path):
    """Two agents sending the same request at the same instant (same prompt, fixed
    seed) share one call; a later repeat is served from the cassette. So the
    recorded run sees exactly what its replay will."""
    counter = []

    def varying(request):  # a server whose text changes from call to call
        counter.append(1)
        body = json.loads(request.content)
        return httpx.Response(200, json={"choices": [{"message": {"content": f"Answer: {len(counter)}"},
                                                      "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 10, "completion_tokens": 3},
                                         "model": body["model"]})

    rb = ReplayBackend(openai(varying), "record", tmp_path / "c.jsonl")
    r0 = reqs()[0]

    async def together():
        return await asyncio.gather(rb.complete(r0), rb.complete(r0), rb.complete(r0))

    first = asyncio.run(together())
    later = asyncio.run(rb.complete(r0))
    rb.close()
    assert len(counter) == 1 and first[0] == first[1] == first[2] == later
    assert rb.transport()["recorded"] == 1 and rb.transport()["hits"] == 3 and rb.describe()["calls"] == 4
    rp = ReplayBackend(openai(refuse, key=False), "replay", tmp_path / "c.jsonl")
    assert rp.complete_sync(r0) == later


def test_record_missing_serves_hits_and_retries_recorded_failures(tmp_path):
    cas = tmp_path / "c.jsonl"
    calls = []

    def flaky(request):
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(400, json={"error": "bad"})
        return handler([])(request)

    rb = ReplayBackend(openai(flaky), "record-missing", cas)
    r0 = reqs()[0]
    bad = asyncio.run(rb.complete(r0))
    assert bad.error is not None  # recorded as a failure
    # within the run that recorded it, a key keeps its reply (as its replay will)
    assert asyncio.run(rb.complete(r0)) == bad and len(calls) == 1
    rb.close()
    rb = ReplayBackend(openai(flaky), "record-missing", cas)  # a later run
    ok = asyncio.run(rb.complete(r0))  # a failure recorded by an earlier run counts as missing
    assert ok.error is None and len(calls) == 2
    again = asyncio.run(rb.complete(r0))  # now a hit
    assert again == ok and len(calls) == 2
    rb.close()
    # the last line for a key wins on reload
    rp = ReplayBackend(openai(refuse, key=False), "replay", cas)
    assert rp.complete_sync(r0) == ok


def test_truncated_last_line_is_tolerated_and_repaired(tmp_path):
    cas = tmp_path / "c.jsonl"
    recorded, _, _ = record(cas)
    good = cas.read_bytes()
    cas.write_bytes(good + b'{"v": 1, "key": "abc", "respo')  # a crash mid-append
    entries, n = read_cassette(cas)
    assert len(entries) == 5 and n == len(good)
    rp = ReplayBackend(openai(refuse, key=False), "replay", cas)
    assert [rp.complete_sync(r) for r in reqs()] == recorded
    # the next recording session cuts the partial line and appends cleanly
    seen = []
    rb = ReplayBackend(openai(handler(seen)), "record-missing", cas)
    new = Request(kind=CallKind.SAC_SCORE, agent="A1", model="strong", task=TASK, context={"response": "Yes"})
    asyncio.run(rb.complete(new))
    rb.close()
    lines = cas.read_text().splitlines()
    assert len(lines) == 6 and all(json.loads(l)["key"] for l in lines)


def test_complete_line_without_newline_and_corrupt_middle_line(tmp_path):
    cas = tmp_path / "c.jsonl"
    record(cas)
    cas.write_bytes(cas.read_bytes().rstrip(b"\n"))
    assert len(read_cassette(cas)[0]) == 5
    before = cas.read_bytes()
    rb = ReplayBackend(openai(handler([])), "record-missing", cas)
    assert cas.read_bytes() == before  # opening (as validate does) changes nothing
    asyncio.run(rb.complete(Request(kind=CallKind.SAC_SCORE, agent="A1", model="strong", task=TASK,
                                    context={"response": "No"})))
    rb.close()
    assert cas.read_bytes().startswith(before + b"\n")  # the first append repaired the missing newline
    assert len(read_cassette(cas)[0]) == 6
    lines = cas.read_bytes().split(b"\n")
    lines[1] = b"garbage"
    cas.write_bytes(b"\n".join(lines))
    with pytest.raises(InputError) as ei:
        read_cassette(cas)
    assert "line 2" in str(ei.value)


@pytest.mark.parametrize("content", [b'{"name": "my notes"}', b'{"name": "my notes"}\n', b"plain text, one line",
                                     b'{"v": 1, "key": "abc", "respo'])
@pytest.mark.parametrize("mode", ["record", "record-missing"])
def test_a_file_that_is_not_a_cassette_is_refused_and_never_shortened(tmp_path, content, mode):
    cas = tmp_path / "notes.json"
    cas.write_bytes(content)
    with pytest.raises(InputError, match="not a meshsim cassette"):
        ReplayBackend(openai(refuse), mode, cas)
    assert cas.read_bytes() == content


def test_replay_over_a_fake_backend_needs_no_event_loop(tmp_path):
    fake = FakeBackend(load_fake_profile(ROOT / "backends" / "fake-default.yaml"), seed=3)
    cas = tmp_path / "f.jsonl"
    rb = ReplayBackend(fake, "record", cas)
    assert rb.synchronous
    out = [rb.complete_sync(r) for r in reqs()]
    rp = ReplayBackend(FakeBackend(load_fake_profile(ROOT / "backends" / "fake-default.yaml"), seed=999), "replay", cas)
    assert [rp.complete_sync(r) for r in reqs()] == out


def test_off_mode_passes_through(tmp_path):
    seen = []
    rb = ReplayBackend(openai(handler(seen)), "off", tmp_path / "none.jsonl")
    asyncio.run(rb.complete(reqs()[0]))
    rb.close()
    assert len(seen) == 1 and not (tmp_path / "none.jsonl").exists()


# ------------------------------------------------------------------ a whole run over HTTP, then offline

class _Chat(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.auth.append(self.headers.get("Authorization"))
        send_json(self, 200, {"choices": [{"message": {"role": "assistant", "content": reply_for(body)},
                                           "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 100, "completion_tokens": 20}})

    def log_message(self, *a):
        pass


def _scenario(tmp_path, port, mode):
    return meshsim.load_scenario(endpoint_scenario(tmp_path, port, mode, "e2e-llm", "MESHSIM_E2E_KEY"))


def test_scenario_records_over_http_then_replays_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("MESHSIM_E2E_KEY", SECRET)
    with serve(_Chat, auth=[]) as srv:
        port = srv.server_address[1]
        rec = meshsim.run(_scenario(tmp_path, port, "record"), out=tmp_path / "rec")
    assert srv.auth and all(a == f"Bearer {SECRET}" for a in srv.auth)
    n_calls = len(srv.auth)
    assert SECRET not in (tmp_path / "cas.jsonl").read_text()
    monkeypatch.delenv("MESHSIM_E2E_KEY")
    rep = meshsim.run(_scenario(tmp_path, port, "replay"), out=tmp_path / "rep")  # server is gone, no key
    # the whole run folder, byte for byte (but provenance.json: times, versions)
    a, b = comparable_files(tmp_path / "rec"), comparable_files(tmp_path / "rep")
    assert {"summary.json", "scenario.resolved.yaml", "tasks.jsonl.gz"} <= set(a)
    assert a == b
    assert rec.summary["backend"]["calls"] == n_calls
    assert rec.transport["recorded"] == n_calls and rec.transport["inner"]["calls"] == n_calls
    assert rep.transport["hits"] == n_calls and rep.transport["misses"] == 0 and rep.transport["inner"]["calls"] == 0
    for d in (tmp_path / "rec", tmp_path / "rep"):
        assert SECRET not in "".join(gzip.decompress(p.read_bytes()).decode() if p.suffix == ".gz" else p.read_text()
                                     for p in d.iterdir())


# ------------------------------------------------------------------ backends fit

def _entry(i, kind, model, correct=None, fields=None, ctx=None, ct=20, wall=None, typ="navigate", text=""):
    e = {"v": 1, "key": f"k{i}", "backend": "openai:x",
         "request": {"kind": kind, "agent": "A1", "model": model, "abilities": ["arithmetic"], "sample": 0,
                     "task": {"index": i, "id": f"t{i}", "type": typ, "dataset": "bbh"}, "context": ctx or {}},
         "call": {"model": f"{model}-id"},
         "response": {"text": text, "fields": fields or {}, "correct": correct, "prompt_tokens": 300 + 100 * (ctx or {})
                      .get("context_items", 0), "completion_tokens": ct, "latency": None, "error": None}}
    if wall is not None:
        e["wall"] = wall
    return e


def test_backends_fit_recovers_rates_scores_tokens_latency(tmp_path):
    from meshsim.backends.fake import load_fake_profile
    from meshsim.cli import main

    rows = []
    i = 0
    for k in range(40):  # strong finalize: 30/40 correct; navigate worse than object_counting
        i += 1
        typ = "navigate" if k % 2 else "object_counting"
        ok = k % 4 != 1
        rows.append(_entry(i, "finalize", "strong", ok, {"final_correct": ok}, ct=10 + k, wall=0.5 + (10 + k) / 50,
                           typ=typ, text=f"final answer {k}"))
    for k in range(20):  # weak finalize: 2/20
        i += 1
        rows.append(_entry(i, "finalize", "weak", k < 2, ct=5 + k, wall=0.2 + (5 + k) / 100))
    from meshsim.backends.replay import text_digest

    for k in range(30):  # strong reviews of those finalize outputs, which they name by digest
        i += 1
        oc = k % 4 != 1
        rows.append(_entry(i, "review", "strong", fields={"score": 0.9 if oc else 0.25},
                           ctx={"action": "finalize", "output_text#": text_digest(f"final answer {k}"),
                                "context_items": k % 3}))
    i += 1
    rows.append(_entry(i, "review", "strong", fields={"score": 0.0},
                       ctx={"action": "contribute", "output_text#": text_digest("half")}))  # ungraded half
    bad = _entry(i + 1, "finalize", "strong", True)
    bad["response"]["error"] = "http_500: x"
    rows.append(bad)
    cas = tmp_path / "c.jsonl"
    cas.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "fitted.yaml"
    runner = cli_runner()
    res = runner.invoke(main, ["backends", "fit", str(cas), "-o", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    p = load_fake_profile(out)
    assert p.graded and p.type_spread == 0.0  # real recordings: graded final texts
    assert p.models["strong"].skill["bbh"] == pytest.approx(30 / 40, abs=1e-3)
    assert p.models["weak"].skill["bbh"] == pytest.approx(2 / 20, abs=1e-3)
    # per type: shrunk toward the role's rate by two pseudo-tasks
    assert p.models["strong"].skill_by_type["bbh"]["navigate"] == pytest.approx((10 + 1.5) / 22, abs=1e-4)
    assert p.models["strong"].skill_by_type["bbh"]["object_counting"] == pytest.approx((20 + 1.5) / 22, abs=1e-4)
    assert p.models["weak"].skill_by_type["bbh"]["navigate"] == pytest.approx((2 + 0.2) / 22, abs=1e-4)
    # right outputs all scored 0.9, wrong ones 0.25: no review ever lands on 'cannot verify' (0.50)
    # or garbage, so the unverifiable class (fitted by EM) holds only the sound and error verdicts
    from meshsim.backends.fake import score_distribution

    unv = score_distribution(p.review, "strong", "contribute", "unverifiable")
    assert unv.get("unverified", 0.0) == pytest.approx(0.0, abs=1e-3) and "garbage" not in unv
    assert unv.get("sound", 0.0) + unv.get("error", 0.0) == pytest.approx(1.0, abs=1e-3)
    assert p.review.granularity == 0.05
    assert p.tokens["review"].prompt == 300 and p.tokens["review"].per_context == 100
    assert p.models["strong"].ttft == pytest.approx(0.5, abs=1e-3) and p.models["strong"].rate == pytest.approx(50)
    assert p.models["weak"].id == "weak-id" and p.models["weak"].rate == pytest.approx(100)
    assert "1 recorded failures skipped" in out.read_text()
    # a run folder that recorded through a replay backend finds its cassette
    run = tmp_path / "run"
    run.mkdir()
    (run / "scenario.resolved.yaml").write_text(yaml.safe_dump({"backend": {"kind": "replay", "cassette": str(cas)}}))
    res = runner.invoke(main, ["backends", "fit", str(run), "-o", str(tmp_path / "f2.yaml")])
    assert res.exit_code == 0 and load_fake_profile(tmp_path / "f2.yaml").models["strong"].skill["bbh"] \
        == p.models["strong"].skill["bbh"]
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(main, ["backends", "fit", str(empty), "-o", str(tmp_path / "f3.yaml")])
    assert res.exit_code == 2 and "no cassette" in res.stderr


def test_cli_prints_transport_and_record_replay_folders_match(tmp_path):
    """`meshsim run` says how calls were served; the folders do not."""
    from click.testing import CliRunner

    from meshsim.cli import main

    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump({
        "name": "cli-replay", "seed": 2, "network": {"topology": {"kind": "complete", "n": 6}},
        "agents": {"profile": "bbh"}, "protocol": {"name": "meshheal"},
        "backend": {"kind": "replay", "mode": "record", "cassette": "c.jsonl",
                    "backend": {"kind": "fake", "profile": "fake-default"}},
        "tasks": {"dataset": "bbh", "count": 14, "block": 7}}))
    r1 = CliRunner().invoke(main, ["run", str(sc), "--out", str(tmp_path / "a")])
    r2 = CliRunner().invoke(main, ["run", str(sc), "--out", str(tmp_path / "b"), "--set", "backend.mode=replay"])
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output + r2.output
    n = len((tmp_path / "c.jsonl").read_text().splitlines())
    assert f"backend: cassette record: 0 replayed, {n} recorded" in r1.output
    assert "backend: cassette replay: " in r2.output and ", 0 recorded" in r2.output
    assert comparable_files(tmp_path / "a") == comparable_files(tmp_path / "b")
    assert "mode" not in yaml.safe_load((tmp_path / "a" / "scenario.resolved.yaml").read_text())["backend"]


def test_validate_and_run_on_a_one_line_json_file_as_cassette_change_nothing(tmp_path):
    """A scenario whose cassette path names an ordinary JSON file: exit 2 with one
    line, and the file keeps every byte (it was truncated to 0 bytes before)."""
    import subprocess
    import sys

    sc = endpoint_scenario(tmp_path, 9, "record-missing", "not-a-cassette", "MESHSIM_NC_KEY")
    notes = tmp_path / "cas.jsonl"
    notes.write_bytes(b'{"name": "my notes", "items": [1, 2, 3]}')
    for cmd in (["validate", str(sc)], ["run", str(sc), "--out", str(tmp_path / "out")]):
        p = subprocess.run([sys.executable, "-m", "meshsim.cli", *cmd], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "MESHSIM_NC_KEY": "k"})
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and "not a meshsim cassette" in p.stderr
        assert notes.read_bytes() == b'{"name": "my notes", "items": [1, 2, 3]}'


@pytest.mark.parametrize("mode", ["record", "record-missing", "replay"])
def test_a_fifo_as_cassette_is_refused_at_once(tmp_path, mode):
    import subprocess
    import sys

    sc = endpoint_scenario(tmp_path, 9, mode, "fifo-cassette", "MESHSIM_FIFO_KEY")
    os.mkfifo(tmp_path / "cas.jsonl")
    for cmd in (["validate", str(sc)], ["run", str(sc), "--out", str(tmp_path / "out")]):
        p = subprocess.run([sys.executable, "-m", "meshsim.cli", *cmd], capture_output=True, text=True, timeout=30,
                           env={**os.environ, "MESHSIM_FIFO_KEY": "k"})
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "cas.jsonl" in p.stderr
