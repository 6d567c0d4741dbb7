"""What travels with a MeshHeal task: its state X_t and the outputs in it (Sec. 4.1, App. B.1).

Both live in the shared execution layer (:mod:`meshsim.protocols.execution`),
which every method of the paper's comparison uses; re-exported here.
"""
from __future__ import annotations

from ..execution import Output, TaskState

__all__ = ["Output", "TaskState"]
