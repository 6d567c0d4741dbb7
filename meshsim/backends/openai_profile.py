"""The openai backend's profile: endpoints, models, retries and prompts (``backends/*.yaml``, docs/backends.md).

Its schema, loading (a file with the scenario's own keys on top) and the
checks made before any call: URLs an HTTP client can use, credentials only
in environment variables, those variables set. The client that calls the
endpoints is :mod:`.openai`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, Optional, Union
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, ValidationError

from ..core.errors import InputError
from ..core.files import load_yaml
from ..core.strict import Strict
from .profiles import find_profile

__all__ = ["OpenAIProfile", "ModelEndpoint", "RetrySpec", "load_openai_profile", "check_openai",
           "check_openai_spec", "CHARS_PER_TOKEN_MAX", "PREFLIGHT_DEADLINE"]

# bounded (issue 19): a rate of 1e-320 tokens/s or a backoff cap of 1e308 s would make a
# reply, or a retry's wait, take forever
Pos = Annotated[float, Field(ge=1e-3, le=1e9)]
NonNeg = Annotated[float, Field(ge=0, le=1e6)]
#: a reply's text is cut at this many characters per token of its max_tokens (a token is at most
#: a few characters; a longer text comes from a server that ignored max_tokens) and flagged truncated
CHARS_PER_TOKEN_MAX = 16
#: the longest the preflight waits for one endpoint's whole GET /models (seconds; less when ``timeout`` is)
PREFLIGHT_DEADLINE = 10.0


class ModelEndpoint(Strict):
    id: str
    base_url: Optional[str] = None  # default: the profile's
    api_key_env: Optional[str] = None  # default: the profile's
    ttft: NonNeg = 0.5
    rate: Pos = 50.0
    prefill_rate: NonNeg = 0.0
    temperature: Optional[Annotated[float, Field(ge=0, le=2)]] = None
    top_p: Optional[Annotated[float, Field(gt=0, le=1)]] = None
    max_tokens: Optional[Annotated[int, Field(ge=1)]] = None


class RetrySpec(Strict):
    max: Annotated[int, Field(ge=0, le=20)] = 4  # retries after the first attempt
    base: NonNeg = 0.5  # seconds before the first retry
    cap: NonNeg = 30.0  # longest backoff
    jitter: Annotated[float, Field(ge=0, le=1)] = 0.5  # fraction of the delay drawn at random
    retry_after_cap: NonNeg = 120.0  # longest Retry-After honoured


class OpenAIProfile(Strict):
    kind: Literal["openai"] = "openai"
    name: str
    description: str = ""
    base_url: str
    api_key_env: Optional[str] = None
    models: dict[str, ModelEndpoint]
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0
    top_p: Optional[Annotated[float, Field(gt=0, le=1)]] = None
    seed: int = 0
    #: fixed: the sampling seed is ``seed + sample`` (same prompt -> same reply
    #: across simulation seeds); per_call: the call's own seed from the simulation.
    seed_mode: Literal["fixed", "per_call"] = "fixed"
    max_tokens: Annotated[int, Field(ge=1)] = 512
    max_tokens_by_kind: dict[str, Annotated[int, Field(ge=1)]] = {}
    timeout: Annotated[float, Field(gt=0, le=86400)] = 60.0
    #: a reply longer than this is a failed call (not held in memory, not recorded)
    max_reply_bytes: Annotated[int, Field(ge=1024, le=256 * 1024 * 1024)] = 4 * 1024 * 1024
    concurrency: Annotated[int, Field(ge=1, le=256)] = 4
    retries: RetrySpec = RetrySpec()
    #: on calls whose reply is JSON (reviews, committee rounds, ability
    #: inference): ``true`` asks for ``response_format: json_object``;
    #: ``schema`` sends a JSON schema of the expected reply (grammar-constrained
    #: decoding on llama.cpp; ``json_schema`` on OpenAI), which small models need.
    json_mode: Union[bool, Literal["schema"]] = False
    stop: list[str] = []
    chars_per_token: Pos = 4.0
    headers: dict[str, str] = {}  # extra non-secret headers (never put a key here)
    prompts: Any = None  # {dir, templates} overrides (meshsim.workload.prompts.PromptSet)
    #: where each number comes from (`meshsim backends explain`)
    sources: dict[str, str] = {}


_SECRET_HEADERS = {"authorization", "api-key", "x-api-key", "proxy-authorization"}


def _validate(data: Any, where: Optional[str]) -> OpenAIProfile:
    try:
        prof = OpenAIProfile.model_validate(data)
    except ValidationError as exc:
        e = exc.errors(include_url=False)[0]
        loc = ".".join(str(x) for x in e["loc"])
        if e["type"] == "extra_forbidden":
            from ..core.types import closest_key

            e["msg"] = "unknown key" + closest_key(OpenAIProfile, tuple(e["loc"]))
        raise InputError(e["msg"], file=where, field=loc or None) from None
    if not prof.models:
        raise InputError("profile needs at least one model (e.g. 'strong')", file=where, field="models")
    for h in prof.headers:
        if h.lower() in _SECRET_HEADERS:
            raise InputError("put credentials in an environment variable named by 'api_key_env', not in headers",
                             file=where, field=f"headers.{h}")
    for name, url in [("base_url", prof.base_url)] + [(f"models.{k}.base_url", m.base_url)
                                                      for k, m in prof.models.items() if m.base_url]:
        if not str(url).startswith(("http://", "https://")):
            raise InputError("must be an http(s) URL", file=where, field=name, value=url)
        _check_url(str(url), where, name)
    for h, v in prof.headers.items():
        if not _header_safe(str(h)) or not _header_safe(str(v)):
            raise InputError("header names and values must be printable ASCII", file=where, field=f"headers.{h}")
    return prof


def _header_safe(text: str) -> bool:
    return all(" " <= c <= "~" for c in text)


def _check_url(url: str, where: Optional[str], field: str) -> None:
    """A URL an HTTP client can use: no control characters or spaces, a host, a port in 1-65535."""
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise InputError("URL holds a control character or a space", file=where, field=field)
    try:
        p = urlsplit(url)
        port = p.port
    except ValueError as exc:
        raise InputError(f"not a usable URL: {exc}", file=where, field=field) from None
    if not p.hostname:
        raise InputError("URL names no host", file=where, field=field)
    if port == 0:
        raise InputError("port must be in 1-65535", file=where, field=field)


def load_openai_profile(path: Optional[str | Path], overrides: Optional[dict[str, Any]] = None) -> OpenAIProfile:
    """A profile file (optional) with ``overrides`` (the scenario's own keys) applied on top."""
    data: dict[str, Any] = {}
    where = None
    if path is not None:
        path = Path(path)
        where = str(path)
        data = load_yaml(path, "profile") or {}
        if not isinstance(data, dict):
            raise InputError("a backend profile is a mapping", file=where)
    data = dict(data, **(overrides or {}))
    data.setdefault("name", Path(where).stem if where else "openai")
    return _validate(data, where)


def _key_vars(prof: OpenAIProfile) -> list[str]:
    names = {m.api_key_env or prof.api_key_env for m in prof.models.values()}
    return sorted(n for n in names if n)


def check_openai(prof: OpenAIProfile, need_key: bool = True, environ: Optional[Mapping[str, str]] = None) -> None:
    """Fail at start (one line) when a key variable the profile names is unset."""
    if not need_key:
        return
    env = os.environ if environ is None else environ
    for var in _key_vars(prof):
        if not env.get(var):
            raise InputError(f"environment variable {var} is not set (the profile's api_key_env names it; "
                             "export it, or replay from a cassette)", field="api_key_env", value=var)
        if not _header_safe(env[var]):
            # an HTTP header carries it: say so rather than fail inside the client (the key is not shown)
            raise InputError(f"environment variable {var} holds characters an HTTP header cannot carry "
                             "(non-ASCII or control characters)", field="api_key_env", value=var)


def _public_url(url: str) -> str:
    """A URL without userinfo or query (what describe() may show)."""
    p = urlsplit(url)
    host = p.hostname or ""
    if p.port:
        host = f"{host}:{p.port}"
    return urlunsplit((p.scheme, host, p.path, "", ""))


def check_openai_spec(spec: dict[str, Any], base_dir: Optional[Path], need_key: bool = True) -> OpenAIProfile:
    """``backend: {kind: openai, profile, <profile fields>}``; returns the profile it loaded."""
    from ..workload.prompts import PromptSet

    overrides = {k: v for k, v in spec.items() if k not in ("kind", "profile")}
    path = find_profile(spec["profile"], base_dir) if spec.get("profile") else None
    if path is None and "base_url" not in overrides:
        raise InputError("an openai backend needs 'profile' (or an inline base_url and models)", field="profile")
    prof = load_openai_profile(path, overrides)
    PromptSet.from_spec(prof.prompts, path.parent if path is not None else base_dir)
    check_openai(prof, need_key)
    return prof
