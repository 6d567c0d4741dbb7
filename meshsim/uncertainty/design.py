"""The sample design of ``meshsim uncertainty``: the budget split, the Morris
trajectories and the Latin hypercube (docs/uncertainty.md).

A *sample* is one position ``u`` in [0, 1] for every assumption factor of the
profile (:class:`meshsim.backends.provenance.Factor`); it runs at every seed
(common random numbers). ``None`` for a factor means "the profile's own value"
(the base point), which need not lie inside the factor's range.

The budget counts simulation runs: samples x seeds. It is split as

* 1 base sample (every factor at the profile's value): seed noise;
* ``r`` Morris trajectories of ``k + 1`` samples each (``k`` factors, 4 levels,
  Morris 1991 / Campolongo et al. 2007 as SALib implements them), ``r`` the
  largest that fits half of the remaining samples, at least 2;
* 2 samples per top factor (``u = 0`` and ``u = 1``, the others at the base):
  the tornado's low and high ends;
* the rest as a Latin hypercube over the top factors (at least ``MIN_LHS``),
  the others at the base: the prediction band.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core.errors import InputError

__all__ = ["require_salib", "LEVELS", "MIN_LHS", "MIN_TRAJECTORIES", "Allocation", "allocate", "morris_design", "lhs_design",
           "end_design"]

LEVELS = 4  # Morris grid levels: u in {0, 1/3, 2/3, 1}, step 2/3 (the usual choice, Saltelli et al. 2008)
MIN_LHS = 10
MIN_TRAJECTORIES = 2  # sigma needs two elementary effects per factor
LHS_DIGITS = 6  # LHS positions are rounded: readable manifests, and nothing below 1e-6 of a range matters


@dataclass(frozen=True)
class Allocation:
    budget: int  # runs asked for
    seeds: int
    factors: int  # k
    top: int  # factors in the band
    trajectories: int  # r

    @property
    def morris(self) -> int:
        return self.trajectories * (self.factors + 1)

    @property
    def ends(self) -> int:
        return 2 * self.top

    @property
    def lhs(self) -> int:
        return self.budget // self.seeds - 1 - self.morris - self.ends

    @property
    def samples(self) -> int:
        return 1 + self.morris + self.ends + self.lhs

    @property
    def runs(self) -> int:
        return self.samples * self.seeds


def require_salib() -> None:
    """One line (exit 2) when SALib is missing: the 'uncertainty' extra installs it."""
    try:
        import SALib  # noqa: F401
    except ImportError:
        raise InputError("meshsim uncertainty needs SALib, which the 'uncertainty' extra installs: "
                         "pip install 'meshsim[uncertainty]'") from None


def minimum_budget(n_seeds: int, k: int, top: int) -> int:
    return (1 + MIN_TRAJECTORIES * (k + 1) + 2 * min(top, k) + MIN_LHS) * n_seeds


def allocate(budget: int, n_seeds: int, k: int, top: int) -> Allocation:
    """Split ``budget`` runs (samples x ``n_seeds``) among base, Morris, ends and LHS."""
    top = min(top, k)
    need = minimum_budget(n_seeds, k, top)
    if budget < need:
        raise InputError(f"too small for {k} factors, {n_seeds} seed{'s' if n_seeds != 1 else ''} and a band over "
                         f"{top}: needs at least {need} runs (1 base + {MIN_TRAJECTORIES} Morris trajectories of "
                         f"{k + 1} + {2 * top} ends + {MIN_LHS} band samples, each at every seed)",
                         field="--budget", value=budget)
    rest = budget // n_seeds - 1
    r = max(MIN_TRAJECTORIES, (rest // 2) // (k + 1))
    while r > MIN_TRAJECTORIES and rest - r * (k + 1) - 2 * top < MIN_LHS:
        r -= 1
    return Allocation(budget, n_seeds, k, top, r)


def morris_design(k: int, trajectories: int, seed: int) -> list[list[float]]:
    """``trajectories`` Morris trajectories over ``k`` factors in [0, 1]^k (SALib, seeded): rows in order,
    trajectory ``t`` is rows ``t (k+1)`` .. ``t (k+1) + k``."""
    from SALib.sample import morris

    X = morris.sample(_problem(k), trajectories, num_levels=LEVELS, seed=seed)
    return [[float(x) for x in row] for row in X]


def lhs_design(dims: int, n: int, seed: int) -> list[list[float]]:
    """``n`` Latin-hypercube positions in [0, 1]^dims (scipy.stats.qmc, seeded)."""
    from scipy.stats import qmc

    X = qmc.LatinHypercube(d=dims, rng=seed).random(n)
    return [[round(float(x), LHS_DIGITS) for x in row] for row in X]


def end_design(top: list[int], k: int) -> list[list[Optional[float]]]:
    """Each top factor at u = 0 and at u = 1, the others at the base (None)."""
    out: list[list[Optional[float]]] = []
    for i in top:
        for u in (0.0, 1.0):
            row: list[Optional[float]] = [None] * k
            row[i] = u
            out.append(row)
    return out


def _problem(k: int) -> dict:
    return {"num_vars": k, "names": [f"f{i}" for i in range(k)], "bounds": [[0.0, 1.0]] * k}


def morris_analyze(k: int, X: list[list[float]], Y: list[float], seed: int, resamples: int = 1000) -> dict:
    """SALib's Morris statistics (mu, mu*, sigma, mu* 95 % bootstrap half-width) per factor."""
    import numpy as np
    from SALib.analyze import morris

    res = morris.analyze(_problem(k), np.asarray(X, dtype=float), np.asarray(Y, dtype=float),
                         num_resamples=resamples, conf_level=0.95, num_levels=LEVELS, seed=seed)
    return {key: [float(v) for v in np.asarray(res[key], dtype=float)]
            for key in ("mu", "mu_star", "sigma", "mu_star_conf")}
