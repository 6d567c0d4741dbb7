"""The one strict pydantic base of every input model (scenarios, events, backend profiles).

An unknown key is an error (a typo must not be silently ignored) and a boolean given where a
number belongs is refused (issue 19)."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from .types import refuse_bool_numbers

__all__ = ["Strict"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, v: Any) -> Any:
        return refuse_bool_numbers(cls, v)
