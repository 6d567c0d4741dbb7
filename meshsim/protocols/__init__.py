"""Protocol registry: ``protocol.name`` in a scenario looks up a class here."""
from __future__ import annotations

from ..core.discovery import Registry
from .base import Protocol, ProtocolContext

__all__ = ["PROTOCOLS", "register_protocol", "Protocol", "ProtocolContext"]

#: a lookup first imports every module of the package that calls register_protocol (meshsim.core.discovery),
#: so a new protocol is one module with its register_protocol(cls) call
PROTOCOLS: Registry[type[Protocol]] = Registry(__name__, "register_protocol")


def register_protocol(cls: type[Protocol]) -> type[Protocol]:
    PROTOCOLS[cls.name] = cls
    return cls


register_protocol(Protocol)

from .routing_only import RoutingProtocol  # noqa: E402

register_protocol(RoutingProtocol)

from .meshheal import MeshHeal  # noqa: E402

register_protocol(MeshHeal)

from .sac import SAC  # noqa: E402
from .cpwbft import CPWBFT  # noqa: E402

register_protocol(SAC)
register_protocol(CPWBFT)

from .baselines import BASELINES  # noqa: E402

for _cls in BASELINES:
    register_protocol(_cls)
