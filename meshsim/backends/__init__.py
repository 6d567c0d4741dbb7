"""LLM call backends: the interface, fakes, replay and real endpoints.

``make_backend(spec, seed, base_dir)`` builds the backend a scenario's
``backend:`` section names, looked up in :data:`BACKENDS`
(:mod:`.registry`): each backend module registers its kind when imported,
and the registry imports those modules on its first lookup. A ``profile`` is looked up as a path relative to the scenario file,
then as ``backends/<name>.yaml`` in the working folder, then in the
``backends/`` folder next to the installed package (a checkout).
"""
from __future__ import annotations

from .profiles import find_profile
from .registry import BACKENDS, BackendPlan, check_backend, make_backend, plan_backend, register_backend

__all__ = ["make_backend", "check_backend", "find_profile", "BACKENDS", "register_backend", "BackendPlan", "plan_backend"]

# the built-in kinds, imported here only to fix the order error messages list them in; a new kind's
# module needs no line here: BACKENDS imports every module that registers on its first lookup
from . import fake  # noqa: E402,F401  kind: fake (MeshHeal's statistical fake)
from . import null  # noqa: E402,F401  kind: null (no answers: routing-only scenarios)
from . import fake_consensus  # noqa: E402,F401  kind: fake_consensus (SAC / CP-WBFT, docs/sac.md)
from . import openai  # noqa: E402,F401  kind: openai (real endpoints, docs/backends.md)
from . import replay  # noqa: E402,F401  kind: replay (record / replay wrapper, docs/backends.md)
