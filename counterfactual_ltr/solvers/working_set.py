"""The pairs the explicit Newton path iterates on, and the pairs it fixes: gap-safe screening and speculation.

A pair whose dual variable is known at the optimum -- ``C c_p`` for a pair violated there,
``0`` for an idle one -- leaves the working set: a violated pair contributes a linear term
(its aggregate ``fixed_g``, ``fixed_sum`` of its weights and ``fixed_v = X^T fixed_g``), an
idle one nothing, and Newton iterations run on the rest.

*Gap-safe screening* (Fercoq, Gramfort & Salmon 2015; Shibagaki et al. 2016 for SVM samples):
the objective is 1-strongly convex, so ``||w - w*||^2 <= 2 (P(w) - D)``, and a pair whose hinge
argument ``z_p(w)`` exceeds ``||x_i - x_j|| r`` in absolute value keeps its sign at the optimum.
Fixing such a pair leaves the optimum unchanged. It starts below a relative gap of 1e-3, where
the ball is narrow enough to decide pairs, and only when it fixes a tenth of them at once (each
rebuild costs a pass over the pairs). Pair norms are first bounded by the rows' centred norms;
exact norms (a gather of two rows per pair) only where a probe says they would pay.

*Speculation* (warm starts): pairs more than one margin from the kink at the start point are
fixed on their side from the first iteration. That guess carries no certificate, so a solve that
converges on the working set is checked on every pair (:meth:`WorkingSet.certify_or_release`);
pairs found on the wrong side are released and the solve goes on. After three releases
everything is released and only safe screening remains. The reported gap is always that of
the full problem.
"""

from __future__ import annotations

import numpy as np

from .._docs import fill_doc
from . import hessian_free as _hf
from .common import aggregate_pairs

# The section both objectives' docstrings share: a ``{name}`` line is filled from it at import.
_doc = fill_doc({
    "objective_sections": "Parameters\n----------\ns : array (n_docs,)\n    Scores ``X w``.\n"
                          "w : array (d,)\n    The weights.\n"
                          "margin : float\n    The hinge's margin.\n\nReturns\n-------\nfloat",
})

__all__ = ["WorkingSet", "hinge_objective"]

# Warm starts: pairs with |z| beyond this many margins start fixed; release rounds before giving up.
_SPECULATE, _MAX_RELEASES = 1.0, 3
# Screening starts below this relative gap and compacts when it drops this share of the pairs.
_SCREEN_START, _SCREEN_MIN_SHARE = 1e-3, 0.1
# Pairs whose exact norms estimate what exact norms would screen.
_NORM_PROBE = 1024

_VIOLATED, _IDLE = 1, 2


def hinge_objective(s, w, i, j, Cc, margin, fixed_sum=0.0, fixed_g=None):
    """Primal objective at ``w`` from its scores ``s = X w``, pairs fixed as violated entering linearly.

    Parameters
    ----------
    s : array (n_docs,)
        Scores ``X w``.
    w : array (d,)
        The weights.
    i, j : int arrays (n_pairs,)
        The pairs.
    Cc : array (n_pairs,)
        ``C`` times the pair weights.
    margin : float
        The hinge's margin.
    fixed_sum : float, default 0
        ``sum C c`` of the pairs fixed as violated.
    fixed_g : array (n_docs,), optional
        Their per-document aggregate.

    Returns
    -------
    float
        ``0.5 ||w||^2 + margin fixed_sum - s.fixed_g + sum_p Cc_p max(0, margin - (s_i - s_j))``.

    Examples
    --------
    >>> import numpy as np
    >>> hinge_objective(np.array([1.0, 0.5]), np.array([1.0, 0.0]), np.array([0]), np.array([1]),
    ...                 np.array([2.0]), 1.0)      # 0.5 + 2 * (1 - 0.5)
    1.5
    """
    linear = 0.0 if fixed_g is None else margin * fixed_sum - float(s @ fixed_g)
    return 0.5 * float(w @ w) + linear + float(np.dot(Cc, np.maximum(margin - (s[i] - s[j]), 0.0)))


class WorkingSet:
    """All pairs ``(all_i, all_j, all_Cc)``, the working ones ``(i, j, Cc)`` and the fixed ones' linear term.

    ``state`` per pair: 0 working, 1 fixed violated (``alpha = C c``), 2 fixed idle
    (``alpha = 0``); the working arrays and the fixed aggregate (``fixed_g``, ``fixed_sum``,
    ``fixed_v = X^T fixed_g``) are rebuilt whenever it changes.

    Parameters
    ----------
    X : array (n_docs, d) or scipy.sparse matrix
        Feature matrix; the pairs index its rows.
    i, j : int arrays (n_pairs,)
        All pairs of the problem.
    Cc : array (n_pairs,)
        ``C`` times the pair weights.
    row_norm : array (n_docs,)
        Bounds on ``||x_r - m||`` for one fixed centre ``m`` (they bound the pair norms).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.eye(3)
    >>> pairs = WorkingSet(X, np.array([0, 0]), np.array([1, 2]), np.array([1.0, 1.0]), np.ones(3))
    >>> pairs.speculate(np.array([3.0, 0.5]), margin=1.0)     # the first pair is far inside the margin
    >>> pairs.i.tolist(), pairs.fixed_sum, pairs.fixed_v.tolist()
    ([0], 1.0, [1.0, -1.0, 0.0])
    """

    def __init__(self, X, i, j, Cc, row_norm):
        self.X, self.n = X, X.shape[0]
        self.all_i, self.all_j, self.all_Cc = i, j, Cc
        self.row_norm = row_norm
        self.state = np.zeros(i.size, dtype=np.int8)
        self.work, self.i, self.j, self.Cc = np.arange(i.size), i, j, Cc
        self.fixed_g, self.fixed_sum, self.fixed_v = np.zeros(self.n), 0.0, np.zeros(X.shape[1])
        self.pair_norm = self.norm_exact = None   # over all pairs, filled when screening starts
        self.screened_at_gap, self.releases = np.inf, 0

    @property
    def any_fixed(self) -> bool:
        return bool(self.state.any())

    def _rebuild(self):
        work = np.flatnonzero(self.state == 0)
        viol = self.state == _VIOLATED
        g = aggregate_pairs(self.all_i[viol], self.all_j[viol], self.all_Cc[viol], self.n)
        self.work, self.i, self.j, self.Cc = work, self.all_i[work], self.all_j[work], self.all_Cc[work]
        self.fixed_g, self.fixed_sum, self.fixed_v = g, float(self.all_Cc[viol].sum()), self.X.T @ g

    @_doc
    def objective(self, s, w, margin):
        """The objective of the problem on the working set (fixed violated pairs linear) at ``w``.

        {objective_sections}
        """
        return hinge_objective(s, w, self.i, self.j, self.Cc, margin, self.fixed_sum, self.fixed_g)

    @_doc
    def full_objective(self, s, w, margin):
        """The objective of the full problem (every pair's hinge) at ``w``.

        {objective_sections}
        """
        return hinge_objective(s, w, self.all_i, self.all_j, self.all_Cc, margin)

    def speculate(self, z, margin):
        """Fix every pair further than ``_SPECULATE`` margins from the kink at a warm start (a guess).

        Parameters
        ----------
        z : array (n_pairs,)
            Hinge arguments ``margin - (s_i - s_j)`` of all pairs at the start point.
        margin : float
            The hinge's margin.
        """
        reach = _SPECULATE * max(abs(margin), 1e-12)
        self.state[z > reach], self.state[z < -reach] = _VIOLATED, _IDLE
        if self.state.any():
            self._rebuild()

    def screen(self, z, P, D, margin, exact_norms, rng) -> bool:
        """Fix the working pairs that keep their side over the ball ``||w - w*||^2 <= 2 (P - D)``.

        Parameters
        ----------
        z : array (n_working,)
            The working pairs' hinge arguments at the current point.
        P : float
            The objective (of the problem on the working set) at that point.
        D : float
            The best dual value.
        margin : float
            The hinge's margin.
        exact_norms : bool
            Whether exact pair norms may be gathered where the row-norm bound does not decide.
        rng : numpy Generator
            Draws the probe that tells whether exact norms pay.

        Returns
        -------
        bool
            Whether pairs were fixed (the working set changed).
        """
        if not P - D < min(_SCREEN_START * max(1.0, abs(P)), 0.5 * self.screened_at_gap):
            return False
        self.screened_at_gap = P - D
        radius = np.sqrt(2.0 * max(P - D, 0.0)) * (1.0 + 1e-9)
        if self.pair_norm is None:
            # ||x_i - x_j|| <= ||x_i - m|| + ||x_j - m||: exact norms only where this does not decide.
            self.pair_norm = self.row_norm[self.all_i] + self.row_norm[self.all_j]
            self.norm_exact = np.zeros(self.all_i.size, dtype=bool)
        work = self.work
        norms = self.pair_norm[work]
        undecided = (np.abs(z) <= norms * radius) & ~self.norm_exact[work]
        if undecided.any() and exact_norms and _exact_norms_pay(self.X, z, norms, undecided, work, self.all_i,
                                                                 self.all_j, radius, rng):
            rows = work[undecided]
            norms[undecided] = self.pair_norm[rows] = _hf.pair_norms(self.X, self.all_i[rows], self.all_j[rows])
            self.norm_exact[rows] = True
        reach = norms * radius + 1e-12 * abs(margin)
        viol, idle = z > reach, z < -reach
        if (viol | idle).sum() < max(1, _SCREEN_MIN_SHARE * self.i.size):
            return False
        self.state[work[viol]], self.state[work[idle]] = _VIOLATED, _IDLE
        self._rebuild()
        return True

    def certify_or_release(self, s, w, D, tol, margin) -> bool:
        """Whether ``w`` (scores ``s``) is certified to ``tol`` by the dual value ``D`` on the full problem.

        If not, fixed pairs found on the wrong side of the kink at ``w`` return to the working
        set (after ``_MAX_RELEASES`` rounds, all of them: a wrong guess also voids later screening,
        which relied on the reduced problem).

        Parameters
        ----------
        s : array (n_docs,)
            Scores ``X w``.
        w : array (d,)
            The best point.
        D : float
            The best dual value (a bound for the full problem).
        tol : float
            The relative gap asked.
        margin : float
            The hinge's margin.

        Returns
        -------
        bool
        """
        z_all = margin - (s[self.all_i] - s[self.all_j])
        full_P = 0.5 * float(w @ w) + float(np.dot(self.all_Cc, np.maximum(z_all, 0.0)))
        if full_P - D <= tol * max(1.0, abs(full_P)):
            return True
        wrong = ((self.state == _VIOLATED) & (z_all < 0.0)) | ((self.state == _IDLE) & (z_all > 0.0))
        self.releases += 1
        self.state[wrong if self.releases < _MAX_RELEASES and wrong.any() else slice(None)] = 0
        self._rebuild()
        self.screened_at_gap = np.inf
        return False


def _exact_norms_pay(X, z, norms, undecided, work, all_i, all_j, radius, rng):
    """Whether exact norms of the ``undecided`` pairs would let screening fix its minimum share.

    They cost a gather of two rows per pair, and at a loose gap the ball is too wide for
    them to decide anything: the exact norms of a random sample of ``_NORM_PROBE`` undecided
    pairs estimate the share first (nothing is lost if the estimate errs: screening is
    retried at half the gap).
    """
    positions = np.flatnonzero(undecided)
    if positions.size <= 4 * _NORM_PROBE:
        return True
    probe = positions[rng.choice(positions.size, _NORM_PROBE, replace=False)]
    rows = work[probe]
    share = float(np.mean(np.abs(z[probe]) > _hf.pair_norms(X, all_i[rows], all_j[rows]) * radius))
    decided = np.count_nonzero(np.abs(z) > norms * radius)
    return decided + share * positions.size >= _SCREEN_MIN_SHARE * z.size
