"""Messages and per-kind traffic counters.

A message is a tiny record, built and read on every hop. It is a plain class
with ``__slots__`` rather than a ``NamedTuple``: in the compiled build
(docs/scaling.md) a plain class becomes a C struct whose fields are read
directly, where a named tuple's fields are looked up by name on every read
(issue 33: 5 % of a run's instructions). Nothing changes a message after it
is built.
"""
from __future__ import annotations

from typing import Any

__all__ = ["Message", "KindStats", "HEADER_BYTES", "payload_size"]

#: Bytes charged to every message on top of its payload (addresses, kind, ids).
HEADER_BYTES = 64


class Message:
    __slots__ = ("kind", "src", "dst", "payload", "size", "sent_at", "rid")

    def __init__(self, kind: str, src: str, dst: str, payload: Any, size: int, sent_at: float, rid: int = 0):
        self.kind = kind
        self.src = src
        self.dst = dst
        self.payload = payload
        self.size = size
        self.sent_at = sent_at
        self.rid = rid  # non-zero: sent reliably, the receiver acknowledges it

    def __reduce__(self) -> tuple[Any, ...]:  # pickles the same compiled (a native class has no default way)
        return Message, (self.kind, self.src, self.dst, self.payload, self.size, self.sent_at, self.rid)

    def __repr__(self) -> str:
        return (f"Message(kind={self.kind!r}, src={self.src!r}, dst={self.dst!r}, payload={self.payload!r}, "
                f"size={self.size}, sent_at={self.sent_at}, rid={self.rid})")


class KindStats:
    """Counters for one message kind."""

    __slots__ = ("sent", "delivered", "dropped_loss", "dropped_down", "bytes")

    def __init__(self) -> None:
        self.sent: int = 0
        self.delivered: int = 0
        self.dropped_loss: int = 0
        self.dropped_down: int = 0
        self.bytes: int = 0

    def add(self, other: KindStats) -> None:
        self.sent += other.sent
        self.delivered += other.delivered
        self.dropped_loss += other.dropped_loss
        self.dropped_down += other.dropped_down
        self.bytes += other.bytes

    def as_dict(self) -> dict[str, int]:
        return {"sent": self.sent, "delivered": self.delivered, "dropped_loss": self.dropped_loss,
                "dropped_down": self.dropped_down, "bytes": self.bytes}


def payload_size(payload: Any) -> int:
    """A cheap, deterministic byte estimate of a payload (text ~ 1 byte/char)."""
    if payload is None:
        return 0
    if isinstance(payload, (str, bytes)):
        return len(payload)
    if isinstance(payload, (int, float, bool)):
        return 8
    if isinstance(payload, dict):
        return sum(payload_size(k) + payload_size(v) for k, v in payload.items())
    if isinstance(payload, (list, tuple, set, frozenset)):
        return sum(payload_size(v) for v in payload)
    size = getattr(payload, "size_bytes", None)
    if size is not None:
        return int(size() if callable(size) else size)
    return 32
