"""OpenAI-compatible chat-completions backend (``kind: openai``).

A profile (``backends/<name>.yaml``) names the endpoint and the model behind
each role the protocols ask for (``strong``, ``weak``; any other model name
is looked up as a role too, else sent as the model id)::

    kind: openai
    name: local-llama
    base_url: http://127.0.0.1:8080/v1
    api_key_env: null            # or the NAME of an environment variable
    models:
      strong: {id: smollm2-135m, ttft: 0.4, rate: 40}
      weak:   {id: smollm2-135m, ttft: 0.4, rate: 40, temperature: 0.7}
    temperature: 0.0
    seed: 0                      # sampling seed (+ the call's sample index)
    max_tokens: 512
    timeout: 60                  # seconds per HTTP request, start to last byte
    max_reply_bytes: 4194304     # a longer reply fails the call (reply_too_large)
    concurrency: 4               # calls in flight at once
    retries: {max: 4, base: 0.5, cap: 30, jitter: 0.5}

The API key is read from the environment variable the profile *names*; it
is sent as a bearer token and never stored in a profile, a cassette, a log,
an error message or ``describe()``: it is registered with
:mod:`meshsim.core.redact`, so the key and every run of 8 or more of its
characters are scrubbed from every reply text and error body (a server that
echoes the key) and from everything meshsim writes. A scenario whose profile
names an unset variable fails at start (``check_openai``), not mid-run, and
:meth:`OpenAIBackend.preflight` asks each endpoint once before the clock
starts, so an unreachable server or a refused key is one line, not a run of
recorded connection failures.

``timeout`` is a deadline for the whole request, from sending it to the last
byte of the reply (connect, headers and body; not per read): a server that
drips a byte every second never holds a request longer than ``timeout``, nor
the preflight longer than ``min(timeout, PREFLIGHT_DEADLINE)``. Bodies, the
preflight's included, are read and inflated under ``max_reply_bytes`` as they
arrive (:mod:`.wire`), and a reply text is cut at ``CHARS_PER_TOKEN_MAX``
characters per ``max_tokens`` token.

Calls run on the backend's own event loop in a background thread (one
``httpx.AsyncClient`` with its connection pool and one
``asyncio.Semaphore`` bounding concurrency), whatever loop the caller
awaits from. 429, 5xx, timeouts, connection errors and unreadable bodies are
retried with exponential backoff and jitter, waiting what ``Retry-After``
asks when the server says. Other 4xx, empty ``choices`` and empty content
are not retried. After the retries a failure is a :class:`Response` with
``error`` set (counted in ``describe()['errors']``): a run never dies of one
bad call. Missing ``usage`` is estimated from text length (``chars_per_token``)
and flagged ``fields['usage_estimated']``.

Simulated latency comes from the model's ``ttft`` / ``rate`` (not the wall
clock); measured wall times are kept in ``describe()`` and in cassettes.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional

from ..core.errors import InputError
from ..core.redact import register as register_secret, scrub, url_secrets
from ..core.calls import Backend, CallKind, LatencyModel, Request, Response, TaskRef
# the profile, its loading and checks live in .openai_profile; its names stay importable from here (__all__)
from .openai_profile import (CHARS_PER_TOKEN_MAX, PREFLIGHT_DEADLINE, ModelEndpoint, OpenAIProfile, _key_vars,
                             _public_url, check_openai, check_openai_spec, load_openai_profile)
from .profiles import find_profile
from .registry import register_backend
from .wire import ACCEPT_ENCODING, BadEncoding, BodyTooLarge, read_body, retry_after

__all__ = ["OpenAIBackend", "OpenAIProfile", "ModelEndpoint", "load_openai_profile", "check_openai", "check_openai_spec",
           "make_openai", "estimate_tokens"]

_JSON_KINDS = {CallKind.INFER, CallKind.REVIEW, CallKind.COMMITTEE}


def estimate_tokens(text: str, chars_per_token: float = 4.0) -> int:
    return int(math.ceil(len(text or "") / chars_per_token)) if text else 0


def _reply_schema(req: Request) -> Optional[dict[str, Any]]:
    """JSON schema of the reply a call kind expects (the score first, so a
    truncated reply still carries it)."""
    if req.kind in (CallKind.REVIEW, CallKind.COMMITTEE):
        unit = {"type": "number", "minimum": 0, "maximum": 1}
        props = {"normal_working_score": unit, "confidence": unit, "specific_failure_found": {"type": "boolean"},
                 "failure_type": {"type": "string"}, "failure_evidence": {"type": "string", "maxLength": 200},
                 "one_sentence_reason": {"type": "string", "maxLength": 300}}
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    if req.kind == CallKind.INFER:
        from ..workload.prompts import _profile

        prof = _profile(req.task.dataset) if req.task and req.task.dataset else None
        vocab = list(req.context.get("vocabulary") or (prof.abilities if prof else ()))
        item: dict[str, Any] = {"type": "string"}
        if vocab:
            item["enum"] = vocab
        return {"type": "object", "properties": {"abilities": {"type": "array", "items": item, "minItems": 2,
                                                               "maxItems": 2}},
                "required": ["abilities"], "additionalProperties": False}
    return None


class _Failure(Exception):
    def __init__(self, category: str, message: str, retryable: bool, retry_after: Optional[float] = None):
        super().__init__(message)
        self.category = category
        self.retryable = retryable
        self.retry_after = retry_after


def grade_text(task: TaskRef, text: str, action: Optional[str] = None) -> Optional[bool]:
    """The observer's grade of a real model's text: a committed final answer
    against the gold one; an intermediate half (Contribute) has none."""
    if action == "contribute" or not text:
        return None
    from ..workload.datasets import grade_task

    return grade_task(task, text)


class OpenAIBackend(Backend):
    """Chat completions over HTTP (see module doc). ``transport`` and ``sleep``
    are injectable for tests (``httpx.MockTransport``, a recording sleep)."""

    synchronous = False

    def grade(self, task: TaskRef, text: str, action: Optional[str] = None) -> Optional[bool]:
        """A real text is graded against the gold answer (observer only)."""
        return grade_text(task, text, action)

    def final_answer(self, task: TaskRef, text: str) -> Optional[str]:
        from ..workload.prompts import extract_answer

        return extract_answer(text, task) if text else None

    def __init__(self, profile: OpenAIProfile, *, seed: int = 0, transport: Any = None,
                 sleep: Optional[Callable[[float], Awaitable[None]]] = None,
                 environ: Optional[dict[str, str]] = None, base_dir: Optional[Path] = None,
                 require_key: bool = True):
        from ..workload.prompts import PromptSet

        self.profile = profile
        self.name = f"openai:{profile.name}"
        self._transport = transport
        self._sleep = sleep or asyncio.sleep
        self._rnd = random.Random(seed)
        env = os.environ if environ is None else environ
        if require_key:
            check_openai(profile, True, env)
        # secrets live only here, keyed by variable name
        self.__keys = {v: env.get(v, "") for v in _key_vars(profile)}
        for key in self.__keys.values():
            register_secret(key)
        # credentials in a URL or an extra header are secrets too (an endpoint may echo them)
        for url in [profile.base_url] + [m.base_url for m in profile.models.values() if m.base_url]:
            for secret in url_secrets(str(url)):
                register_secret(secret)
        for value in profile.headers.values():
            register_secret(str(value))
        #: where the profile came from (errors name it); set by make_openai
        self.source: Optional[str] = None
        self.prompts = PromptSet.from_spec(profile.prompts, base_dir)
        self._lat = {role: LatencyModel(m.ttft, m.rate, m.prefill_rate) for role, m in profile.models.items()}
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._client: Any = None
        self._sem: Optional[asyncio.Semaphore] = None
        self._lock = threading.Lock()
        self.calls = 0
        self.errors: Counter = Counter()
        self.retries = 0
        self.retry_causes: Counter = Counter()
        self.usage_estimated = 0
        self.unparsed = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.wall_seconds = 0.0

    # ------------------------------------------------------------------ interface
    def latency_model(self, model: str) -> LatencyModel:
        return self._lat.get(model) or self._lat.get("strong") or next(iter(self._lat.values()))

    def describe(self) -> dict[str, Any]:
        p = self.profile
        return {"name": self.name, "kind": "openai", "base_url": _public_url(p.base_url),
                "models": {k: v.id for k, v in p.models.items()}, "temperature": p.temperature,
                "seed": p.seed, "seed_mode": p.seed_mode, "calls": self.calls, "errors": dict(sorted(self.errors.items())),
                "retries": self.retries, "retry_causes": dict(sorted(self.retry_causes.items())),
                "usage_estimated": self.usage_estimated, "unparsed_replies": self.unparsed,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "wall_seconds": round(self.wall_seconds, 3), "prompts_overridden": self.prompts.overridden}

    def transport(self) -> dict[str, Any]:
        return {"calls": self.calls, "retries": self.retries, "retry_causes": dict(sorted(self.retry_causes.items())),
                "errors": dict(sorted(self.errors.items())), "wall_seconds": round(self.wall_seconds, 3)}

    async def complete(self, request: Request) -> Response:
        resp, _meta = await self.complete_with_meta(request)
        return resp

    async def complete_with_meta(self, request: Request) -> tuple[Response, dict[str, Any]]:
        """The Response plus what a cassette keeps about the call (wall time, attempts)."""
        loop = self._ensure_loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - always called from a coroutine
            running = None
        if running is loop:
            return await self._call(request)
        fut = asyncio.run_coroutine_threadsafe(self._call(request), loop)
        return await asyncio.wrap_future(fut)

    def complete_sync(self, request: Request) -> Response:
        """Blocking call (scripts, the CLI): runs on the backend's loop thread."""
        fut = asyncio.run_coroutine_threadsafe(self._call(request), self._ensure_loop())
        return fut.result()[0]

    def close(self) -> None:
        with self._lock:
            loop, thread, client = self._loop, self._thread, self._client
            self._loop = self._thread = self._client = None
            self._sem = None
        if loop is None:
            return
        if client is not None:
            try:
                asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=10)
            except Exception:  # pragma: no cover - closing is best effort
                pass
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=10)
        loop.close()

    # ------------------------------------------------------------------ request building
    def endpoint(self, model: str) -> tuple[str, ModelEndpoint]:
        """(role, endpoint) for a Request.model: a role name, else a model id."""
        m = self.profile.models.get(model)
        if m is not None:
            return model, m
        for role, ep in self.profile.models.items():
            if ep.id == model:
                return role, ep
        role = "strong" if "strong" in self.profile.models else next(iter(self.profile.models))
        return role, self.profile.models[role]

    def sampling(self, req: Request) -> dict[str, Any]:
        p = self.profile
        _, ep = self.endpoint(req.model)
        params: dict[str, Any] = {
            "temperature": ep.temperature if ep.temperature is not None else p.temperature,
            "max_tokens": p.max_tokens_by_kind.get(req.kind) or ep.max_tokens or p.max_tokens,
        }
        if "temperature" in req.context:  # gray-failure injection (degrade mode: temperature)
            params["temperature"] = float(req.context["temperature"])
        top_p = ep.top_p if ep.top_p is not None else p.top_p
        if top_p is not None:
            params["top_p"] = top_p
        if p.stop:
            params["stop"] = list(p.stop)
        if p.json_mode and req.kind in _JSON_KINDS:
            schema = _reply_schema(req) if p.json_mode == "schema" else None
            params["response_format"] = ({"type": "json_schema", "json_schema": {"name": req.kind, "schema": schema}}
                                         if schema else {"type": "json_object"})
        return params

    def call_seed(self, req: Request) -> int:
        if self.profile.seed_mode == "per_call":
            return int(req.seed) % (2 ** 31)
        return self.profile.seed + int(req.sample)

    def payload(self, req: Request) -> tuple[str, dict[str, Any]]:
        """(URL, JSON body) of the chat-completions request: no secrets in either."""
        from ..workload.prompts import build_messages

        _, ep = self.endpoint(req.model)
        body = {"model": ep.id, "messages": build_messages(req, self.prompts), **self.sampling(req),
                "seed": self.call_seed(req)}
        base = (ep.base_url or self.profile.base_url).rstrip("/")
        return f"{base}/chat/completions", body

    def key_material(self, req: Request) -> dict[str, Any]:
        """What identifies a call's reply (record/replay key): endpoint model,
        messages, sampling parameters, seed and sample index."""
        _, body = self.payload(req)
        params = {k: v for k, v in body.items() if k not in ("model", "messages", "seed")}
        return {"model": body["model"], "messages": body["messages"], "params": params, "seed": body["seed"],
                "sample": int(req.sample)}

    def _headers(self, ep: ModelEndpoint) -> dict[str, str]:
        return self._headers_for(ep.api_key_env or self.profile.api_key_env)

    def _headers_for(self, var: Optional[str]) -> dict[str, str]:
        # only the codings meshsim inflates itself, under the byte cap (wire.py)
        h = {"Content-Type": "application/json", "Accept-Encoding": ACCEPT_ENCODING, **self.profile.headers}
        key = self.__keys.get(var or "", "")
        if key:
            h["Authorization"] = f"Bearer {key}"
        return h

    def _scrub(self, text: str) -> str:
        return scrub(text)

    # ------------------------------------------------------------------ preflight
    def endpoints(self) -> list[tuple[str, Optional[str]]]:
        """Distinct (base_url, api_key_env) pairs the profile's models use."""
        out: list[tuple[str, Optional[str]]] = []
        for ep in self.profile.models.values():
            pair = ((ep.base_url or self.profile.base_url).rstrip("/"), ep.api_key_env or self.profile.api_key_env)
            if pair not in out:
                out.append(pair)
        return out

    def preflight(self) -> None:
        """One ``GET {base_url}/models`` per endpoint, before the clock starts.

        An endpoint that cannot be reached, does not answer within
        ``preflight_deadline()`` (the whole request: connect, headers and body,
        so a server dripping a header byte a second is ended by it), refuses
        the key (401, 403), says it is not ready (500, 502, 503, 504:
        llama-server while it loads) or sends a body above ``max_reply_bytes``
        (counted while it is inflated) is an :class:`InputError` with a hint.
        Any other answer (200, or 404 from a server without ``/models``) means
        it is there.
        """
        wait = self.preflight_deadline()
        fut = asyncio.run_coroutine_threadsafe(self._preflight(wait), self._ensure_loop())
        try:
            fut.result()  # _preflight ends within ``wait`` (asyncio.wait_for), whatever the server does
        except BaseException:
            fut.cancel()  # Ctrl-C: the request stops with the caller
            # A stream a cap or deadline stopped leaves httpx's async generators open; closed now on the
            # loop, not later by the garbage collector as tasks the loop never runs ("Task was destroyed
            # but it is pending!" beside the one error line). The command ends after this error.
            try:
                asyncio.run_coroutine_threadsafe(self._ensure_loop().shutdown_asyncgens(),
                                                 self._ensure_loop()).result(timeout=2)
            except Exception:
                pass
            raise

    def preflight_deadline(self) -> float:
        """Seconds the preflight may take per endpoint: ``timeout``, at most ``PREFLIGHT_DEADLINE``."""
        return min(self.profile.timeout, PREFLIGHT_DEADLINE)

    async def _preflight(self, wait: float) -> None:
        import httpx

        cap = self.profile.max_reply_bytes
        kw: dict[str, Any] = {"timeout": httpx.Timeout(wait)}
        if self._transport is not None:
            kw["transport"] = self._transport
        hint = ("start it (backends/local-llm.sh start for the local server) or replay from a cassette "
                "(backend kind replay, --set backend.mode=replay)")

        async def get(client: Any, url: str, h: dict[str, str]) -> int:
            async with client.stream("GET", url, headers=h) as r:
                await read_body(r, cap)  # not used; read under the cap so a flood or a bomb stops there
                return r.status_code

        async with httpx.AsyncClient(**kw) as client:
            for base, var in self.endpoints():
                url = f"{base}/models"
                h = {k: v for k, v in self._headers_for(var).items() if k != "Content-Type"}
                where = _public_url(base)
                try:
                    code = await asyncio.wait_for(get(client, url, h), wait)
                except (httpx.TimeoutException, asyncio.TimeoutError):
                    raise InputError(f"the endpoint {where} did not answer GET /models within {wait:g}s (the "
                                     f"whole reply; timeout, at most {PREFLIGHT_DEADLINE:g}s here); is the server "
                                     f"up? {hint}", file=self.source, field="base_url") from None
                except BodyTooLarge as exc:
                    raise InputError(f"the endpoint {where} sent a GET /models {exc} (max_reply_bytes); is base_url "
                                     "an OpenAI-compatible endpoint?", file=self.source, field="base_url") from None
                except BadEncoding as exc:
                    raise InputError(f"the endpoint {where} sent a GET /models reply meshsim cannot read: {exc}",
                                     file=self.source, field="base_url") from None
                except httpx.RequestError as exc:
                    reason = scrub(str(exc) or type(exc).__name__)
                    raise InputError(f"cannot reach the endpoint {where} ({reason}); is the server up? {hint}",
                                     file=self.source, field="base_url") from None
                if code in (401, 403):
                    if var:
                        msg = f"the endpoint {where} refused the API key in ${var} (HTTP {code})"
                    else:
                        msg = (f"the endpoint {where} wants an API key (HTTP {code}); name the "
                               "environment variable that holds it in api_key_env")
                    raise InputError(msg, file=self.source, field="api_key_env" if var else "base_url")
                if code in (500, 502, 503, 504):
                    raise InputError(f"the endpoint {where} is not ready (HTTP {code} on GET /models); "
                                     f"wait until it has loaded its model, or {hint}", file=self.source,
                                     field="base_url")

    # ------------------------------------------------------------------ the loop thread
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                t = threading.Thread(target=loop.run_forever, name=f"meshsim-{self.name}", daemon=True)
                t.start()
                self._loop, self._thread = loop, t
            return self._loop

    def _client_sem(self) -> tuple[Any, asyncio.Semaphore]:
        import httpx

        if self._client is None:
            limits = httpx.Limits(max_connections=self.profile.concurrency,
                                  max_keepalive_connections=self.profile.concurrency)
            kw: dict[str, Any] = {"timeout": httpx.Timeout(self.profile.timeout), "limits": limits}
            if self._transport is not None:
                kw["transport"] = self._transport
            self._client = httpx.AsyncClient(**kw)
            self._sem = asyncio.Semaphore(self.profile.concurrency)
        return self._client, self._sem  # type: ignore[return-value]

    # ------------------------------------------------------------------ one call
    def _delay(self, attempt: int, retry_after: Optional[float]) -> float:
        r = self.profile.retries
        if retry_after is not None:
            return retry_after
        d = min(r.cap, r.base * (2 ** attempt))
        return d * (1.0 - r.jitter * self._rnd.random())

    async def _post(self, client: Any, url: str, body: dict, headers: dict, deadline: float):
        """(status, headers, body) of one POST, the body read and inflated up to
        ``max_reply_bytes`` as it arrives (:mod:`.wire`): an endpoint that sends
        tens of MB, or a gzip bomb, is cut off, not held in memory (issues 19, 30)."""
        async with client.stream("POST", url, json=body, headers=headers, timeout=deadline) as r:
            return r.status_code, r.headers, await read_body(r, self.profile.max_reply_bytes)

    async def _attempt(self, client: Any, url: str, body: dict, headers: dict) -> dict:
        import httpx

        deadline = self.profile.timeout
        try:
            # the whole request under one deadline: httpx's own timeout is per
            # read, so a server dripping a byte a second would never trip it
            code, rh, raw = await asyncio.wait_for(self._post(client, url, body, headers, deadline), deadline)
        except (httpx.TimeoutException, asyncio.TimeoutError) as exc:
            raise _Failure("timeout", f"no complete reply within {deadline:g}s ({type(exc).__name__})", True)
        except BodyTooLarge as exc:
            raise _Failure("reply_too_large", f"{exc} (max_reply_bytes)", False)
        except BadEncoding as exc:
            raise _Failure("bad_encoding", str(exc), False)
        except httpx.RequestError as exc:  # TransportError and the rest (a protocol violation, ...)
            raise _Failure("connection", f"{type(exc).__name__}: {exc}", True)
        text = raw.decode("utf-8", "replace")
        if code == 429 or code >= 500:
            ra = retry_after(rh.get("retry-after"), self.profile.retries.retry_after_cap)
            raise _Failure(f"http_{code}", f"HTTP {code}: {text[:200]!r}", True, ra)
        if code >= 400:
            raise _Failure(f"http_{code}", f"HTTP {code}: {text[:300]!r}", False)
        try:
            data = json.loads(text)
        except ValueError:
            raise _Failure("malformed_json", f"reply is not JSON: {text[:120]!r}", True)
        except RecursionError:  # '[' nested 100k deep: Python's parser gives up, the call fails (issue 30)
            raise _Failure("malformed_json", "reply nests JSON deeper than the parser allows", True) from None
        if not isinstance(data, dict):
            raise _Failure("malformed_json", "reply is not a JSON object", True)
        if "\\u" in text:  # a lone surrogate escape ("\ud800") decodes but can never be written (issue 19)
            try:
                json.dumps(data, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                raise _Failure("malformed_json", "reply holds a lone surrogate (a \\ud800-\\udfff escape) that "
                               "cannot be written as UTF-8", False) from None
        return data

    async def _call(self, req: Request) -> tuple[Response, dict[str, Any]]:
        client, sem = self._client_sem()
        url, body = self.payload(req)
        _, ep = self.endpoint(req.model)
        headers = self._headers(ep)
        r = self.profile.retries
        t0 = time.monotonic()
        attempt = 0
        failure: Optional[_Failure] = None
        data = None
        while True:
            async with sem:
                try:
                    data = await self._attempt(client, url, body, headers)
                    failure = None
                except _Failure as f:
                    # kept without its traceback and context: they hold the attempt's frames (a reply
                    # of up to max_reply_bytes) in a cycle that the raised GC threshold of a run
                    # would keep for dozens of calls (issue 30)
                    failure = f.with_traceback(None)
                    failure.__context__ = None
            if failure is None or not failure.retryable or attempt >= r.max:
                break
            self.retries += 1
            self.retry_causes[failure.category] += 1
            await self._sleep(self._delay(attempt, failure.retry_after))
            attempt += 1
        wall = time.monotonic() - t0
        self.calls += 1
        self.wall_seconds += wall
        meta = {"wall": round(wall, 4), "attempts": attempt + 1}
        if failure is not None:
            return self._fail(failure.category, f"{failure}" + (f" after {attempt + 1} attempts" if attempt else ""),
                              body), meta
        resp = self._response(req, data, body)
        return resp, meta

    def _fail(self, category: str, message: str, body: dict) -> Response:
        self.errors[category] += 1
        return Response(error=self._scrub(f"{category}: {message}"),
                        prompt_tokens=self._prompt_estimate(body), completion_tokens=0,
                        fields={"usage_estimated": True})

    def _prompt_estimate(self, body: dict) -> int:
        cpt = self.profile.chars_per_token
        return sum(estimate_tokens(m.get("content", ""), cpt) + 4 for m in body.get("messages", []))

    def _response(self, req: Request, data: dict, body: dict) -> Response:
        from ..workload.prompts import parse_reply

        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            return self._fail("empty_choices", "reply has no choices", body)
        ch = choices[0] if isinstance(choices[0], dict) else {}
        msg = ch.get("message") if isinstance(ch.get("message"), dict) else {}
        text = msg.get("content")
        if text is None:
            text = ch.get("text")  # legacy completions shape
        if not isinstance(text, str) or not text.strip():
            return self._fail("empty_content", f"reply has no content (finish_reason={ch.get('finish_reason')!r})",
                              body)
        # a server that ignored max_tokens: the text is cut where no tokenizer could still be
        # within it, so what a run holds grows with its calls times max_tokens, never times
        # max_reply_bytes (63 replies of 4 MB took a run to 1.1 GB; issue 30)
        limit = CHARS_PER_TOKEN_MAX * int(body.get("max_tokens") or self.profile.max_tokens)
        cut = len(text) > limit
        if cut:
            text = text[:limit]
        text = self._scrub(text)  # a server that echoes the key: the simulation never sees it
        fields, correct = parse_reply(req, text)
        if fields.get("parsed") is False:
            self.unparsed += 1
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(pt, int) and isinstance(ct, int) and not isinstance(pt, bool) and pt >= 0 and ct >= 0:
            fields = dict(fields, usage_estimated=False)
        else:
            pt = self._prompt_estimate(body)
            ct = estimate_tokens(text, self.profile.chars_per_token)
            self.usage_estimated += 1
            fields = dict(fields, usage_estimated=True)
        fin = ch.get("finish_reason")
        if fin == "length" or cut:
            fields["truncated"] = True
        self.prompt_tokens += pt
        self.completion_tokens += ct
        return Response(text=text, fields=fields, correct=correct, prompt_tokens=pt, completion_tokens=ct)


def make_openai(spec: dict[str, Any], seed: int, base_dir: Optional[Path], *, require_key: bool = True,
                profile: Optional[OpenAIProfile] = None, **kw: Any) -> OpenAIBackend:
    """An OpenAIBackend from a scenario's ``backend:`` spec (``profile`` + overrides); ``profile``:
    the spec's profile as :func:`check_openai_spec` loaded it (read from the spec when not given)."""
    overrides = {k: v for k, v in spec.items() if k not in ("kind", "profile")}
    path = find_profile(spec["profile"], base_dir) if spec.get("profile") else None
    prof = profile if profile is not None else load_openai_profile(path, overrides)
    pdir = path.parent if path is not None else base_dir
    backend = OpenAIBackend(prof, seed=seed, base_dir=pdir, require_key=require_key, **kw)
    backend.source = str(path) if path is not None else None
    return backend


def _build(spec: dict[str, Any], seed: int, base_dir: Optional[Path], need_key: bool,
           profile: OpenAIProfile) -> OpenAIBackend:
    return make_openai(spec, seed, base_dir, require_key=need_key, profile=profile)


register_backend("openai", check_openai_spec, _build, calls_out=True)
