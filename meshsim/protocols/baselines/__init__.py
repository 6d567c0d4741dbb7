"""The MeshHeal paper's baselines (Sec. 6, App. B.4) on the shared execution layer.

One module per method, each citing its source per mechanism and listing what
it assumes: :mod:`.agentnet` (Yang et al. 2025, code ``zoe-yyx/AgentNet``),
:mod:`.raps` (Li et al. 2026, arXiv 2602.08009; only its abstract was found),
:mod:`.autogen` (Wu et al. 2023, code ``microsoft/autogen``; centralized by
design), :mod:`.symphony` (Guan et al. 2026, arXiv 2602.00966, code
``guanzhaoyang86-lab/symphony2.0``) and :mod:`.sacteams` (SAC as the MeshHeal
paper runs it; Lee et al. 2026, Eq. 2-4). Every one runs on
:mod:`meshsim.protocols.execution` — the same task stream, entry agents,
models, degradation schedule, worker calls and token/call accounting as
MeshHeal — and decides only routing, selection and aggregation.
"""
from __future__ import annotations

from .agentnet import AgentNet
from .autogen import AutoGen
from .raps import RAPS
from .sacteams import SACTeams
from .symphony import Symphony

__all__ = ["AgentNet", "RAPS", "AutoGen", "Symphony", "SACTeams", "BASELINES", "METHODS"]

BASELINES = (AgentNet, RAPS, AutoGen, Symphony, SACTeams)
#: every method of the MeshHeal paper's comparison, in the paper's order of discussion
METHODS = ("meshheal", "agentnet", "raps", "autogen", "symphony", "sac_teams")
