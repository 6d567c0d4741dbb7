"""``routing``: agents only run distance-vector routing to ability holders.

Used to study the routing layer by itself (convergence after link failures,
loss, partitions) and as the plumbing every MeshHeal agent runs.
"""
from __future__ import annotations

from typing import Annotated, Optional

from pydantic import BaseModel, ConfigDict, Field

from ..net.routing import DistanceVector
from ..types import parse_duration
from .base import Protocol

from pydantic import BeforeValidator

_Dur = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]


class RoutingParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    refresh: _Dur = 5.0
    timeout: Optional[_Dur] = None
    infinity: Annotated[int, Field(ge=2, le=255)] = 16
    jitter: Annotated[float, Field(ge=0.0, le=0.5)] = 0.1


class RoutingProtocol(Protocol):
    name = "routing"
    Params = RoutingParams

    def __init__(self, params, ctx):
        super().__init__(params, ctx)
        self.tables: dict[str, DistanceVector] = {}

    def attach(self, node, abilities):
        p = self.params
        self.tables[node.name] = DistanceVector(
            node, abilities, infinity=p.infinity, refresh=p.refresh, timeout=p.timeout,
            jitter=p.jitter, on_change=self._changed)

    def detach(self, name):
        self.tables.pop(name, None)

    def _changed(self, agent: str, ability: str, distance: int) -> None:
        if self.ctx.route_changed is not None:
            self.ctx.route_changed(agent, ability, distance)

    def routing_tables(self):
        return self.tables
