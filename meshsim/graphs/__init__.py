"""Agent graphs: seeded generators, file readers, description and r-robustness.

Layout (each module imports only what is below it):

- :mod:`.registry`: the table of topology kinds, the parameter checker and
  ``relabel`` (nodes ``A1``..``An``). The bottom: generators register into it.
- :mod:`.plain`: complete, G(n,p), G(n,m), regular, ring, path, star.
- :mod:`.ability`: ``ability_sparse`` (MeshHeal App. B.7, Tab. B12); its checks in :mod:`.ability_checks`.
- :mod:`.robust`: ``merg``, ``pa_robust``, ``er_robust``, ``k_circulant`` (SAC App. A).
- :mod:`.robustness`: exact and MILP r-robustness (SAC Def. 3.3), the F-local model;
  its searches on neighbour bit masks are in :mod:`.reach`.
- :mod:`.io`: GraphML and edge-list files.
- :mod:`.build`: ``build(kind, params, seed)`` and ``describe(G)``.

Importing the package registers every generator. ``meshsim.graphs.robustness``
(scipy's MILP) is imported only where it is used.
"""
from ..core.names import agent_name, node_order
from . import ability, plain, robust  # noqa: F401  (register their topology kinds)
from .ability import ability_sparse_graph, check_ability_graph, default_edges
from .build import build, describe
from .io import from_file
from .registry import GENERATORS, register_generator, relabel
from .robust import er_threshold_p

__all__ = [
    "GENERATORS", "register_generator", "build", "describe", "from_file", "relabel",
    "agent_name", "node_order", "er_threshold_p",
    "ability_sparse_graph", "check_ability_graph", "default_edges",
]

