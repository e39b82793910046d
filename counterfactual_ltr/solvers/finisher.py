"""The finisher of the explicit Newton path: the pairs near the kink solved exactly by an interior-point method.

Near the optimum of a problem with many pairs at the kink (sparse or high-dimensional
features: about ``d`` support pairs), the small-``mu`` smoothing levels crawl: each Newton step
lets a few more pairs into the band, an active-set method in disguise. Once the relative gap is
below 1e-2 and the band holds at most ``3 max(d, 100)`` pairs, the pairs within ``10 mu`` of the
kink (at most that many, the closest) are solved *exactly* by
:func:`~counterfactual_ltr.solvers.pair_qp.solve_pair_dual`, every other pair held on its current side;
pairs found on the other side at that solution join the set and it is solved again (three
rounds at most, while the set stays under twice the cap). Its dual point is feasible for the
full problem and its primal point is a candidate, both with exact objectives, so a wrong guess
costs time, never the certificate; the next try waits for the gap to fall fourfold. Where the
band is wider (dense data with far more pairs than features) it is not tried: there the kink
set would be too large to solve and smoothing-Newton converges fast anyway.
"""

from __future__ import annotations

import numpy as np

from . import hessian_free as _hf
from .pair_qp import solve_pair_dual
from .common import aggregate_pairs

__all__ = ["Finisher", "kink_rounds", "finish_cap", "kink_threshold"]

# First tried below this relative gap, on the pairs within this many mu of the kink (the closest
# of them up to this many per feature), only while the band holds no more pairs than that; tried
# again once the gap has fallen by this factor.
_FINISH_START, _FINISH_WIDTH, _FINISH_PAIRS_PER_FEATURE, _FINISH_BACKOFF = 1e-2, 10.0, 3.0, 0.25
# Rounds of the active-set loop around the interior-point solve.
_FINISH_ROUNDS = 3


class Finisher:
    """When to try the exact solve near the kink during one solve, and the try itself.

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr.solvers.working_set import WorkingSet
    >>> X = np.eye(3)
    >>> pairs = WorkingSet(X, np.array([0, 0]), np.array([1, 2]), np.array([10.0, 10.0]), np.ones(3))
    >>> z = np.array([0.5, 0.5])                      # hinge arguments at the current point
    >>> alpha, v, s, P, D = Finisher().attempt(X, pairs, z, 0.1, 1.0, gap=1e-3, target=1e-9, best_P=1.0,
    ...                                        rmatvec=lambda g: X.T @ g)
    >>> v.round(6).tolist(), bool(P - D <= 1e-9)      # both pairs exactly on the margin
    ([0.666667, -0.333333, -0.333333], True)
    """

    def __init__(self):
        self.below = np.inf                      # gap below which the finisher is tried (again)

    def due(self, gap, target, best_P) -> bool:
        """Whether to try now: below the first gap (or a fourfold fall since the last try), above the target.

        Parameters
        ----------
        gap, target : float
            The solve's best duality gap and the gap it aims at.
        best_P : float
            The solve's best objective.

        Returns
        -------
        bool
        """
        return target < gap <= min(self.below, _FINISH_START * max(1.0, abs(best_P)))

    def tried(self, gap):
        """A try at ``gap``: the next waits for the gap to fall fourfold.

        Parameters
        ----------
        gap : float
            The solve's best duality gap at the try.
        """
        self.below = _FINISH_BACKOFF * gap

    def attempt(self, X, pairs, z, mu, margin, gap, target, best_P, rmatvec):
        """``(alpha, v, s, P, D)`` of the exact solve near the kink, or None when it is not tried.

        Parameters
        ----------
        X : array (n_docs, d) or scipy.sparse matrix
            Feature matrix.
        pairs : WorkingSet
            The pairs (:class:`~counterfactual_ltr.solvers.working_set.WorkingSet`).
        z : array (n_working,)
            The working pairs' hinge arguments at the current point.
        mu : float
            The smoothing level.
        margin : float
            The hinge's margin.
        gap, target : float
            The solve's best duality gap and the gap it aims at.
        best_P : float
            The solve's best objective.
        rmatvec : callable
            ``g -> X^T g``.

        Returns
        -------
        tuple ``(alpha, v, s, P, D)`` or None
            The full problem's dual point and ``v = X^T g(alpha)``, the primal candidate's
            scores, and both exact objectives.
        """
        if not self.due(gap, target, best_P):
            return None
        kink = _kink_pairs(z, mu, X.shape[1])
        if kink is None:
            return None
        self.tried(gap)
        return _finish_on_kink(X, pairs.i, pairs.j, pairs.Cc, z, kink, margin, pairs.fixed_v, pairs.fixed_sum,
                               pairs.fixed_g, target, rmatvec, X.shape[0])


def finish_cap(d):
    """The most pairs the finisher solves exactly at ``d`` features (``3 max(d, 100)``; twice that with its rounds).

    Parameters
    ----------
    d : int
        Number of features.

    Returns
    -------
    int

    Examples
    --------
    >>> finish_cap(10), finish_cap(1000)
    (300, 3000)
    """
    return int(_FINISH_PAIRS_PER_FEATURE * max(d, 100))


def kink_threshold(distances, mu, d):
    """The largest ``|z|`` of a kink pair: the pairs within ``10 mu`` of the kink, the closest ``finish_cap(d)``.

    Parameters
    ----------
    distances : array
        ``|z|`` of pairs within ``10 mu`` of the kink (all of them, or each part's closest
        ``finish_cap(d)``: the threshold is the same).
    mu : float
        The smoothing level.
    d : int
        Number of features.

    Returns
    -------
    float
        Pairs with ``|z| <= threshold`` (and ``< 10 mu``) make the kink set.

    Examples
    --------
    >>> import numpy as np
    >>> kink_threshold(np.arange(400.0), 100.0, 10)       # 300 closest of 400
    299.0
    """
    cap = finish_cap(d)
    if distances.size <= cap:
        return np.inf
    return float(np.partition(distances, cap - 1)[cap - 1])


def near_kink(z, mu):
    """The pairs within ``_FINISH_WIDTH mu`` of the kink (a mask over ``z``)."""
    return np.abs(z) < _FINISH_WIDTH * mu


def _kink_pairs(z, mu, d):
    """The working pairs closest to the kink (within ``_FINISH_WIDTH mu``, at most the finisher's cap)."""
    cap = finish_cap(d)
    if np.count_nonzero((z > 0.0) & (z < mu)) > cap:
        return None                              # a band this wide means a kink set too large to solve
    near = np.flatnonzero(near_kink(z, mu))
    if near.size > cap:
        near = near[np.argpartition(np.abs(z[near]), cap - 1)[:cap]]
    return near if near.size else None


def kink_rounds(restricted, candidate, margin, atol, d):
    """The finisher's active-set loop over any store of pairs (arrays in memory, partitions on a cluster).

    Each round solves the problem exactly over the kink set, every other pair held on its side
    (:func:`~counterfactual_ltr.solvers.pair_qp.solve_pair_dual`), and evaluates the candidate exactly;
    pairs found on the other side join the set, up to ``_FINISH_ROUNDS`` rounds and twice
    :func:`finish_cap` pairs.

    Parameters
    ----------
    restricted : callable
        ``() -> (q, Z, c, held)``: ``v``'s part from the pairs held above the kink (``X^T g``
        plus screened pairs'), the kink pairs' feature differences ``Z`` (k, d) and weights
        ``c``, and the dual sum of the held pairs (their weights plus screened pairs').
    candidate : callable
        ``(lam, v) -> (P, n_wrong, n_kink, point)``: the exact objective at ``v``, the pairs
        outside the set found on the other side there (the set grows by them for the next
        round), the set's size before, and what to return with the point.
    margin : float
        The hinge's margin.
    atol : float
        The gap at which to stop.
    d : int
        Number of features.

    Returns
    -------
    tuple ``(point, v, P, D)``
        The round with the smallest gap: ``candidate``'s point, ``v`` and both exact objectives.

    Examples
    --------
    Two pairs of rows ``e_0 - e_1`` and ``e_0 - e_2`` at the kink, weight 10 (as in :class:`Finisher`):

    >>> import numpy as np
    >>> Z = np.array([[1.0, -1.0, 0.0], [1.0, 0.0, -1.0]])
    >>> def candidate(lam, v):
    ...     return 0.5 * v @ v + 10.0 * np.maximum(1.0 - Z @ v, 0.0).sum(), 0, 2, None
    >>> _, v, P, D = kink_rounds(lambda: (np.zeros(3), Z, np.full(2, 10.0), 0.0), candidate, 1.0, 1e-9, 3)
    >>> v.round(6).tolist(), bool(P - D <= 1e-9)
    ([0.666667, -0.333333, -0.333333], True)
    """
    best = None
    cap = 2 * finish_cap(d)
    for _ in range(_FINISH_ROUNDS):
        q, Z, c, held = restricted()
        lam, v, _ = solve_pair_dual(Z, q, c, margin, atol)
        D = margin * (held + float(lam.sum())) - 0.5 * float(v @ v)
        P, n_wrong, n_kink, point = candidate(lam, v)
        if best is None or P - D < best[2] - best[3]:
            best = (point, v, P, D)
        if P - D <= atol or not n_wrong or n_kink + n_wrong > cap:
            break                                # (too many held on the wrong side: not near enough yet)
    return best


def _finish_on_kink(X, i, j, Cc, z, kink, margin, fixed_v, fixed_sum, fixed_g, atol, rmatvec, n):
    """Solve the problem exactly over the pairs near the kink, every other pair held on its side.

    Returns the full problem's dual point (``alpha``, ``v = X^T g(alpha)``), the primal
    candidate ``v`` with its scores, and both exact objectives (:func:`kink_rounds` on the
    pair arrays). Where the held sides are those of the optimum, the two objectives meet;
    otherwise they are still a valid bound and a candidate (see :mod:`~counterfactual_ltr.solvers.pair_qp`).
    """
    held = z > 0.0                               # side each pair outside the kink set is held on
    in_kink = np.zeros(z.size, dtype=bool)
    in_kink[kink] = True

    def restricted():
        top = held & ~in_kink
        q = fixed_v + rmatvec(aggregate_pairs(i[top], j[top], Cc[top], n))
        kink = np.flatnonzero(in_kink)
        Z = X[i[kink]] - X[j[kink]]
        return q, (Z.toarray() if _hf.is_sparse(Z) else Z), Cc[kink], fixed_sum + float(Cc[top].sum())

    def candidate(lam, v):
        alpha = np.where(held & ~in_kink, Cc, 0.0)
        alpha[in_kink] = lam
        s = X @ v
        z_new = margin - (s[i] - s[j])
        P = 0.5 * float(v @ v) + margin * fixed_sum - float(s @ fixed_g) + float(np.dot(Cc, np.maximum(z_new, 0.0)))
        wrong = ~in_kink & ((z_new > 0.0) != held)
        n_kink = int(in_kink.sum())
        in_kink[wrong] = True                    # the next round's set
        return P, int(wrong.sum()), n_kink, (alpha, s)

    (alpha, s), v, P, D = kink_rounds(restricted, candidate, margin, atol, X.shape[1])
    return alpha, v, s, P, D
