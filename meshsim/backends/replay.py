"""Record / replay wrapper around another backend (``kind: replay``).

::

    backend:
      kind: replay
      mode: record-missing          # record | replay | record-missing | off
      cassette: cassettes/bbh-local.jsonl   # relative to the scenario file
      backend: {kind: openai, profile: local-llama}

The cassette is JSONL, one call per line, keyed by a SHA-256 of the call's
identity: for an OpenAI-compatible backend the endpoint model, the chat
messages, the sampling parameters, the seed and the sample index (for other
backends, the request's kind, model, task, abilities, context, sample and
seed). Modes:

* ``record``: every call goes to the wrapped backend and is appended.
* ``replay``: every call is answered from the cassette, with no network and no
  API key; a call that is not in it stops the run with one line naming it.
* ``record-missing``: answered from the cassette when present (a recorded
  failure counts as missing), else called and appended.
* ``off``: the wrapped backend alone.

Each append is one ``write`` of one line to a file opened in append mode,
flushed and fsynced, so a crash leaves every earlier line intact; a
truncated last line (a crash mid-write) is ignored on reading and cut off
before the next append. When a key appears more than once, the last line
wins. Only the request identity, the chat messages and the reply go into a
line: never headers, never the API key.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Optional

from ..core.dotted import MISSING, get_path
from ..core.errors import InputError
from ..core.redact import scrub
from ..core.calls import Backend, CallKind, LatencyModel, Request, Response, TaskRef
from .registry import build_backend, check_backend, register_backend

__all__ = ["ReplayBackend", "MODES", "call_key", "read_cassette", "request_record", "response_from", "response_to"]

MODES = ("record", "replay", "record-missing", "off")
#: calls whose text is a produced output the observer may grade later
_PRODUCING = frozenset({CallKind.CONTRIBUTE, CallKind.FINALIZE, CallKind.TAKEOVER_CANDIDATE, CallKind.SYNTHESIS,
                        CallKind.SAC_ANSWER, CallKind.SAC_REFINE, "cpwbft_aggregate"})
#: an inner backend's counters that depend on the wire (or on which calls it
#: actually served), left out of the replay's deterministic describe()
_WIRE_KEYS = frozenset({"calls", "errors", "retries", "retry_causes", "usage_estimated", "unparsed_replies",
                        "prompt_tokens", "completion_tokens", "wall_seconds"})
VERSION = 1


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _generic_material(req: Request) -> dict[str, Any]:
    t = req.task
    return {"kind": req.kind, "model": req.model, "task": t.id if t else None, "abilities": list(req.abilities),
            "context": json.loads(_canon(req.context)), "sample": req.sample, "seed": req.seed}


def key_material(inner: Backend, req: Request) -> dict[str, Any]:
    fn = getattr(inner, "key_material", None)
    return fn(req) if callable(fn) else _generic_material(req)


def call_key(material: dict[str, Any]) -> str:
    return hashlib.sha256(_canon(material).encode("utf-8")).hexdigest()


def text_digest(text: Any) -> Optional[str]:
    """A short digest of a text, so a record can say *which* produced text a
    call read (a review's output, Takeover candidates) without storing it twice."""
    if not isinstance(text, str) or not text:
        return None
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: context texts whose digests `backends fit` uses to find what was read
_READ_TEXTS = ("output_text", "candidates", "drafts")


def _scalar_ctx(ctx: dict[str, Any]) -> dict[str, Any]:
    """The small, non-text part of a call's context (what `backends fit` reads),
    plus digests of the produced texts the call read."""
    out: dict[str, Any] = {}
    for k, v in ctx.items():
        if isinstance(v, (bool, int, float)) or v is None or (isinstance(v, str) and len(v) <= 200):
            out[k] = v
        elif isinstance(v, (list, tuple)) and len(v) <= 16 and all(isinstance(x, (bool, int, float)) for x in v):
            out[k] = list(v)
    for k in _READ_TEXTS:
        v = ctx.get(k)
        if isinstance(v, str) and v:
            out[k + "#"] = text_digest(v)
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, str) for x in v):
            out[k + "#"] = [text_digest(x) for x in v]
    return out


def request_record(req: Request) -> dict[str, Any]:
    t = req.task
    return {"kind": req.kind, "agent": req.agent, "model": req.model,
            "task": ({"index": t.index, "id": t.id, "type": t.type, "dataset": t.dataset} if t else None),
            "abilities": list(req.abilities), "sample": req.sample, "context": _scalar_ctx(req.context)}


def response_to(resp: Response) -> dict[str, Any]:
    return {"text": resp.text, "fields": json.loads(_canon(resp.fields)), "correct": resp.correct,
            "prompt_tokens": resp.prompt_tokens, "completion_tokens": resp.completion_tokens,
            "latency": resp.latency, "error": resp.error}


def response_from(d: dict[str, Any]) -> Response:
    return Response(text=d.get("text", ""), fields=dict(d.get("fields") or {}), correct=d.get("correct"),
                    prompt_tokens=int(d.get("prompt_tokens", 0)), completion_tokens=int(d.get("completion_tokens", 0)),
                    latency=d.get("latency"), error=d.get("error"))


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: what each value of a recorded reply must be (``None`` allowed where the check says so); the
#: ``fields`` the protocols read are checked too, so an edited cassette is one line, not a crash mid-run
_RESPONSE_TYPES: dict[str, tuple[str, Any]] = {
    "text": ("a string", lambda v: isinstance(v, str)),
    "fields": ("an object", lambda v: isinstance(v, dict)),
    "correct": ("true, false or null", lambda v: v is None or isinstance(v, bool)),
    "prompt_tokens": ("a whole number >= 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    "completion_tokens": ("a whole number >= 0",
                          lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    "latency": ("a number of seconds >= 0 or null", lambda v: v is None or (_number(v) and v >= 0)),
    "error": ("a string or null", lambda v: v is None or isinstance(v, str)),
}
_FIELD_TYPES: dict[str, tuple[str, Any]] = {
    "pair": ("a list of ability names or null",
             lambda v: v is None or (isinstance(v, list) and all(isinstance(x, str) for x in v))),
    "answer": ("a string or null", lambda v: v is None or isinstance(v, str)),
    "agent": ("a string or null", lambda v: v is None or isinstance(v, str)),
    "score": ("a number or null", lambda v: v is None or _number(v)),
    "confidence": ("a number or null", lambda v: v is None or _number(v)),
    **{k: ("true, false or null", lambda v: v is None or isinstance(v, bool))
       for k in ("parsed", "truncated", "usage_estimated", "graded")},
}


_ENTRY_TYPES: dict[str, tuple[str, Any]] = {
    "request": ("an object", lambda v: v is None or isinstance(v, dict)),
    "call": ("an object", lambda v: v is None or isinstance(v, dict)),
    "wall": ("a number of seconds >= 0", lambda v: v is None or (_number(v) and v >= 0)),
    **{f"request.{k}": ("a string or null", lambda v: v is None or isinstance(v, str))
       for k in ("kind", "agent", "model")},
    "request.task": ("an object or null", lambda v: v is None or isinstance(v, dict)),
    "request.abilities": ("a list of ability names",
                          lambda v: v is None or (isinstance(v, list) and all(isinstance(x, str) for x in v))),
    "request.context": ("an object", lambda v: v is None or isinstance(v, dict)),
    **{f"request.task.{k}": ("a string or null", lambda v: v is None or isinstance(v, str))
       for k in ("id", "type", "dataset")},
    **{f"request.context.{k}": ("a number", lambda v: v is None or _number(v))
       for k in ("round", "context_items")},
}


def _check_entry(d: dict[str, Any], path: str, n: int) -> None:
    """An entry's key and recorded reply have the types a replay serves (issue 30): a wrong-typed
    value is an input error naming the line, the call's key and the field."""
    key = d["key"]
    if not isinstance(key, str) or not key:
        raise InputError("a cassette entry's key must be a non-empty string", file=path, field=f"line {n}: key")
    call = f"line {n} (call {key[:12]})"
    resp = d["response"]
    if not isinstance(resp, dict):
        raise InputError("the recorded reply must be an object", file=path, field=f"{call}: response")
    for name, (what, ok) in _RESPONSE_TYPES.items():
        if name in resp and not ok(resp[name]):
            raise InputError(f"must be {what}", file=path, field=f"{call}: response.{name}",
                             value=resp[name])
    for name, (what, ok) in _FIELD_TYPES.items():
        fields = resp.get("fields") or {}
        if name in fields and not ok(fields[name]):
            raise InputError(f"must be {what}", file=path, field=f"{call}: response.fields.{name}",
                             value=fields[name])
    # what `meshsim backends fit` reads of the request record
    for name, (what, ok) in _ENTRY_TYPES.items():
        v = get_path(d, name, MISSING)
        if v is not MISSING and not ok(v):
            raise InputError(f"must be {what}", file=path, field=f"{call}: {name}", value=v)


def read_cassette(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """(entries, length of the readable prefix in bytes). A partial last line
    (a crash mid-append) is skipped; a corrupt line before it is an error
    naming the line."""
    from ..core.files import is_input_file, read_bytes

    path = Path(path)
    if not is_input_file(path) and not path.exists():
        return [], 0
    raw = read_bytes(path, "cassette")
    entries: list[dict[str, Any]] = []
    good = pos = 0
    n = 0
    while pos < len(raw):
        n += 1
        nl = raw.find(b"\n", pos)
        end = len(raw) if nl < 0 else nl + 1
        line = raw[pos:end].strip()
        if line:
            try:
                d = json.loads(line.decode("utf-8"))
                if not isinstance(d, dict) or "key" not in d or "response" not in d:
                    raise ValueError("not a cassette entry")
            except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: '[' nested 100k deep
                if not raw[end:].strip():
                    break  # the last line is partial: ignore it
                raise InputError("corrupt cassette line (not a JSON call record)", file=str(path),
                                 field=f"line {n}") from None
            _check_entry(d, str(path), n)
            entries.append(d)
        good = end
        pos = end
    return entries, good


class ReplayBackend(Backend):
    #: a recorded run and its replay write the same run folder
    replayable = True

    def __init__(self, inner: Backend, mode: str, cassette: str | Path, fsync: bool = True):
        if mode not in MODES:
            raise InputError(f"unknown replay mode; choose one of {list(MODES)}", field="mode", value=mode)
        self.inner = inner
        self.mode = mode
        self.path = Path(cassette)
        self.fsync = fsync
        self.name = f"replay:{inner.name}"
        self._lock = threading.Lock()
        self._index: dict[str, dict[str, Any]] = {}
        self.cassette_name = self.path.name
        self.hits = self.misses = self.recorded = 0
        self.served = self.prompt_tokens = self.completion_tokens = 0
        self.usage_estimated = self.unparsed = self.truncated = 0
        self.errors: Counter = Counter()
        self._session: set[str] = set()  # keys recorded by this run
        self._inflight: dict[str, Any] = {}  # key -> future of the call on the wire
        # what each served text was graded as when it was produced, and the answer
        # it commits to, per task: a recorded run and its replay grade texts alike
        self._grades: dict[str, dict[str, tuple[Optional[bool], Optional[str]]]] = {}
        self._good: Optional[int] = None  # readable prefix to keep before the first append
        if mode == "off":
            self.synchronous = inner.synchronous
            return
        if mode == "replay":
            from ..core.files import is_input_file

            if not is_input_file(self.path):  # a sweep's Dask worker has it in memory (files.shipped)
                raise InputError("cassette not found (record it first with mode record or record-missing)",
                                 file=str(self.path))
            self.synchronous = True
        else:
            self.synchronous = inner.synchronous
        entries, good = read_cassette(self.path)
        for e in entries:
            self._index[e["key"]] = e
        # A partial last line is cut only before this run's first append (a check
        # such as validate builds the backend and must not change the file), and
        # only in a file that holds call records before it: a file with none is
        # not a cassette, and shortening it would destroy someone's data.
        if mode != "replay" and self.path.exists():
            size = self.path.stat().st_size
            if good < size and not entries:
                raise InputError("not a meshsim cassette (no call record in it); refusing to append to it",
                                 file=str(self.path))
            if size:
                self._good = good

    def _repair(self, good: int) -> None:
        """Cut a partial last line so the next append starts a fresh line."""
        size = self.path.stat().st_size
        if good < size:
            with open(self.path, "r+b") as f:
                f.truncate(good)
        if good and not self.path.read_bytes().endswith(b"\n"):
            self._write(b"\n")

    # ------------------------------------------------------------------ interface
    def latency_model(self, model: str) -> LatencyModel:
        return self.inner.latency_model(model)

    def describe(self) -> dict[str, Any]:
        """Counted from the replies handed to the simulation, so a recorded run and
        its replay describe the same thing (where replies came from is in
        :meth:`transport`)."""
        inner = {k: v for k, v in self.inner.describe().items() if k not in _WIRE_KEYS}
        return {"name": self.name, "cassette": self.cassette_name, "calls": self.served,
                "errors": dict(sorted(self.errors.items())), "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "usage_estimated": self.usage_estimated,
                "unparsed_replies": self.unparsed, "truncated": self.truncated, "inner": inner}

    def transport(self) -> dict[str, Any]:
        return {"mode": self.mode, "cassette": str(self.path), "hits": self.hits, "misses": self.misses,
                "recorded": self.recorded, "inner": self.inner.transport()}

    def grade(self, task: TaskRef, text: str, action: Optional[str] = None) -> Optional[bool]:
        got = self._grades.get(task.id, {}).get(text)
        return got[0] if got is not None and got[0] is not None else self.inner.grade(task, text, action)

    def final_answer(self, task: TaskRef, text: str) -> Optional[str]:
        got = self._grades.get(task.id, {}).get(text)
        return got[1] if got is not None and got[1] is not None else self.inner.final_answer(task, text)

    def forget(self, task_id: str) -> None:
        self._grades.pop(task_id, None)
        self.inner.forget(task_id)

    def _served(self, resp: Response, req: Optional[Request] = None) -> Response:
        if req is not None and req.task is not None and resp.text and req.kind in _PRODUCING:
            ans = (resp.fields or {}).get("answer")
            self._grades.setdefault(req.task.id, {})[resp.text] = (
                resp.correct if isinstance(resp.correct, bool) else None, ans if isinstance(ans, str) else None)
        self.served += 1
        if resp.error is not None:
            self.errors[resp.error.split(":", 1)[0].strip() or "error"] += 1
        self.prompt_tokens += resp.prompt_tokens
        self.completion_tokens += resp.completion_tokens
        f = resp.fields
        self.usage_estimated += bool(f.get("usage_estimated"))
        self.unparsed += f.get("parsed") is False
        self.truncated += bool(f.get("truncated"))
        return resp

    def close(self) -> None:
        self.inner.close()

    def preflight(self) -> None:
        """Replay mode never touches the network, not even to check it."""
        if self.mode != "replay":
            self.inner.preflight()

    def key(self, req: Request) -> str:
        return call_key(key_material(self.inner, req))

    def _lookup(self, k: str) -> Optional[Response]:
        e = self._index.get(k)
        if e is None:
            return None
        resp = response_from(e["response"])
        if self.mode == "record-missing" and resp.error is not None and k not in self._session:
            return None  # retry failures recorded by earlier runs
        return resp

    def _missing(self, req: Request, k: str) -> InputError:
        t = req.task
        where = f"task {t.id}" if t else "no task"
        return InputError(f"no recorded reply for call {req.kind} by {req.agent} (model {req.model}, {where}, "
                          f"sample {req.sample}, key {k[:12]}); re-record with mode record-missing",
                          file=str(self.path))

    def _cached(self, req: Request, k: str) -> Optional[Response]:
        """The recorded reply, or None when the call must go to the wrapped backend.

        A key recorded earlier in this run is always served from the cassette,
        even in ``record`` mode: one key, one reply within a run, as its replay
        will see it (a real endpoint need not answer the same request twice
        alike, e.g. under batched decoding)."""
        if self.mode == "record" and k not in self._session:
            return None
        resp = self._lookup(k)
        if resp is not None:
            self.hits += 1
            return resp
        if self.mode == "replay":
            raise self._missing(req, k)
        return None

    def complete_sync(self, req: Request) -> Response:
        if self.mode == "off":
            return self._served(self.inner.complete_sync(req), req)
        k = self.key(req)
        resp = self._cached(req, k)
        if resp is None:
            # a synchronous inner (a fake) can be recorded without an event loop
            resp = self._append(k, req, self.inner.complete_sync(req), {})
        return self._served(resp, req)

    async def complete(self, req: Request) -> Response:
        if self.mode == "off":
            return self._served(await self.inner.complete(req), req)
        k = self.key(req)
        cached = self._cached(req, k)
        if cached is not None:
            return self._served(cached, req)
        pending = self._inflight.get(k)
        if pending is not None:
            # the same request is already on the wire (e.g. two agents asking
            # the same question at the same instant): share its reply
            self.hits += 1
            return self._served(response_from(response_to(await asyncio.shield(pending))), req)
        fut = asyncio.get_running_loop().create_future()
        self._inflight[k] = fut
        try:
            with_meta = getattr(self.inner, "complete_with_meta", None)
            if callable(with_meta):
                resp, meta = await with_meta(req)
            else:
                resp, meta = await self.inner.complete(req), {}
            resp = self._append(k, req, resp, meta)
            fut.set_result(resp)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: waiters re-raise it, nobody else must
            raise
        finally:
            del self._inflight[k]
        return self._served(resp, req)

    # ------------------------------------------------------------------ writing
    def _append(self, k: str, req: Request, resp: Response, meta: dict[str, Any]) -> Response:
        """Write the call; returns the reply as the cassette holds it (what a replay serves)."""
        self.misses += 1
        entry = {"v": VERSION, "key": k, "backend": self.inner.name, "request": request_record(req),
                 "call": key_material(self.inner, req), "response": response_to(resp),
                 **{m: meta[m] for m in ("wall", "attempts") if m in meta}}
        # the wrapped backend scrubs what it received; this catches a key that
        # reached a prompt any other way (never a line holding a key)
        line = (scrub(_canon(entry)) + "\n").encode("utf-8")
        self._write(line)
        self._index[k] = json.loads(line)
        self._session.add(k)
        self.recorded += 1
        return response_from(self._index[k]["response"])

    def _write(self, data: bytes) -> None:
        if self._good is not None:  # first append of this run: repair a crashed recording's tail
            good, self._good = self._good, None
            self._repair(good)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)


def check_replay_spec(spec: dict[str, Any], base_dir: Optional[Path], need_key: bool = True) -> Any:
    """``backend: {kind: replay, mode, cassette, backend, fsync}``; returns what the wrapped
    backend's check loaded. The wrapped backend needs its key unless the mode only replays."""
    allowed = {"kind", "mode", "cassette", "backend", "fsync"}
    for k in spec:
        if k not in allowed:
            from ..core.types import unknown_key

            raise InputError(unknown_key(k, allowed), field=k)
    mode = spec.get("mode", "record-missing")
    if mode not in MODES:
        raise InputError(f"unknown replay mode; choose one of {list(MODES)}", field="mode", value=mode)
    if mode != "off" and not spec.get("cassette"):
        raise InputError("a replay backend needs 'cassette' (a JSONL file)", field="cassette")
    inner = spec.get("backend")
    if not isinstance(inner, dict) or "kind" not in inner:
        raise InputError("a replay backend wraps another: backend: {kind: openai, profile: ...}", field="backend")
    if inner["kind"] == "replay":
        raise InputError("a replay backend cannot wrap another replay backend", field="backend.kind")
    if mode == "replay":
        path = cassette_path(spec["cassette"], base_dir)
        from ..core.files import is_input_file

        if not is_input_file(path):  # a sweep's Dask worker has it in memory (files.shipped)
            raise InputError("cassette not found (record it first with mode record or record-missing)",
                             field="cassette", value=str(spec["cassette"]))
        read_cassette(path)
    try:
        return check_backend(inner, base_dir, need_key=(mode != "replay"))
    except InputError as exc:
        if exc.file:
            raise
        raise InputError(exc.message, field="backend" + (f".{exc.field}" if exc.field else ""),
                         value=exc.value) from None


def cassette_path(cassette: str, base_dir: Optional[Path]) -> Path:
    p = Path(cassette)
    if base_dir is not None and not p.is_absolute():
        return base_dir / p
    return p


def make_replay(spec: dict[str, Any], seed: int, base_dir: Optional[Path], need_key: bool = True,
                loaded: Any = None) -> ReplayBackend:
    """The replay backend of a spec :func:`check_replay_spec` passed (``loaded``: what it returned)."""
    mode = spec.get("mode", "record-missing")
    inner = build_backend(spec["backend"], seed, base_dir, (mode != "replay"), loaded)
    return ReplayBackend(inner, mode, cassette_path(spec.get("cassette", ""), base_dir),
                         fsync=bool(spec.get("fsync", True)))


def _files(spec: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """The cassette a run reads or writes (absent before its first recording); none with ``mode: off``."""
    cas = spec.get("cassette")
    return {"cassette": (cas, True)} if spec.get("mode", "record-missing") != "off" and isinstance(cas, str) else {}


# the cassette is written and the inner backend called: calls_out; mode and fsync say where answers
# come from, not what was run
register_backend("replay", check_replay_spec, make_replay, calls_out=True, unresolved=("mode", "fsync"),
                 wraps="backend", files=_files)
