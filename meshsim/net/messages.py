"""Messages and per-kind traffic counters.

A message is a tiny immutable record; building one is on the hot path, so it
is a ``NamedTuple`` (cheapest immutable record in CPython), not a dataclass.
"""
from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Message", "KindStats", "HEADER_BYTES", "payload_size"]

#: Bytes charged to every message on top of its payload (addresses, kind, ids).
HEADER_BYTES = 64


class Message(NamedTuple):
    kind: str
    src: str
    dst: str
    payload: Any
    size: int
    sent_at: float
    rid: int = 0  # non-zero: sent reliably, the receiver acknowledges it


class KindStats:
    """Counters for one message kind."""

    __slots__ = ("sent", "delivered", "dropped_loss", "dropped_down", "bytes")

    def __init__(self) -> None:
        self.sent = 0
        self.delivered = 0
        self.dropped_loss = 0
        self.dropped_down = 0
        self.bytes = 0

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__slots__}


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
