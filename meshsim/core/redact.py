"""Keep API keys out of everything meshsim writes.

A backend that reads a key (``api_key_env``) registers it here; every writer
(cassettes, run-folder files and tables, ``error.txt``, the CLI's error line)
passes its text through :func:`scrub`, which replaces the key and every run of
8 or more characters of it by ``***``. A server that echoes the key (in a 400
body, or in the content of a reply) or a 21-character prefix of it is then
caught wherever the text ends up.

Keys shorter than MIN_RUN are never searched for in text: a one-character
key would otherwise mask that character everywhere and corrupt the files a
run reads back. What keeps them (and every secret) off disk is structural:
:func:`structural` removes secrets *by field* from data before it is written
(URL user-info and query values, header values, fields named like secrets),
whatever their length.

At the bottom of the package: imports nothing of meshsim but core.dotted.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .dotted import get_path, nest, split

if TYPE_CHECKING:
    from urllib.parse import SplitResult

__all__ = ["MIN_RUN", "MASK", "register", "scrub", "active", "scope", "public_url", "url_secrets", "structural",
           "SECRET_FIELDS"]

#: the shortest run of a key's characters that is scrubbed (shorter runs are
#: too common in ordinary text to mean anything)
MIN_RUN = 8
MASK = "***"

_lock = threading.Lock()
# key -> its MIN_RUN-grams (a key shorter than MIN_RUN is its own only gram)
_KEYS: dict[str, frozenset[str]] = {}


def register(key: str) -> None:
    """Scrub ``key`` (and its substrings of MIN_RUN or more characters) from now on."""
    if not key or len(key) < MIN_RUN:
        return  # too short to tell from ordinary text: kept off disk by field (structural)
    n = MIN_RUN
    grams = frozenset(key[i:i + n] for i in range(len(key) - n + 1))
    with _lock:
        _KEYS[key] = grams


class scope:
    """``with scope():`` keys registered inside are forgotten on leaving: one
    run's key does not go on masking text in the next run of the same
    process (a notebook, a sweep worker, the test suite)."""

    def __enter__(self) -> "scope":
        with _lock:
            self._saved = dict(_KEYS)
        return self

    def __exit__(self, *exc: object) -> None:
        with _lock:
            _KEYS.clear()
            _KEYS.update(self._saved)


def active() -> bool:
    """Whether any key is registered (writers skip the work otherwise)."""
    return bool(_KEYS)


def scrub(text: str) -> str:
    """``text`` with every run of MIN_RUN+ characters of a registered key masked."""
    if not _KEYS or not text:
        return text
    for key, grams in list(_KEYS.items()):
        if not any(g in text for g in grams):  # the common case, at C speed
            continue
        n = len(next(iter(grams)))
        hit = bytearray(len(text))
        for j in range(len(text) - n + 1):
            if text[j:j + n] in grams:
                hit[j:j + n] = b"\x01" * n
        out = []
        j = 0
        while j < len(text):
            if hit[j]:
                while j < len(text) and hit[j]:
                    j += 1
                out.append(MASK)
            else:
                k = j
                while k < len(text) and not hit[k]:
                    k += 1
                out.append(text[j:k])
                j = k
        text = "".join(out)
    return text


#: fields whose values are secrets wherever they sit in written data
SECRET_FIELDS = frozenset({"api_key", "apikey", "key", "password", "passwd", "secret", "token", "access_token",
                           "authorization", "auth", "credentials"})
#: fields that hold URLs (their user-info and query values are secrets)
URL_FIELDS = frozenset({"base_url", "url", "endpoint"})


def _split(url: str) -> "SplitResult | None":
    from urllib.parse import urlsplit

    try:
        return urlsplit(url)
    except ValueError:
        return None


def public_url(url: str) -> str:
    """``url`` without user-info, and with every query value replaced by MASK."""
    from urllib.parse import parse_qsl, urlencode, urlunsplit

    p = _split(url)
    if p is None:
        return MASK
    try:
        host = p.hostname or ""
        port = p.port
    except ValueError:
        return MASK
    if ":" in host:
        host = f"[{host}]"
    if port:
        host = f"{host}:{port}"
    query = urlencode([(k, MASK) for k, _ in parse_qsl(p.query, keep_blank_values=True)], safe="*")
    return urlunsplit((p.scheme, host, p.path, query, ""))


def url_secrets(url: str) -> list[str]:
    """The secrets a URL carries: user name, password, query values."""
    from urllib.parse import parse_qsl, unquote

    p = _split(url)
    if p is None:
        return []
    out = [unquote(x) for x in (p.username, p.password) if x]
    out += [v for _, v in parse_qsl(p.query, keep_blank_values=True) if v]
    return out


def structural(data: Any) -> Any:
    """A copy of ``data`` (mappings, lists, scalars) with secrets removed by field:
    URL fields lose user-info and query values, header mappings keep their names
    with masked values, secret-named fields are masked."""
    if isinstance(data, dict):
        out: dict[Any, Any] = {}
        for k, v in data.items():
            name = str(k).lower()
            if name == "headers" and isinstance(v, dict):
                out[k] = {h: MASK for h in v}
            elif name in SECRET_FIELDS and isinstance(v, str) and v:
                out[k] = MASK
            elif name in URL_FIELDS and isinstance(v, str):
                out[k] = public_url(v)
            else:
                out[k] = structural(v)
        return out
    if isinstance(data, (list, tuple)):
        return [structural(v) for v in data]
    return data


def redact_value(path: str, value: Any) -> Any:
    """``value`` as :func:`structural` leaves it when it sits at the dotted
    ``path`` of a scenario (``backend.backend.headers.X-Team-Token``: masked;
    ``...base_url``: without user-info and query values)."""
    parts = split(path) or ["_"]
    return get_path(structural(nest(parts, value)), parts)


def redact_set(item: str) -> tuple[str, bool]:
    """A ``--set PATH=VALUE`` (or ``--grid``) item with its value redacted by
    field, and whether anything was removed. The value is read as YAML (as
    ``--set`` reads it), so a mapping that holds a secret field is caught too."""
    if not isinstance(item, str) or "=" not in item:
        return item, False
    path, raw = item.split("=", 1)
    from .files import parse_value

    # lenient: a value the checks refuse is redacted as its text (it is refused where it is applied)
    value = parse_value(raw, "--set", path, lenient=True) if raw.strip() else raw
    red = redact_value(path, value)
    if red == value:
        return item, False
    text = red if isinstance(red, str) else __import__("json").dumps(red, default=str)
    return f"{path}={text}", True
