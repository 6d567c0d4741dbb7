"""Keep API keys out of everything meshsim writes.

A backend that reads a key (``api_key_env``) registers it here; every writer
(cassettes, run-folder files and tables, ``error.txt``, the CLI's error line)
passes its text through :func:`scrub`, which replaces the key and every run of
8 or more characters of it by ``***``. A server that echoes the key (in a 400
body, or in the content of a reply) or a 21-character prefix of it is then
caught wherever the text ends up.

At the bottom of the package: imports nothing of meshsim.
"""
from __future__ import annotations

import threading

__all__ = ["MIN_RUN", "MASK", "register", "scrub", "active", "scope"]

#: the shortest run of a key's characters that is scrubbed (shorter runs are
#: too common in ordinary text to mean anything)
MIN_RUN = 8
MASK = "***"

_lock = threading.Lock()
# key -> its MIN_RUN-grams (a key shorter than MIN_RUN is its own only gram)
_KEYS: dict[str, frozenset[str]] = {}


def register(key: str) -> None:
    """Scrub ``key`` (and its substrings of MIN_RUN or more characters) from now on."""
    if not key:
        return
    n = min(MIN_RUN, len(key))
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
