"""``routing``: agents only run distance-vector routing to ability holders.

Used to study the routing layer by itself (convergence after link failures,
loss, partitions) and as the plumbing every MeshHeal agent runs.
"""
from __future__ import annotations

from typing import Annotated, Optional

from pydantic import Field

from ..core.strict import Strict

from ..net.routing import DistanceVector
from ..core.types import parse_duration
from .base import Protocol, Timer

from pydantic import BeforeValidator

#: a protocol time: a microsecond .. about 32 years (MAX_PARAM_SECONDS): a smaller one is below any
#: meaningful timescale, a larger one overflows timer arithmetic or never fires (issue 19)
_Dur = Annotated[float, BeforeValidator(parse_duration), Field(ge=1e-6, le=1e9)]


class RoutingParams(Strict):
    refresh: _Dur = 5.0
    timeout: Optional[_Dur] = None
    infinity: Annotated[int, Field(ge=2, le=255)] = 16
    jitter: Annotated[float, Field(ge=0.0, le=0.5)] = 0.1

    def check(self, sc, G) -> None:
        """Budget before work (issue 19): every agent sends its full vector to
        every neighbour each ``refresh``, so a run costs about
        2 x links x duration / refresh messages; a refresh far below the
        duration would never end."""
        from ..core.errors import InputError

        if not sc.duration:
            return
        est = 2.0 * max(1, G.number_of_edges()) * float(sc.duration) / self.refresh
        lim = sc.limits.events
        if est > lim:
            raise InputError(f"about {est:.3g} routing advertisements (2 x {G.number_of_edges()} links x "
                             f"{float(sc.duration):g}s / refresh {self.refresh:g}s) is above limits.events "
                             f"({lim:g}); raise refresh, or limits.events if you mean it",
                             field="protocol.params.refresh", value=self.refresh)


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

    def timers(self) -> list[Timer]:
        # every agent sends its full vector to every neighbour each refresh
        return [Timer("protocol.params.refresh", float(self.params.refresh), 2 * len(self.ctx.net.links),
                      "routing refreshes")]
