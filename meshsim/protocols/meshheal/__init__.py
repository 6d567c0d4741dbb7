"""MeshHeal (papers/meshheal-2609.29015.md): self-healing routing of tasks.

The *harness* (task stream, Model-Backed MAS Evaluation, degradation, token
and call accounting, records) is the shared execution layer of
:mod:`meshsim.protocols.execution`, which every baseline of the paper's
comparison runs on too. Every decision is made by the
per-agent controllers in :mod:`.agent` (task flow, routing, probes),
:mod:`.review` (fast timescale) and :mod:`.detector` (slow timescale).
"""
from __future__ import annotations

from .method import MeshHeal
from .params import MeshHealParams

__all__ = ["MeshHeal", "MeshHealParams"]
