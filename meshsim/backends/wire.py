"""Bytes from an HTTP endpoint, bounded as they arrive (issue 30).

An LLM endpoint is outside meshsim's control: it may send a 400 MiB body, a
256 kB gzip that inflates to 256 MiB, or the same bomb wrapped twice
(``Content-Encoding: gzip, gzip``). httpx inflates a whole network chunk at
once, so a size cap checked on what it hands back comes too late. Here the
raw body is read undecoded (``aiter_raw``) and inflated by meshsim itself,
``CHUNK`` bytes of output at a time per encoding layer (``zlib``'s
``max_length``), each layer's output counted against the cap as it is
produced: a bomb stops at the cap having held at most the cap plus one chunk.

At most ``MAX_ENCODINGS`` layers of ``gzip`` / ``deflate`` are decoded; more
layers, or another coding (``br``, ``zstd``: meshsim asks for
``ACCEPT_ENCODING`` only), are refused.
"""
from __future__ import annotations

import contextlib
import email.utils
import time
import zlib
from typing import Any, Iterator, Optional

__all__ = ["ACCEPT_ENCODING", "CHUNK", "MAX_ENCODINGS", "BodyTooLarge", "BadEncoding", "BoundedBody",
           "content_codings", "read_body", "retry_after"]

#: what meshsim asks for (and all it can decode)
ACCEPT_ENCODING = "gzip, deflate"
#: the most bytes one encoding layer inflates at a time
CHUNK = 64 * 1024
#: layers of Content-Encoding decoded; a server that stacks more is refused
MAX_ENCODINGS = 2
_CODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class BodyTooLarge(Exception):
    """The body (raw, or any decoding layer of it) passed the cap."""


class BadEncoding(Exception):
    """A Content-Encoding meshsim does not decode, too many layers, or a body that does not decode."""


def content_codings(headers: Any) -> list[str]:
    """The codings of a response's ``Content-Encoding`` header(s), in the order they were applied."""
    values = headers.get_list("content-encoding", split_commas=True) if hasattr(headers, "get_list") \
        else str(headers.get("content-encoding") or "").split(",")
    codings = [v.strip().lower() for v in values if v.strip() and v.strip().lower() != "identity"]
    if len(codings) > MAX_ENCODINGS:
        raise BadEncoding(f"{len(codings)} layers of Content-Encoding ({', '.join(codings)[:80]}); "
                          f"at most {MAX_ENCODINGS} are decoded")
    for c in codings:
        if c not in _CODINGS:
            raise BadEncoding(f"unsupported Content-Encoding {c[:40]!r} (meshsim asks for {ACCEPT_ENCODING})")
    return codings


class _Layer:
    """One encoding layer, inflated at most CHUNK bytes at a time."""

    def __init__(self, coding: str):
        self.coding = coding
        self.wbits = _CODINGS[coding]
        self.d = zlib.decompressobj(self.wbits)
        self.started = False  # output seen: for deflate, the zlib wrapper (or its absence) is settled
        self.seen = bytearray()  # deflate's input until then, to start over as raw deflate

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self.coding == "deflate" and not self.started:
            self.seen += data
        buf = data
        while True:
            try:
                out = self.d.decompress(buf, CHUNK)
            except zlib.error as exc:
                if self.coding == "deflate" and not self.started and self.wbits > 0:
                    # "deflate" without the zlib wrapper (raw), as some servers send it
                    self.wbits = -zlib.MAX_WBITS
                    self.d = zlib.decompressobj(self.wbits)
                    buf = bytes(self.seen)
                    continue
                raise BadEncoding(f"{self.coding} body does not decode ({exc})") from None
            if out and not self.started:
                self.started, self.seen = True, bytearray()
            if out:
                yield out
            if self.d.eof:
                rest = self.d.unused_data
                if not rest.strip(b"\0"):
                    return  # the end (or padding)
                # gzip allows several members one after the other
                self.d = zlib.decompressobj(self.wbits)
                buf = rest
                continue
            buf = self.d.unconsumed_tail
            if not buf and len(out) < CHUNK:
                return  # input used up and no output left pending


class BoundedBody:
    """Collects a response body as its raw chunks arrive, decoding its
    encodings layer by layer; raises :class:`BodyTooLarge` as soon as the raw
    bytes or any layer's output pass ``cap``."""

    def __init__(self, codings: list[str], cap: int):
        self.cap = cap
        # Content-Encoding lists codings in the order applied: undo the last first
        self.layers = [_Layer(c) for c in reversed(codings)]
        self.sizes = [0] * (len(self.layers) + 1)  # raw, then each layer's output
        self.parts: list[bytes] = []

    def feed(self, raw: bytes) -> None:
        self._push(0, raw)

    def _push(self, i: int, data: bytes) -> None:
        self.sizes[i] += len(data)
        if self.sizes[i] > self.cap:
            what = "body" if not self.layers else "decoded body" if i == len(self.layers) else \
                "raw body" if i == 0 else f"body after undoing {i} of {len(self.layers)} encodings"
            raise BodyTooLarge(f"{what} above {self.cap} bytes")
        if i == len(self.layers):
            self.parts.append(data)
            return
        for piece in self.layers[i].feed(data):
            self._push(i + 1, piece)

    @property
    def size(self) -> int:
        return self.sizes[-1]

    def body(self) -> bytes:
        return b"".join(self.parts)


async def read_body(response: Any, cap: int) -> bytes:
    """The decoded body of an ``httpx`` streaming response, read and inflated
    under ``cap`` (see module doc). The caller bounds the time."""
    size = response.headers.get("content-length")
    if size is not None and size.strip().isdigit() and int(size) > cap:
        raise BodyTooLarge(f"Content-Length {int(size)} above {cap} bytes")
    import httpx

    try:  # an in-memory response (httpx.MockTransport in tests) was read and decoded when it was made
        content = response.content
    except httpx.ResponseNotRead:
        pass
    else:
        if len(content) > cap:
            raise BodyTooLarge(f"body above {cap} bytes")
        return content
    body = BoundedBody(content_codings(response.headers), cap)
    # closed here, not by the garbage collector: a stream left open when a cap or deadline
    # stops it would be finalized by a task the loop may never run ("Task was destroyed")
    async with contextlib.aclosing(response.aiter_raw()) as chunks:
        try:
            async for raw in chunks:
                body.feed(raw)
        except BaseException:
            body.parts.clear()  # the exception's traceback holds this frame: not the bytes read so far
            raise
    return body.body()


def retry_after(value: Optional[str], cap: float) -> Optional[float]:
    """A ``Retry-After`` header (seconds, or an HTTP date) as seconds to wait, within [0, cap];
    ``None`` when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        secs = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        secs = when.timestamp() - time.time()
    if secs != secs:  # NaN
        return None
    return min(cap, max(0.0, secs))
