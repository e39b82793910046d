"""The implicit path of :func:`~counterfactual_ltr.solvers.solve_pairwise_hinge`: click pairs on sorted scores.

For :class:`~counterfactual_ltr.surrogates.implicit_pairs.ClickPairs` on long candidate lists the pairs are
never formed. Objective, dual point ``alpha = C c clip(z / mu, 0, 1)``, its aggregate ``g``,
``sum alpha``, the band Laplacian's products and the Newton Hessian ``X^T L X`` all come from the
scores sorted once per query (prefix sums and difference arrays over sorted positions; see that
module): an evaluation costs ``O(n log n + k log n)`` for ``n`` rows and ``k`` clicks however many
pairs there are, and memory stays ``O(n + k)`` plus one ``d x |band rows|`` block for the Hessian.

Same smoothing continuation (:mod:`.smoothing`), dual search and exact certificate as the
explicit path; no screening (an evaluation already costs ``O(n log n)`` whatever the number of
pairs) and no finisher (long lists hold far more pairs near the kink than it can take). Since
every evaluation is a sort of all scores, the primal line search stops at a strong Wolfe slope
(0.1) with secant steps inside its bracket, and on the cold start's first level (bands over most
rows) the Hessian is estimated from every ``k``-th query: a direction needs no more. After
``mu`` shrinks, the first step follows the path (see :mod:`.explicit`) whatever the band's size.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from . import hessian_free as _hf
from ..surrogates.implicit_pairs import _Smoothed, band_hessian, line_search
from .common import doc
from .smoothing import best_dual_on_segment, initial_mu, shrunk_mu, smoothing_dominates, stalls

__all__ = ["solve_implicit"]

# Line searches stop at a strong Wolfe slope (|phi'(t)| <= 0.1 |phi'(0)|): every evaluation is a
# sort of all scores, and an exact search took more of them for no fewer Newton steps.
_LINE_SEARCH_RTOL = 0.1
# On the cold start's first level the band Hessian is estimated from a sample of queries covering
# about this many rows per d^2.
_HESSIAN_SAMPLE_ROWS = 30


@doc
def solve_implicit(X, pairs, C, margin, w, warm, tol, max_iter, verbose, ops=None, min_decrease=0.0):
    """Run the implicit path on checked inputs (as :func:`~counterfactual_ltr.solvers.solve_pairwise_hinge`).

    Parameters
    ----------
    X : array (n_docs, d) or scipy.sparse matrix
        Feature matrix; the click pairs index its rows.
    pairs : ClickPairs
        Every clicked row against every other row of its query.
    C, margin : float
        Weight of the hinge sum and the hinge's margin.
    w : array (d,)
        The start point (zeros for a cold start).
    warm : bool
        Whether ``w`` is a warm start (its smoothing starts lower, its ray is searched first).
    {newton_stop}
    ops : :class:`~counterfactual_ltr.solvers.hessian_free.Products`, optional
        The Hessian-free path's products; None for the dense Hessian.
    min_decrease : float, default 0
        Stop once a Newton step gains less (see ``solve_pairwise_hinge``).

    Returns
    -------
    tuple ``(w, P, D, n_iter, converged, history, stalled)``

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr.surrogates.implicit_pairs import ClickPairs
    >>> X = np.random.default_rng(0).normal(size=(6, 3))
    >>> w, P, D, *_ = solve_implicit(X, ClickPairs([0, 3, 6], [0, 4], [1.0, 2.0]), 1.0, 1.0, np.zeros(3),
    ...                              False, 1e-9, 100, False)
    >>> bool(0 <= P - D <= 1e-9 * P)
    True
    """
    return _ImplicitNewton(X, pairs, C, margin, w, warm, tol, max_iter, verbose, ops, min_decrease).run()


class _ImplicitNewton:
    """One solve over :class:`ClickPairs` without forming any pair (steps as in :mod:`.explicit`)."""

    def __init__(self, X, pairs, C, margin, w, warm, tol, max_iter, verbose, ops=None, min_decrease=0.0):
        keep = pairs.weights > 0
        if not keep.all():
            pairs = type(pairs)(pairs.query_offsets, pairs.anchors[keep], pairs.weights[keep])
        self.X, self.pairs, self.Cc, self.margin = X, pairs, C * pairs.weights, margin
        self.warm, self.tol, self.max_iter, self.verbose = warm, tol, max_iter, verbose
        self.ops, self.min_decrease = ops, min_decrease   # ops: the Hessian-free path's products
        self.w, self.s = w, X @ w
        self.mu = self.mu0 = initial_mu(margin, warm)
        if warm and w.any():
            # The best point on the ray t w0 (see the explicit path).
            t = line_search(self.s, np.zeros_like(w), w, self._along(np.zeros_like(self.s), self.s), self.mu,
                            rtol=_LINE_SEARCH_RTOL)
            self.w, self.s = t * w, t * self.s
        self.best_P, self.best_w, self.best_D = np.inf, self.w.copy(), -np.inf
        self.ref = None
        self.history, self.it = [], 0
        self.converged = self.stalled = self.done = False
        # Band width of the last level, as in the explicit path. (From w = 0 every pair has
        # z = margin, beyond a cold start's band: the first step is the raw gradient, which the
        # line search cuts to length.)
        self.width = self.mu
        self.ev = None                           # the line search's evaluation at the new point
        # min_decrease: the first objective, the best one before the last Newton step
        self.start_P = self.before_step = None

    def _along(self, s_base, Xu):
        """``t -> (g, evaluation)`` at the scores ``s_base + t Xu`` (for the line search)."""
        def ev_at(t, need_hess):
            ev = _Smoothed(self.pairs, s_base + t * Xu, self.Cc, self.margin, self.mu)
            return ev.aggregate()[0], ev
        return ev_at

    def run(self):
        while not self.done:
            self.evaluate()
            if self.stop() or self.shrink_smoothing():
                continue
            self.newton_step()
        # ``best_P`` is the exact objective (hinge on every pair) at ``best_w``, from scores updated
        # as ``s + t X u``: within rounding (~1e-15 relative) of ``X w``, so not recomputed (a
        # product and a sort per solve).
        return self.best_w, self.best_P, self.best_D, self.it, self.converged, self.history, self.stalled

    def evaluate(self):
        """Exact objective, dual point and best dual point at the current iterate."""
        if self.ev is None or self.ev.mu != self.mu:
            self.ev = _Smoothed(self.pairs, self.s, self.Cc, self.margin, self.mu)
        ev, w = self.ev, self.w
        self.hinge = ev.hinge()
        self.P = P = 0.5 * float(w @ w) + self.hinge
        self.g, self.alpha_sum = ev.aggregate()
        # A full product: the aggregates come from cumulative sums over all rows, so rounding
        # changes every row between iterations and an incremental X^T g would never pay.
        self.v = self.X.T @ self.g
        self.D = self.margin * self.alpha_sum - 0.5 * float(self.v @ self.v)
        if P < self.best_P:
            self.best_P, self.best_w = P, w.copy()
        self.ref = best_dual_on_segment(self.ref, (self.alpha_sum, self.v, self.D), self.margin)
        self.best_D = max(self.best_D, self.ref[2])
        self.history.append((self.best_P, self.best_D))
        self.gap = self.best_P - self.best_D
        self.target = self.tol * max(1.0, abs(self.best_P))
        if self.verbose:
            print(f"[solve_pairwise_hinge/implicit] it={self.it:3d} mu={self.mu:.2e} P={P:.10g} D={self.D:.10g} "
                  f"rel gap={self.gap / max(1.0, abs(self.best_P)):.2e}")

    def stop(self) -> bool:
        """Stop at the asked gap, at ``min_decrease`` or at ``max_iter``."""
        if self.gap <= self.target:
            self.converged = self.done = True
            return True
        if self.start_P is None:
            self.start_P = self.best_P
        if stalls(self.start_P, self.before_step, self.best_P, self.min_decrease):
            self.stalled = self.done = True
            return True
        self.before_step = None
        self.done = self.it >= self.max_iter
        return self.done

    def shrink_smoothing(self) -> bool:
        # sum_p alpha_p z_p = margin sum(alpha) - g.s: the smoothed problem's own gap.
        self.smooth_gap = self.P - self.hinge + self.margin * self.alpha_sum - float(self.g @ self.s) - self.D
        if not smoothing_dominates(self.smooth_gap, self.gap):
            return False
        self.width = self.mu
        self.mu = shrunk_mu(self.mu, self.target, self.gap)
        self.it += 1
        return True

    def newton_step(self):
        X, w, s, mu = self.X, self.w, self.s, self.mu
        grad = w - self.v
        if self.width > mu:
            # Path-following step after mu shrank (see the explicit path).
            model = _Smoothed(self.pairs, s, self.Cc, self.margin, mu, width=self.width)
            model_grad = w - X.T @ model.aggregate()[0]
        else:
            model, model_grad = self.ev, grad
        self.width = mu
        u = None
        if self.ops is not None:                 # Hessian-free path (a Products of X)
            u, _ = _hf.newton_cg_direction(self.ops, model_grad, *_hf.implicit_band(model),
                                           rtol=_hf.forcing(self.smooth_gap, self.P))
        if u is None:                            # dense path, or CG lost to rounding
            # The cold start's first level (bands over most rows): the Hessian from a sample of
            # the queries (see band_hessian). Elsewhere the exact one: on warm starts a sampled
            # Hessian took more Newton steps.
            sample = _HESSIAN_SAMPLE_ROWS * X.shape[1] ** 2 if mu == self.mu0 and not self.warm else None
            H = band_hessian(X.toarray() if _hf.is_sparse(X) else X, model, max_rows=sample)
            H[np.diag_indices_from(H)] += 1.0
            u = -scipy.linalg.cho_solve(scipy.linalg.cho_factor(H, overwrite_a=True), model_grad)
        Xu = X @ u
        t, self.ev = line_search(Xu, w, u, self._along(s, Xu), mu, f0=float(grad @ u), return_eval=True,
                                 rtol=_LINE_SEARCH_RTOL)
        self.w = w + t * u
        self.s = s + t * Xu
        self.before_step = self.best_P
        self.it += 1
