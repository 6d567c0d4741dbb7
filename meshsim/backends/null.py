"""``kind: null``: every call answers nothing (routing-only scenarios); the backend a
scenario without a ``backend:`` section gets too (:class:`meshsim.core.calls.NullBackend`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..core.calls import Backend, NullBackend
from .registry import check_fields, register_backend

__all__ = ["check_null", "build_null"]


def check_null(spec: dict[str, Any], base_dir: Optional[Path], need_key: bool) -> None:
    check_fields(spec, {"kind"})


def build_null(spec: dict[str, Any], seed: int, base_dir: Optional[Path], need_key: bool, loaded: Any) -> Backend:
    return NullBackend()


register_backend("null", check_null, build_null)
