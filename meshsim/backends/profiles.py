"""Helpers shared by the statistical fakes: loading a profile, stable hashing."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import InputError

M = TypeVar("M", bound=BaseModel)


def load_validated(path: str | Path, model: type[M]) -> M:
    """Read a YAML profile into ``model``; one-line InputError naming file and field."""
    path = Path(path)
    if not path.exists():
        raise InputError("backend profile not found", file=str(path))
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise InputError(f"YAML syntax error: {getattr(exc, 'problem', exc)}", file=str(path)) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        e = exc.errors(include_url=False)[0]
        loc = ".".join(str(x) for x in e["loc"])
        raise InputError(e["msg"], file=str(path), field=loc or None) from None


def hash_unit(*parts: Any) -> float:
    """A uniform in (0, 1) from a stable hash of ``parts`` (no global state)."""
    h = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return (int.from_bytes(h, "little") + 0.5) / 2.0 ** 64


def model_role(model: str) -> str:
    """The fakes know two models: ``weak``, and ``strong`` for anything else."""
    return "weak" if model == "weak" else "strong"
