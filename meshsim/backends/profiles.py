"""Helpers shared by the statistical fakes: loading a profile, stable hashing."""
from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any, Optional, TypeVar

from pydantic import BaseModel, ValidationError

from ..core.errors import InputError
from ..core.files import load_yaml

M = TypeVar("M", bound=BaseModel)


def load_validated(path: str | Path, model: type[M], overrides: Optional[dict[str, Any]] = None) -> M:
    """Read a YAML profile into ``model``; one-line InputError naming file and field.

    ``overrides`` (dotted path -> value, e.g. ``{"refine.qwen3-4b.sway": 0.5}``)
    replace numbers of the file before validation: how a scenario or a
    sensitivity sweep changes one profile field without a copy of the file
    (``backend: {..., overrides: {...}}``). A path that does not name an
    existing field is an error naming ``overrides.<path>``.
    """
    path = Path(path)
    data = load_yaml(path, "profile")
    if overrides:
        data = apply_overrides(data, overrides, path.stem)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        e = exc.errors(include_url=False)[0]
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            from ..core.types import closest_key

            msg = "unknown key" + closest_key(model, tuple(e["loc"]))
        hit = next((str(k) for k in (overrides or {}) if loc == str(k) or loc.startswith(f"{k}.")
                    or str(k).startswith(f"{loc}.") or (not loc and str(k) in msg)), None)
        if hit is not None:  # the override is at fault, not the file: the caller names its scenario
            raise InputError(f"{msg} (profile {path.stem})", field=f"overrides.{hit}",
                             value=overrides[hit]) from None
        raise InputError(msg, file=str(path), field=loc or None) from None


def apply_overrides(data: Any, overrides: dict[str, Any], source: Optional[str] = None) -> Any:
    """A copy of profile ``data`` with ``overrides`` (dotted path -> value) applied
    (``source`` names the profile in error messages).

    Only existing leaves can be replaced (a typo must not silently add an
    unused field); list items are addressed by index (``score.qwen3-4b.agree.0``).
    """
    if not isinstance(overrides, dict):
        raise InputError("must be a mapping of dotted profile path -> value", field="overrides", value=overrides)
    from ..core.dotted import PathError, set_path

    data = copy.deepcopy(data)
    for path, value in overrides.items():
        try:
            set_path(data, str(path).split("."), value, create=False)
        except PathError:
            where = f" {source}" if source else ""
            raise InputError(f"no such field in the profile{where}", field=f"overrides.{path}", value=value) from None
    return data


def hash_unit(*parts: Any) -> float:
    """A uniform in (0, 1) from a stable hash of ``parts`` (no global state)."""
    h = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return (int.from_bytes(h, "little") + 0.5) / 2.0 ** 64


def model_role(model: str) -> str:
    """The fakes know two models: ``weak``, and ``strong`` for anything else."""
    return "weak" if model == "weak" else "strong"
