"""The OpenAI-compatible backend against httpx.MockTransport: every failure ends as documented.

No network: each test serves chat completions from a handler function and
replaces the backoff sleep with one that records the delays it was asked for.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from meshsim.backends import check_backend, make_backend
from meshsim.core.calls import CallKind, Request, TaskRef
from meshsim.backends.openai import OpenAIBackend, load_openai_profile
from meshsim.cli import main
from meshsim.core.errors import InputError
from tests.helpers import cli_runner

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-test-SECRET-0123456789"
TASK = TaskRef(index=1, id="bbh/object_counting/1", type="object_counting",
               question="I have two apples and a pear. How many fruits do I have?", answer="3",
               required=("arithmetic", "instruction_parsing"), dataset="bbh")


def profile(**over):
    data = {"name": "t", "base_url": "http://llm.test/v1", "api_key_env": "MESHSIM_TEST_KEY",
            "models": {"strong": {"id": "big"}, "weak": {"id": "small", "temperature": 0.7}},
            "retries": {"max": 3, "base": 0.5, "cap": 10, "jitter": 0.0}, "concurrency": 2}
    data.update(over)
    return load_openai_profile(None, data)


class Sleeps:
    def __init__(self):
        self.delays = []

    async def __call__(self, d):
        self.delays.append(d)


def completion(content, usage=True, **extra):
    body = {"id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
    if usage:
        body["usage"] = {"prompt_tokens": 111, "completion_tokens": 22, "total_tokens": 133}
    body.update(extra)
    return body


def backend(handler, sleeps=None, **over):
    return OpenAIBackend(profile(**over), transport=httpx.MockTransport(handler), sleep=sleeps or Sleeps(),
                         environ={"MESHSIM_TEST_KEY": SECRET})


def req(kind=CallKind.FINALIZE, model="strong", sample=0, **ctx):
    return Request(kind=kind, agent="A1", model=model, task=TASK, abilities=("arithmetic",), context=ctx,
                   sample=sample, seed=12345)


def run(b, r):
    try:
        return asyncio.run(b.complete(r))
    finally:
        pass


@pytest.fixture
def closing():
    made = []
    yield made
    for b in made:
        b.close()


def test_success_body_headers_usage_and_grading(closing):
    seen = []

    def handler(request: httpx.Request):
        seen.append(request)
        return httpx.Response(200, json=completion("COMPETENCE_MATCH:partial\n2 apples + 1 pear.\nAnswer: 3"))

    b = backend(handler)
    closing.append(b)
    r = run(b, req())
    assert r.error is None and r.correct is True
    assert r.fields["final_correct"] is True and r.fields["answer"] == "3"
    assert r.fields["competence"] == "partial" and r.fields["usage_estimated"] is False
    assert (r.prompt_tokens, r.completion_tokens) == (111, 22)
    (q,) = seen
    assert str(q.url) == "http://llm.test/v1/chat/completions"
    assert q.headers["authorization"] == f"Bearer {SECRET}"
    body = json.loads(q.content)
    assert body["model"] == "big" and body["temperature"] == 0.0 and body["seed"] == 0
    assert body["messages"][0]["role"] == "system" and "COMPETENCE" in body["messages"][0]["content"]
    assert TASK.question in body["messages"][-1]["content"]
    assert "3" not in body["messages"][-1]["content"].replace(TASK.question, "")  # no ground truth in prompts
    d = b.describe()
    assert d["calls"] == 1 and d["errors"] == {} and d["prompt_tokens"] == 111
    assert SECRET not in json.dumps(d) and "MESHSIM_TEST_KEY" not in json.dumps(d)


def test_weak_role_uses_its_model_and_temperature_and_sample_seed(closing):
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=completion('{"normal_working_score": 0.75}'))

    b = backend(handler)
    closing.append(b)
    r = run(b, req(CallKind.REVIEW, model="weak", sample=2, action="contribute", output_text="2 apples"))
    assert r.fields["score"] == 0.75
    assert bodies[0]["model"] == "small" and bodies[0]["temperature"] == 0.7 and bodies[0]["seed"] == 2


@pytest.mark.parametrize("mode", [True, "schema"])
def test_json_mode_asks_for_json_replies(closing, mode):
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=completion('{"abilities": ["instruction_parsing", "arithmetic"]}'))

    b = backend(handler, json_mode=mode)
    closing.append(b)
    r = run(b, req(CallKind.INFER))
    assert r.fields["pair"] == ["arithmetic", "instruction_parsing"] and r.correct is True
    run(b, req(CallKind.REVIEW))
    run(b, req(CallKind.FINALIZE))
    fmt = [x.get("response_format") for x in bodies]
    assert fmt[2] is None  # free text
    if mode is True:
        assert fmt[0] == fmt[1] == {"type": "json_object"}
    else:
        inf = fmt[0]["json_schema"]["schema"]["properties"]["abilities"]
        assert "arithmetic" in inf["items"]["enum"] and inf["minItems"] == inf["maxItems"] == 2
        rev = fmt[1]["json_schema"]["schema"]
        assert list(rev["properties"])[0] == "normal_working_score"


def test_429_then_success_honours_retry_after(closing):
    n = {"k": 0}

    def handler(request):
        n["k"] += 1
        if n["k"] == 1:
            return httpx.Response(429, headers={"Retry-After": "7"}, json={"error": "rate limited"})
        return httpx.Response(200, json=completion('{"normal_working_score": 1.0}'))

    s = Sleeps()
    b = backend(handler, s)
    closing.append(b)
    r = run(b, req(CallKind.REVIEW))
    assert r.error is None and r.fields["score"] == 1.0
    assert s.delays == [7.0]
    assert b.describe()["retries"] == 1 and b.describe()["retry_causes"] == {"http_429": 1}


def test_503_retry_after_http_date_and_cap(closing):
    n = {"k": 0}

    def handler(request):
        n["k"] += 1
        if n["k"] == 1:
            return httpx.Response(503, headers={"Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"})
        if n["k"] == 2:
            return httpx.Response(503, headers={"Retry-After": "0.25"})
        return httpx.Response(200, json=completion("Answer: 3"))

    s = Sleeps()
    b = backend(handler, s, retries={"max": 3, "base": 0.5, "cap": 10, "jitter": 0.0, "retry_after_cap": 30})
    closing.append(b)
    r = run(b, req())
    assert r.error is None and r.correct is True
    assert s.delays == [30.0, 0.25]  # a far date is capped


def test_5xx_exhausts_retries_with_exponential_backoff(closing):
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(503, text="overloaded")

    s = Sleeps()
    b = backend(handler, s)
    closing.append(b)
    r = run(b, req())
    assert r.error is not None and r.error.startswith("http_503") and "after 4 attempts" in r.error
    assert len(calls) == 4 and s.delays == [0.5, 1.0, 2.0]
    assert r.prompt_tokens > 0 and r.completion_tokens == 0
    assert b.describe()["errors"] == {"http_503": 1}


def test_backoff_jitter_stays_within_bounds(closing):
    s = Sleeps()
    b = backend(lambda r: httpx.Response(500), s, retries={"max": 5, "base": 1.0, "cap": 4.0, "jitter": 0.5})
    closing.append(b)
    run(b, req())
    caps = [1.0, 2.0, 4.0, 4.0, 4.0]
    assert len(s.delays) == 5
    assert all(c * 0.5 <= d <= c for d, c in zip(s.delays, caps))


def test_timeout_then_success_and_timeouts_exhausted(closing):
    n = {"k": 0}

    def flaky(request):
        n["k"] += 1
        if n["k"] == 1:
            raise httpx.ReadTimeout("slow", request=request)
        return httpx.Response(200, json=completion("Answer: 3"))

    b = backend(flaky)
    closing.append(b)
    assert run(b, req()).correct is True

    def always(request):
        raise httpx.ReadTimeout("slow", request=request)

    b2 = backend(always)
    closing.append(b2)
    r = run(b2, req())
    assert r.error.startswith("timeout") and b2.describe()["errors"] == {"timeout": 1}
    assert b2.describe()["retry_causes"] == {"timeout": 3}


def test_connection_error_is_retried(closing):
    n = {"k": 0}

    def handler(request):
        n["k"] += 1
        if n["k"] <= 2:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json=completion("Answer: 3"))

    b = backend(handler)
    closing.append(b)
    assert run(b, req()).correct is True
    assert b.describe()["retry_causes"] == {"connection": 2}


def test_malformed_json_is_retried_then_an_error(closing):
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(200, text="<html>gateway</html>")

    b = backend(handler)
    closing.append(b)
    r = run(b, req())
    assert r.error.startswith("malformed_json") and len(calls) == 4
    assert b.describe()["errors"] == {"malformed_json": 1}


def test_missing_usage_is_estimated_and_flagged(closing):
    b = backend(lambda r: httpx.Response(200, json=completion("x" * 40 + "\nAnswer: 3", usage=False)))
    closing.append(b)
    r = run(b, req())
    assert r.fields["usage_estimated"] is True
    assert r.completion_tokens == 13  # ceil(50 chars / 4)
    assert r.prompt_tokens > 50
    assert b.describe()["usage_estimated"] == 1


def test_empty_choices_and_empty_content_are_errors_without_retry(closing):
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(200, json={"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 0}})

    b = backend(handler)
    closing.append(b)
    r = run(b, req())
    assert r.error.startswith("empty_choices") and len(calls) == 1
    b2 = backend(lambda q: httpx.Response(200, json=completion(None)))
    closing.append(b2)
    assert run(b2, req()).error.startswith("empty_content")


def test_400_is_not_retried_and_never_leaks_the_key(closing):
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(400, json={"error": {"message": f"bad request from {request.headers['authorization']}"}})

    b = backend(handler)
    closing.append(b)
    r = run(b, req())
    assert len(calls) == 1 and r.error.startswith("http_400")
    assert SECRET not in r.error and "***" in r.error


def test_unparsable_review_is_neutral_not_an_error(closing):
    b = backend(lambda r: httpx.Response(200, json=completion("I think it is fine.")))
    closing.append(b)
    r = run(b, req(CallKind.REVIEW))
    assert r.error is None and r.fields["score"] == 0.5 and r.fields["parsed"] is False
    assert b.describe()["unparsed_replies"] == 1


def test_concurrency_is_bounded_and_loops_can_change(closing):
    state = {"now": 0, "max": 0}

    async def handler(request):
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.01)
        state["now"] -= 1
        return httpx.Response(200, json=completion("Answer: 3"))

    b = backend(handler, concurrency=2)
    closing.append(b)

    async def many():
        return await asyncio.gather(*(b.complete(req(sample=k)) for k in range(8)))

    # two separate asyncio.run loops, as LLMClient makes one per batch
    for _ in range(2):
        out = asyncio.run(many())
        assert all(r.correct for r in out)
    assert state["max"] == 2
    assert b.complete_sync(req()).correct is True


def test_sac_score_first_number_clipped_default():
    replies = iter(["0.85", "Confidence: 7", "no idea", "-0.3"])
    b = backend(lambda r: httpx.Response(200, json=completion(next(replies))))
    try:
        got = [b.complete_sync(req(CallKind.SAC_SCORE, response="3")).fields["score"] for _ in range(4)]
    finally:
        b.close()
    # "-0.3": the regex takes the digits (SAC App. B.1); no number: None, and the
    # protocol applies its default (0.5) and counts the unparsable reply
    assert got == [0.85, 1.0, None, 0.3]

    from meshsim.protocols.consensus import parse_score
    from meshsim.core.calls import Response
    assert parse_score(Response(fields={"score": None, "parsed": False})) is None


def test_unset_key_variable_fails_at_start_in_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("MESHSIM_NO_SUCH_KEY", raising=False)
    prof = tmp_path / "ep.yaml"
    prof.write_text("kind: openai\nname: ep\nbase_url: http://127.0.0.1:9/v1\napi_key_env: MESHSIM_NO_SUCH_KEY\n"
                    "models: {strong: {id: m}, weak: {id: m}}\n")
    with pytest.raises(InputError) as ei:
        check_backend({"kind": "openai", "profile": str(prof)}, None)
    msg = str(ei.value)
    assert "MESHSIM_NO_SUCH_KEY" in msg and "\n" not in msg
    with pytest.raises(InputError):
        make_backend({"kind": "openai", "profile": str(prof)}, 0, None)
    # the whole CLI: `meshsim validate` exits 2 with one line
    sc = tmp_path / "s.yaml"
    sc.write_text("name: s\nnetwork: {topology: {kind: complete, n: 6}}\nagents: {profile: bbh}\n"
                  "protocol: {name: meshheal}\nbackend: {kind: openai, profile: ep.yaml}\n"
                  "tasks: {dataset: bbh, count: 7}\n")
    res = cli_runner().invoke(main, ["validate", str(sc)], catch_exceptions=False)
    assert res.exit_code == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "MESHSIM_NO_SUCH_KEY" in lines[0]


def test_profiles_shipped_validate():
    for name in ("local-llama", "openai-example"):
        prof = load_openai_profile(ROOT / "backends" / f"{name}.yaml")
        assert prof.models["strong"].id


@pytest.mark.parametrize("bad, field", [
    ({"headers": {"Authorization": "Bearer x"}}, "headers.Authorization"),
    ({"base_url": "ftp://x"}, "base_url"),
    ({"temperature": 5}, "temperature"),
    ({"bogus": 1}, "bogus"),
])
def test_bad_profiles_are_input_errors(bad, field):
    with pytest.raises(InputError) as ei:
        profile(**bad)
    assert ei.value.field == field
