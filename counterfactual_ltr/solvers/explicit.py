"""The explicit Newton path of :func:`~counterfactual_ltr.solvers.solve_pairwise_hinge`: pairs as index arrays.

Smoothing continuation (:mod:`.smoothing`), each level solved by Newton steps
(:mod:`.newton_direction`) with an exact line search on the piecewise-quadratic smoothed
objective. Pair features are never formed: scores ``s = X w``, gathers ``s[i] - s[j]``,
``np.bincount`` over the pair index arrays, ``X^T g`` for gradients. Every iteration evaluates
the exact objective and a feasible dual point, so every iteration certifies a duality gap.

One solve is a :class:`_ExplicitNewton`; an iteration is its steps, in this order:

* :meth:`~_ExplicitNewton.evaluate` the exact objective, the dual point of the smoothed hinge's
  derivative and the best dual point on the segment from the last one;
* :meth:`~_ExplicitNewton.finish_near_kink`: near the optimum, the exact solve of the pairs at
  the kink (:mod:`.finisher`); a better point is evaluated afresh;
* :meth:`~_ExplicitNewton.stop_or_release`: stop at the asked gap (certified on every pair),
  at ``min_decrease`` or at ``max_iter``; or release speculatively fixed pairs found wrong;
* :meth:`~_ExplicitNewton.screen`: gap-safe screening of the working set (:mod:`.working_set`);
* :meth:`~_ExplicitNewton.shrink_smoothing` once the smoothing error dominates the gap;
* :meth:`~_ExplicitNewton.newton_step`: the Newton direction (after ``mu`` shrank, of the
  path-following model) and the exact line search.

Warm start from ``w0``: first the exact minimiser along the ray ``t w0`` (the optimum for
re-weighted pairs, as in a convex-concave procedure, is mostly a rescaled ``w0``), then the
continuation from ``0.03`` margins and speculative shrinking of the working set.

Path following: when ``mu`` shrinks tenfold the new band holds about a tenth of the last
level's band pairs; where that is fewer than ``d`` the band Hessian misses directions and Newton
steps from there crawl. The first step after a shrink then follows the path: the last level's
band keeps its quadratic piece with the new slope ``1 / mu`` (the minimiser of that model is
where the smoothed optimum moves if no pair changes side). With a full band the plain step is as
good and cheaper.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from . import hessian_free as _hf
from .common import MAX_WEIGHT_BOUND, aggregate_pairs, bracket_step, doc
from .finisher import Finisher
from .newton_direction import damping, newton_direction
from .smoothing import best_dual_on_segment, initial_mu, next_level, smoothing_dominates, stalls
from .working_set import WorkingSet

__all__ = ["solve_explicit"]


@doc
def solve_explicit(X, i, j, c, C, margin, w, warm, tol, max_iter, verbose, method, min_decrease):
    """Run the explicit Newton path on checked inputs (as :func:`~counterfactual_ltr.solvers.solve_pairwise_hinge`).

    Parameters
    ----------
    X : array (n_docs, d) or scipy.sparse matrix
        Feature matrix; the pairs index its rows.
    i, j : int arrays (n_pairs,)
        The preferred and the other row of every pair.
    c : array (n_pairs,)
        Pair weights ``>= 0`` (zero-weight pairs are dropped).
    C, margin : float
        Weight of the hinge sum and the hinge's margin.
    w : array (d,)
        The start point (zeros for a cold start).
    warm : bool
        Whether ``w`` is a warm start (its smoothing starts lower).
    {newton_stop}
    method : {"newton", "newton_cg"}
        Dense Hessian or conjugate gradients (see ``solve_pairwise_hinge``).
    min_decrease : float
        Stop once a Newton step gains less (see ``solve_pairwise_hinge``).

    Returns
    -------
    tuple ``(w, P, D, n_iter, converged, history, stalled, method)``
        ``method`` the path taken (``"newton_cg+newton"`` when CG handed over to the Hessian).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(6, 3))
    >>> w, P, D, *_ = solve_explicit(X, np.array([0, 0, 1]), np.array([1, 2, 2]), np.ones(3), 1.0, 1.0,
    ...                              np.zeros(3), False, 1e-9, 100, False, "newton", 0.0)
    >>> bool(0 <= P - D <= 1e-9 * P)
    True
    """
    keep = c > 0
    if not keep.all():
        i, j, c = i[keep], j[keep], c[keep]
    return _ExplicitNewton(X, i, j, C * c, C, margin, w, warm, tol, max_iter, verbose, method, min_decrease).run()


class _ExplicitNewton:
    """One solve on explicit pairs: the iterate, the best points, the smoothing level, the working set."""

    def __init__(self, X, i, j, Cc, C, margin, w, warm, tol, max_iter, verbose, method, min_decrease):
        self.X, (self.n, self.d) = X, X.shape
        self.C, self.margin, self.tol, self.max_iter = C, margin, tol, max_iter
        self.verbose, self.method, self.min_decrease = verbose, method, min_decrease
        # ||x_i - x_j|| <= ||x_i - m|| + ||x_j - m|| for any m: bounds for the weights' norm here and
        # for the pair norms of screening.
        row_norm = _hf.centered_row_norms(X)
        _check_weight_bound(C, Cc, row_norm)
        self.pairs = WorkingSet(X, i, j, Cc, row_norm)
        self.ops = _hf.Products(X) if method == "newton_cg" else None   # Hessian-free path's reused products
        self.start = None                        # (w, exact objective) of a warm start, see min_decrease
        self.w = w
        self.s = X @ w if w.any() else np.zeros(self.n)   # scores (a pass over X saved on cold starts)
        self.mu = initial_mu(margin, warm)
        # Band width of the next Newton model (above mu once, right after mu shrinks), damping.
        self.width, self.damp = self.mu, 1.0
        if w.any():
            self._start_on_the_ray()
        # The best point with its scores, so that reporting and certifying it need no product X w.
        self.best_P, self.best_w, self.best_s, self.best_D = np.inf, self.w.copy(), self.s.copy(), -np.inf
        self.rng = np.random.default_rng(0)       # the Hessian's pair samples: same data, same path
        self.rmatvec = _Rmatvec(X)
        self.ref = None                          # (alpha, v, D) of the best dual point on the working set
        self.finisher = Finisher()
        self.history, self.it = [], 0
        self.converged = self.stalled = self.done = False
        # min_decrease: the first objective, the best one before the last Newton step
        self.start_P = self.before_step = None

    def _start_on_the_ray(self):
        """Warm start: the best point on the ray ``t w0``, and pairs far from the kink fixed (a guess)."""
        pairs, margin, w, s = self.pairs, self.margin, self.w, self.s
        i, j, Cc = pairs.i, pairs.j, pairs.Cc
        delta = s[i] - s[j]
        a0 = min(max(margin / self.mu, 0.0), 1.0)
        t = _line_search(np.zeros(self.d), w, -a0 * float(np.dot(Cc, delta)), np.full(delta.shape, margin),
                         delta, Cc, self.mu)
        w, s = t * w, t * s
        self.w, self.s = w, s
        z = margin - (s[i] - s[j])
        if self.min_decrease > 0:                # a solve stopped by it returns no worse a point
            self.start = (w.copy(), 0.5 * float(w @ w) + float(np.dot(Cc, np.maximum(z, 0.0))))
        pairs.speculate(z, margin)

    def run(self):
        while not self.done:
            self.evaluate()
            if self.finish_near_kink():
                continue
            self.record()
            if self.stop_or_release() or self.screen() or self.shrink_smoothing():
                continue
            self.newton_step()
        return self.report()

    # ------------------------------------------------------------------ the steps of an iteration
    def evaluate(self):
        """Exact objective, dual point and best dual point at the current iterate."""
        pairs, margin, s, w = self.pairs, self.margin, self.s, self.w
        z = margin - (s[pairs.i] - s[pairs.j])   # hinge argument of every working pair
        # Pairs fixed as violated contribute their (linear) hinge exactly.
        hinge = float(np.dot(pairs.Cc, np.maximum(z, 0.0)))
        P = 0.5 * float(w @ w) + margin * pairs.fixed_sum - float(s @ pairs.fixed_g) + hinge
        a = np.clip(z / self.mu, 0.0, 1.0)       # derivative of the smoothed hinge
        alpha = pairs.Cc * a                     # feasible dual point (fixed pairs at 0 or C c)
        v = pairs.fixed_v + self.rmatvec(aggregate_pairs(pairs.i, pairs.j, alpha, self.n))
        D = margin * (pairs.fixed_sum + float(alpha.sum())) - 0.5 * float(v @ v)
        if P < self.best_P:
            self.best_P, self.best_w, self.best_s = P, w.copy(), s.copy()
        # Away from the smoothed optimum alpha and w disagree and D(alpha) is poor: the best
        # dual point on the segment from the previous best alpha is a cheap fix.
        self.ref = best_dual_on_segment(self.ref, (alpha, v, D), margin)
        self.best_D = max(self.best_D, self.ref[2])   # every D is a full-problem dual value: a bound
        self.z, self.hinge, self.P, self.a, self.alpha, self.v, self.D = z, hinge, P, a, alpha, v, D
        self._gap()

    def _gap(self):
        self.gap = self.best_P - self.best_D
        self.target = self.tol * max(1.0, abs(self.best_P))

    def finish_near_kink(self) -> bool:
        """Try the exact solve near the kink; True when it moved the iterate (to be evaluated afresh)."""
        out = self.finisher.attempt(self.X, self.pairs, self.z, self.mu, self.margin, self.gap, self.target,
                                    self.best_P, self.rmatvec)
        if out is None:
            return False
        alpha_f, v_f, s_f, P_f, D_f = out
        if D_f > self.best_D:
            self.best_D, self.ref = D_f, (alpha_f, v_f, D_f)
        if P_f < self.best_P:
            self.best_P, self.best_w, self.best_s = P_f, v_f.copy(), s_f.copy()
        if P_f < self.P:                         # go on from the better point, evaluated afresh
            self.w, self.s = v_f, s_f
            return True
        self._gap()
        return False

    def record(self):
        """History (best primal and dual values), the verbose line, the solve's first objective."""
        self.history.append((self.best_P, self.best_D))
        if self.verbose:
            print(f"[solve_pairwise_hinge] it={self.it:3d} mu={self.mu:.2e} P={self.P:.10g} D={self.D:.10g} "
                  f"rel gap={self.gap / max(1.0, abs(self.best_P)):.2e} working pairs={self.pairs.i.size}")
        if self.start_P is None:
            self.start_P = self.best_P

    def stop_or_release(self) -> bool:
        """Stop (certified, stalled or out of iterations), or release wrongly fixed pairs; True if either."""
        if stalls(self.start_P, self.before_step, self.best_P, self.min_decrease) and self.gap > self.target:
            self.stalled = self.done = True
            return True
        self.before_step = None
        if self.gap <= self.target:
            # Certify on the full problem: the reduced objective differs from the true one
            # only through fixed pairs now on the wrong side of the margin.
            pairs = self.pairs
            if not pairs.any_fixed or pairs.certify_or_release(self.best_s, self.best_w, self.best_D, self.tol,
                                                               self.margin):
                self.converged = self.done = True
                return True
            self.ref = None
            self.best_P = pairs.objective(self.best_s, self.best_w, self.margin)
            # Released pairs can sit far inside the margin: resume the continuation from the
            # warm-start level (a tiny mu makes the far-off point a piecewise-linear problem).
            self.mu = self.width = max(self.mu, initial_mu(self.margin, True))
            self.damp = 1.0
            self.it += 1
            self.done = self.it >= self.max_iter
            return True
        self.done = self.it >= self.max_iter
        return self.done

    def screen(self) -> bool:
        """Gap-safe screening of the working set; True when pairs were fixed (re-evaluate)."""
        # (Hessian-free path: exact pair norms cost more than the pairs they would screen save.)
        if not self.pairs.screen(self.z, self.P, self.best_D, self.margin, self.method == "newton", self.rng):
            return False
        self.ref = None
        self.best_P = self.pairs.objective(self.best_s, self.best_w, self.margin)
        return True

    def shrink_smoothing(self) -> bool:
        """Shrink ``mu`` once the smoothed problem's gap is a small part of the exact gap."""
        # The smoothed hinge is a z - mu a^2 / 2, and the smoothed dual subtracts mu a^2 / 2
        # per pair too: the two smoothing terms cancel.
        self.smooth_gap = self.P - self.hinge + float(self.alpha @ self.z) - self.D
        if not smoothing_dominates(self.smooth_gap, self.gap):
            return False
        self.width = self.mu
        self.mu, stop = next_level(self.mu, self.target, self.gap, self.margin, self.C, "solve_pairwise_hinge", 3)
        self.it += 1
        self.done = self.done or stop
        return True

    def newton_step(self):
        """A Newton step on the smoothed objective (of the path-following model right after a shrink)."""
        pairs, mu, z, w = self.pairs, self.mu, self.z, self.w
        i, j, Cc = pairs.i, pairs.j, pairs.Cc
        grad = w - self.v
        band = (self.a > 0.0) & (self.a < 1.0)
        if self.width > mu and np.count_nonzero(band) < self.d:
            # Path-following step after mu shrank: the pairs of the last level's band keep
            # their quadratic piece, now with slope 1 / mu (unclipped), and the rest their piece.
            band = (z > 0.0) & (z < self.width)
            model_a = np.where(band, z / mu, (z >= self.width).astype(np.float64))
            model_grad = w - pairs.fixed_v - self.rmatvec(aggregate_pairs(i, j, Cc * model_a, self.n))
        else:
            model_grad = grad
        self.width = mu
        rtol = _hf.forcing(self.smooth_gap, self.P) if self.ops is not None else None
        u = newton_direction(self.X, model_grad, i, j, Cc, band, mu, self.damp, self.ops, self.rng, rtol)
        if u is None:
            # C / mu so large that the identity is lost in rounding: stop with the best
            # certified point (the ConvergenceWarning of the result reports the gap).
            warnings.warn(f"solve_pairwise_hinge: the Newton system is numerically singular at C = {self.C:g} "
                          f"(smoothing mu = {mu:.3g}); stopping early", ConvergenceWarning, stacklevel=2)
            self.done = True
            return
        Xu = self.X @ u
        delta = Xu[i] - Xu[j]
        t = _line_search(w, u, float(grad @ u), z, delta, Cc, mu, fixed_slope=float(u @ pairs.fixed_v))
        self.damp = damping(self.damp, t)
        self.w = w + t * u
        self.s = self.s + t * Xu
        self.before_step = self.best_P
        self.it += 1

    def report(self):
        """The best point, its exact objective on every pair and the certificate."""
        # Scores are tracked as s + t X u: within ~1e-15 relative of X w; the product would
        # cost a pass over X.
        w = self.best_w
        P = self.pairs.full_objective(self.best_s, w, self.margin)
        if self.stalled and self.start is not None and self.start[1] < P:
            # best_w was the best on the reduced problem, whose speculatively fixed pairs can be
            # on the wrong side there: keep the (exactly evaluated) start.
            w, P = self.start
        # A dual bound above the primal value is impossible in exact arithmetic: at a huge C the dual's
        # two terms (~C^2) cancel to junk, and such a "certificate" must not pass as convergence.
        converged = self.converged and abs(P - self.best_D) <= self.tol * max(1.0, abs(P))
        return (w, P, self.best_D, self.it, converged, self.history, self.stalled,
                _hf.taken(self.method, self.ops))


def _check_weight_bound(C, Cc, row_norm):
    """``ValueError`` where ``C`` is so large that the optimal weights could leave float64's range."""
    if not Cc.size:
        return
    # ||w*|| = ||X^T g(alpha*)|| <= sum(C c) * max ||x_i - x_j|| <= sum(C c) * 2 max ||x - m||.
    bound = float(Cc.sum()) * 2.0 * float(np.max(row_norm))
    if not bound <= MAX_WEIGHT_BOUND:
        raise ValueError(f"C = {C:g} is too large for these pair weights and features: the weights could reach "
                         f"norm {bound:.3g}, beyond float64 arithmetic (C * sum(pair_weights) * max row norm "
                         f"must stay below {MAX_WEIGHT_BOUND:g})")


def _line_search(w, u, f0, z, delta, Cc, mu, t0=1.0, max_eval=50, fixed_slope=0.0):
    """Exact minimiser over ``t >= 0`` of the smoothed objective along ``w + t u``.

    The objective is convex piecewise quadratic in ``t``; safeguarded 1-D
    Newton on its derivative inside a bracket converges in a few steps. Once
    the bracket ``[lo, hi]`` is finite, pairs whose smoothed hinge keeps one
    piece over it (flat, linear or quadratic) are folded into the constant
    and linear coefficients of the derivative, so later steps touch few pairs.
    """
    if f0 >= 0:                                   # not a descent direction (numerically)
        return 0.0
    # Derivative f1(t) = c0 + c1 t - sum_p Cd_p clip(q_p(t), 0, 1), q_p(t) = zs_p - t ds_p.
    c0, c1 = float(w @ u) - fixed_slope, float(u @ u)
    zs, ds = z / mu, delta / mu
    Cd = Cc * delta
    q_lo = zs
    q_hi = None
    lo, hi, t = 0.0, np.inf, t0
    for _ in range(max_eval):
        q = zs - t * ds
        band = (q > 0.0) & (q < 1.0)
        f1 = c0 + t * c1 - float(np.dot(Cd, np.clip(q, 0.0, 1.0)))
        f2 = c1 + float(np.dot(Cd[band], ds[band]))
        if abs(f1) <= 1e-10 * -f0:
            return t
        if f1 < 0:
            q_lo = q
        else:
            q_hi = q
        lo, hi, nt, collapsed = bracket_step(t, f1, f2, lo, hi)
        if collapsed:
            break
        if q_hi is not None and zs.size > 64:
            # q is linear in t: one piece at both ends means one piece on the whole bracket.
            ones = (q_lo >= 1.0) & (q_hi >= 1.0)
            linear = (q_lo > 0.0) & (q_lo < 1.0) & (q_hi > 0.0) & (q_hi < 1.0)
            c0 -= float(Cd[ones].sum()) + float(np.dot(Cd[linear], zs[linear]))
            c1 += float(np.dot(Cd[linear], ds[linear]))
            keep = ~(ones | linear | ((q_lo <= 0.0) & (q_hi <= 0.0)))
            zs, ds, Cd, q_lo, q_hi = zs[keep], ds[keep], Cd[keep], q_lo[keep], q_hi[keep]
        t = nt
    return lo if lo > 0 else t


# X^T g from the last product when at most this share of the rows of g changed.
_INCREMENTAL_SHARE = 0.2


def _rows_rmatvec(X, rows, coeffs, chunk_bytes=1 << 20):
    """``X[rows]^T coeffs`` gathered in cache-sized blocks of rows into one reused buffer.

    ``X[rows]`` at once writes and re-reads a copy of those rows in fresh memory (a page
    fault per 4 KiB): for a few thousand rows of a large ``X`` that costs as much as the full
    product. Small blocks in one reused buffer stay in cache.
    """
    if _hf.is_sparse(X):
        return X[rows].T @ coeffs
    step = max(1, chunk_bytes // (8 * max(X.shape[1], 1)))
    buf = np.empty((min(step, rows.size), X.shape[1]))
    out = np.zeros(X.shape[1])
    for start in range(0, rows.size, step):
        block = np.take(X, rows[start:start + step], axis=0, out=buf[:min(step, rows.size - start)])
        out += coeffs[start:start + step] @ block
    return out


class _Rmatvec:
    """``X^T g`` for the successive ``g`` of one solve, updated where few rows of ``g`` changed.

    Near the optimum only the rows of pairs in the band (or crossing it) change
    their aggregate between iterations: ``X^T g = X^T g_last + X_C^T (g - g_last)_C``
    over the changed rows ``C`` costs ``|C| d`` instead of ``n d``.
    Unchanged rows of a ``bincount`` aggregate are bit-identical, so ``C`` is exact.
    """

    def __init__(self, X):
        self.X, self.g, self.v = X, None, None

    def __call__(self, g):
        if self.g is not None:
            changed = np.flatnonzero(g != self.g)
            if changed.size <= _INCREMENTAL_SHARE * g.size:
                v = self.v + _rows_rmatvec(self.X, changed, g[changed] - self.g[changed])
                self.g, self.v = g, v
                return v
        self.g, self.v = g, self.X.T @ g
        return self.v
