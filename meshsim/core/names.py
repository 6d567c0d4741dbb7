"""Agent names: the papers' ``A1``..``An`` and their natural order.

At the bottom of the package (no meshsim imports), so the network, the graph
generators, the protocols and the figures all sort agents the same way.
"""
from __future__ import annotations

__all__ = ["agent_name", "node_order"]


def agent_name(i: int) -> str:
    """The paper's agent naming: index 0 -> ``A1``."""
    return f"A{i + 1}"


def node_order(name: str) -> tuple[int, str, int]:
    """Sort key: A2 before A10 (natural order, so outputs read the way people expect)."""
    if isinstance(name, str) and name[:1].isalpha() and name[1:].isdigit():
        return (0, name[0], int(name[1:]))
    return (1, str(name), 0)
