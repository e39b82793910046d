"""Exact solvers for the regularised convex problems of the linear rankers.

Problem. Every linear ranking SVM of the toolkit minimises

    P(w) = 0.5 ||w||^2 + C sum_p c_p max(0, margin - (x_{i_p} - x_{j_p}) . w)

over weighted pairs of rows of a dense ``X`` (RankSVM, SVM PropRank, and the
re-weighted problems of SVM PropDCG's convex-concave procedure). Its dual is
``D(alpha) = margin sum(alpha) - 0.5 ||X^T g(alpha)||^2``, ``0 <= alpha_p <= C c_p``,
with ``g`` the per-document aggregation ``g_k = sum_{i_p=k} alpha_p - sum_{j_p=k} alpha_p``.
Pair features are never formed: scores ``s = X w``, gathers ``s[i] - s[j]``,
``np.bincount`` over the pair index arrays, ``X^T g`` for gradients.

Method of :func:`solve_pairwise_hinge`: Huber (Nesterov) smoothing with
continuation (from ``mu = 0.1 margin`` on a cold start), each level solved by
Newton with an explicit ``d x d`` Hessian.
The hinge is replaced by ``phi_mu(z) = max_{0<=a<=1} (a z - mu a^2 / 2)``; its
derivative ``a = clip(z / mu, 0, 1)`` gives a *feasible* dual point
``alpha = C c a`` at every iterate, so every iteration certifies an exact
duality gap for the true hinge problem (plus a cheap dual line search between
successive alphas). At the smoothed optimum the gap is
``C sum_band c_p (z_p - z_p^2/mu) <= C mu/4 sum_band c_p``; when the smoothed
problem's own gap is below a fifth of the exact gap, ``mu`` shrinks tenfold.
Newton: ``H = I + (C/mu) X^T L X`` with ``L`` the weighted Laplacian of the pairs
inside the quadratic band, built as a sparse matrix and multiplied block by
block (memory: two row blocks of ``X``; few band pairs: outer products of pair
differences); Cholesky; exact line search on the piecewise-quadratic smoothed
objective (1-D safeguarded Newton; pairs that keep one piece over the bracket
are folded into two coefficients, so late evaluations touch few pairs).

Gap-safe screening (in the spirit of Fercoq, Gramfort & Salmon 2015, and
Shibagaki et al. 2016 for SVM samples): the objective is 1-strongly convex, so
``||w - w*||^2 <= 2 (P(w) - D)``; a pair with ``|z_p(w)| > ||x_i - x_j|| r``
keeps the sign of its hinge argument at the optimum, so its dual variable is
known (``C c_p`` or 0). Below a relative gap of 1e-3 such pairs are fixed (a
violated one contributes a linear term), and the iterations run on the rest
(``verbose=True`` prints their number: on a MQ2008 PropDCG subproblem at
C = 1000, 198k pairs shrink to 30k at gap 5e-5 and to 5k at 1e-6). The certificate stays exact: the dual point is feasible for the full
problem and the objective is recomputed on all pairs before reporting.

Warm start from ``w0``: first the exact minimiser along the ray ``t w0``
(successive CCP solutions differ mostly in scale: in a one-off look at
MQ2008 subproblems 2-4, |w| changed by 20-90 %, the direction by 7-12 degrees), then continuation from ``mu = 0.03 margin``
instead of ``0.1 margin``, and speculative shrinking: pairs more than one margin
away from the kink at the start point are fixed on their side (violated or
idle) from the first iteration. That guess carries no certificate, so when the
reduced problem converges the solver evaluates the full objective; fixed pairs
found on the wrong side are released and the solve goes on (after three
releases, everything is released and only the safe screening remains). The
reported gap is always that of the full problem.

Long candidate lists (:class:`~counterfactual_ltr.implicit_pairs.ClickPairs`:
every clicked row against every other row of its query): the pairs are never
formed. Objective, dual point ``alpha = C c clip(z / mu, 0, 1)``, its aggregate
``g``, ``sum alpha``, the band Laplacian's products and the Newton Hessian
``X^T L X`` all come from the scores sorted once per query (prefix sums and
difference arrays over sorted positions; see that module), so an evaluation
costs ``O(n log n + k log n)`` for ``n`` rows and ``k`` clicks however many pairs
there are, and memory stays ``O(n + k)`` plus one ``d x |band rows|`` block for the
Hessian. Same continuation, same dual line search, same exact certificate; no
screening (nothing left to save). What an iteration costs there (issue 18, 435
candidates, 570K rows, d = 46): each evaluation of the pair sums is a sort of
all scores plus ``O(n)`` prefix and difference sums (~35 ms CPU), each of
``X u`` and ``X^T g`` ~30 ms. So the primal line search stops at a strong
Wolfe slope (0.1) with secant steps inside its bracket, no Laplacian products
(an exact search took 2.5-5 evaluations per Newton step; now 1-3, same
Newton steps); the band Hessian sums enumerated band pairs where they are
about as many as the rows they cover (narrow bands: 32 -> 24 ms at mu = 0.03),
and on the cold start's first level (bands over most rows) it is
estimated from every ``k``-th query (a direction only; 0.37 s for the exact
one at mu = margin). Chosen from 64 pairs per click on: at 40-120
candidates the two paths cost the same CPU time (0.35 vs 0.40 s and 0.74 vs
0.77 s, ``python -m experiments.bench_long_lists --lengths 40 120 --kinds dense
--clicked 5000 --dcg-C 0 --explicit``), and the implicit one needs no pair
arrays. At 1,000 candidates per query and 19,873 clicked documents (19.85M
pairs, d = 46, ``python -m experiments.bench_long_lists --lengths 1000 --kinds
dense --dcg-C 0 --repeats 1``): SVM PropRank to a relative gap of 1e-4 in 10
Newton iterations, 16.7 s of CPU, peak traced memory 364 MiB beyond ``X`` (the
explicit pairs alone would take 480 MB). SVM PropDCG's CCP at large C (435 candidates,
C = 100) solved every subproblem to its gap in 7-14 Newton steps (9-10 s): the steps of the
mu = 3e-3 level are cut to t ~ 1e-2 by a handful of heavy pairs (weights ``C c`` from 2.8e-8
to 2.0, IPS weights times ``lambda'``; on one cut step the ten pairs that crossed the kink
made all of the model's error). Tried there without gain: smoothing ``mu`` scaled per anchor
by ``(C c)^g`` (g = 0.25-1, or widening only the heaviest anchors: 1.5-10x the iterations), a
Hessian with every pair within 3 or 10 mu of the kink (2x), damping. What paid is not
certifying the later subproblems: from the warm start the first two Newton steps take 98 %
of a subproblem's decrease and the rest only tighten its gap, so the CCP asks for descent
(``min_decrease``, stop once a Newton step gains less than a tenth of the CCP's last
decrease): 2-3 Newton steps per subproblem, 4.6-5.4 s for the whole fit (median 4.9 s; 3.3-3.5 s
since cold starts begin at mu = 0.1 margin). Before the
path-following step and the finisher below, sparse data showed the inner iterations growing
over the CCP steps (sparse d = 300, 15 candidates, C = 10: 3 -> 78 over 19 steps). The
subproblems get harder as the CCP goes: the effective ``C sum c`` grows 5x as
clicked documents move up (``lambda'(1 + H_j)`` grows as ``H_j`` falls), the
weights spread from 5e3 to 1.5e4 (max / min), and the asked gap tightens from
1e-4 to 1e-5; cold solves at a fixed 1e-4 take 22, 56 and 62 iterations at
steps 3, 10 and 18. Smoothing scaled per pair by its weight (``mu c_p^g``,
g = -1, -0.5, 0.5, 1), a Hessian band widened to (-mu, 1.5 mu) or (-mu, 2 mu),
and IRLS-like curvature for pairs near the kink all took more iterations.
Why they grew (issue 18, sparse d = 300): when ``mu`` shrinks tenfold, the new band
holds about a tenth of the last level's band pairs, fewer than ``d``, so the band
Hessian misses directions; there the Newton step trusts the identity alone and the
exact line search cuts it to ``t ~ 1e-3`` for dozens of iterations until the band fills
again. Where the band is short of ``d`` pairs, the first step after a shrink now
follows the path: the last level's band keeps its quadratic piece with the new slope
``1 / mu`` (the minimiser of that quadratic is where the optimum moves if no pair
changes side), and a Levenberg-Marquardt weight on the identity (``0.5 / t`` after a
short step, halved after full ones) shortens steps in the missed directions. On the
sparse subproblems of a C = 100 CCP this cut 102-145 inner iterations to 44-47; on data
whose band holds more pairs than ``d`` (LETOR, Yahoo, MQ2008) nothing changes.

Finisher (explicit pairs; :mod:`~counterfactual_ltr.pair_qp`). On such data the small-mu
levels still crawl: about ``d`` pairs sit at the kink and each Newton step lets 5-15 more
into the band, an active-set method in disguise. Once the relative gap is below 1e-2 and
the band holds at most ``3 max(d, 100)`` pairs, the pairs within ``10 mu`` of the kink (at
most that many, the closest) are solved *exactly* by an interior-point method, every other
pair held on its current side; pairs found on the other side at that solution join the set
and it is solved again (3 rounds at most, while the set stays under twice the cap). Its dual
point is feasible for the full problem and its primal point is a candidate, both with exact
objectives, so a wrong guess costs time, never the certificate; the next try waits for the
gap to fall fourfold. ``python -m experiments.bench_long_lists --lengths 15 --kinds sparse
--d 300 --clicked 2800 --C 100 --dcg-C 100`` (sparse d = 300, PropDCG at C = 100): the whole
fit 2.1 s against 3.6 s, inner iterations 6, 10, 17, 14, ..., 8, 5 instead of 9 -> 54; in a
one-off replay of that CCP's 15 subproblems, 555 Newton iterations became 139 plus about one
finisher call each (30-120 ms). Where the band is wider it is not tried: in one-off looks,
the Yahoo-size problem of ``bench_solvers`` holds 3,400 band pairs at d = 700 (one try there
took 1.8 s and saved nothing), and the 435-candidate PropDCG subproblems of
``bench_long_lists`` 54-60K pairs within 0.03 of the kink at d = 46.
BLAS runs on one thread unless the Hessian products are large (``n d^2
>= 1e10``) and a core is idle: on a busy 2-core machine two threads made a
d = 300, 3,005-row RankSVM 20-30x slower (4.6 s against 0.16 s).

Sparse or very wide ``X`` (:mod:`counterfactual_ltr.hessian_free`): a scipy.sparse
CSR ``X``, or a dense one with more than 2,000 features, takes its Newton steps
by preconditioned conjugate gradients on Hessian-vector products
``v + X^T (L (X v))`` over the band pairs' rows, never forming the ``d x d``
Hessian: the cost of an iteration follows the non-zeros of ``X``. Same
continuation, line search, screening and exact certificate; at ``d <= 2000`` a
solve whose CG needs more than ``max(10, d / 8)`` steps hands over to the
explicit Hessian (``SolverResult.method`` says ``"newton_cg+newton"``).
``method=`` overrides the choice. Measured (``python -m experiments.bench_svm_rank
--svm-rank PATH --wide``, load 5 on 2 cores, CPU seconds): RankSVM on a sparse
d = 300 problem (32 % non-zero, 12,962 pairs) to a relative gap of 1e-4 in
0.09 s at C = 1 and 0.13 s at C = 10 (dense Hessian: 0.13-0.14 and 0.22-0.25 s;
svm_rank 0.15-0.20 and 0.35-0.52 s per process, 0.03-0.06 and 0.21-0.37 s of its
own learning time); at d = 20,000 (2.5M non-zeros, 263,669 pairs, where the dense
Hessian alone would take 3.2 GB) 0.12 s at C = 1 and 1.7 s at C = 10.

Why (measured with ``python -m experiments.bench_solvers``, 2-core machine,
OpenBLAS; relative gap target 1e-4; details in that script):

* LETOR size (26,000 clicked docs x 40 candidates, d=46, 1,014,000 pairs,
  C = 1, 10, 100 per click): 0.64-0.83 s, 5-7 Newton iterations (1.1-1.3 s and
  10-11 before cold starts began at mu = 0.1 margin); warm start after
  re-weighting by U[0.5, 2]: 0.41-0.48 of a cold solve (3-4 iterations).
* Yahoo size (20,000 queries x 24 docs, d=700, 175,000 clicks -> 61,275
  clicked docs, 1.41M pairs, C = 10 per click): 7.7 s CPU on one BLAS thread,
  15 iterations (14.7 s and 20 before the changes at the end of this list;
  the code before issue 18 took 34.6 s, 21 iterations, on the
  same idle machine, where 16.7 s went into the two exact band Hessians of the
  first level, 508K band pairs over 309K rows each); peak traced memory of the
  solve 560 MiB = 0.22 x X, process max RSS 1.33 x X; warm start after
  re-weighting 0.32 of cold (4.2 s vs 13.0 s). What made the difference:

  - Sampled band Hessians (:func:`_hessian_pairs`): a band of more than
    ``2 max(50 d, 4 n / d)`` pairs is replaced by a Bernoulli sample of
    ``max(50 d, 4 n / d)`` of them, weights divided by the rate (unbiased).
    Only the Newton direction changes; line search and certificate stay
    exact. 20 pairs per feature took 27 iterations instead of 20.
  - Pair Gram sums as symmetric rank-k updates (``A^T A``, ``A`` the pair differences
    scaled by ``sqrt(h)``): 3.5x
    faster than the general product at 35,000 x 700.
  - ``X^T g`` updated over the rows whose aggregate changed (:class:`_Rmatvec`):
    5-24K of 480K rows on the last level.
  - Exact pair norms for screening only when a probe of 1,024 pairs says they
    would screen at least a tenth of the pairs (1.2 s that screened nothing).
  - Cold starts at mu = 0.1 margin (see ``_COLD_MU``): 20 -> 15 iterations.
  - Rows gathered in cache-sized blocks into reused buffers (incremental ``X^T g``,
    pair Gram sums): on this machine fresh memory costs a page fault per 4 KiB,
    and ``X[rows]`` for 8K rows took as long as the full product. No product
    ``X w`` at a cold start or for the reported objective (scores are tracked),
    one pass of centred row norms for the weight bound and screening.

  What is left per iteration: ``X u`` and ``X^T g`` over 2.5 GB of ``X``
  (~0.17 s each, memory-bound) and, on the last level (mu = 0.01), about ten
  Newton steps whose line search cuts them to t ~ 0.3 as band pairs enter.
* SVM PropDCG's CCP subproblems (``python -m experiments.bench_propdcg
  --C 10|1000|10000``, MQ2008 Fold1, 10-1000 passes, best of 3 timings; each
  subproblem solved warm-started, as the CCP does, and cold, to the same
  relative gap): at the gaps the CCP asks of its subproblems (1e-4 to 1e-5)
  warm / cold is 0.20-0.47 at C = 10, 0.18-0.47 at C = 1000 and 0.15-0.40 at
  C = 10000; with every subproblem at 1e-6, 0.30-0.50, 0.31-0.57 and
  0.32-0.61. Without screening, the ray start and speculative shrinking the
  1e-6 figures were 0.36-0.76 (C = 10) and 0.48-0.97 (C = 1000). What is left
  at 1e-6: below ``mu = 0.01`` every level costs as many Newton steps from
  ``w0`` as from a cold start, so there warm starts save only the cheaper,
  screened iterations. Speculative shrinking closer to the kink (0.5
  margins, a one-off comparison on the same subproblems) failed often enough
  to cost more than it saved on the first re-solve at C = 1000. Tried and not kept: a dual warm
  start ``C c_new alpha_old / (C c_old)`` (feasible, but its dual value is
  -1.7e3 to -3.3e4 against optima near 3.5e2 at C = 1000, so no iteration is
  saved); other shrink factors (0.03, 0.3) and switch thresholds (0.1, 0.5):
  all within +-20 % iterations, not uniformly better; an active-set polish at
  level switches (the band holds more pairs than ``d``, so it does not
  identify the support pairs); polishing the band's box QP with OSQP (exact,
  but 1-4 s).
* The alternative measured, BMRM cutting planes (:func:`solve_regularized`
  with :func:`pairwise_hinge_oracle`, master QP by OSQP), needs one
  oracle call per iteration but many iterations: 26-200 on 30-300-pair
  problems with C = 0.1-10 and > 300 (gap still 1.2e-4) at C = 1000, where it
  took 54 s against 9 ms for the Newton method; its cost grows like C/eps.
  Newton-CG with Hessian-vector products is not the default on dense X with
  d <= 2000: the smoothed Hessian has condition number ~ C lambda_max(X^T L X)/mu,
  so a CG solve can cost more matvecs than the one explicit Hessian (at d=700
  one Hessian = ~35 matvecs of X); it is used for sparse or wider X (above).
* Reference: one slack per pair through cvxpy + OSQP (eps 1e-8) at 2,000
  pairs: 1.07 s against 0.053 s at tol 1e-6 (20x; the gap grows with size).

:func:`solve_regularized` is the generic bundle method (BMRM) for
``0.5||w||^2 + C L(w)`` with ``L`` convex piecewise linear given by an oracle
(SLAM uses it): slower, but exact to the same certified tolerance.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from . import hessian_free as _hf
from ._linalg import pair_gram
from ._segments import check_finite_1d
from ._validation import check_int, check_real
from .implicit_pairs import ClickPairs
from .pair_qp import solve_pair_dual

__all__ = ["SolverResult", "solve_pairwise_hinge", "solve_regularized", "pairwise_hinge_oracle"]


@dataclass
class SolverResult:
    """Outcome of a solver.

    ``objective`` is the exact primal value at ``coef``; ``dual_objective`` a
    certified lower bound of the optimum; ``gap = objective - dual_objective >= 0``
    bounds the sub-optimality of ``coef``. ``history`` holds one
    ``(objective, dual_objective)`` row per iteration.

    Parameters
    ----------
    coef : array (n_features,)
    objective, dual_objective, gap : float
    n_iter : int
    converged : bool
    history : array (n_iter, 2)
    method : str
        The path taken: ``"newton"`` (dense Hessian), ``"newton_cg"`` (Hessian-free,
        see :mod:`counterfactual_ltr.hessian_free`) or ``"bmrm"``.
    stalled : bool
        Stopped, as asked by ``min_decrease``, because a Newton step lowered the
        objective by less than that after the solve had lowered it by at least that
        (``converged`` is then False; ``gap`` still bounds the sub-optimality).

    Examples
    --------
    >>> import numpy as np
    >>> r = SolverResult(np.zeros(2), objective=1.0, dual_objective=0.9, gap=0.1, n_iter=3, converged=False)
    >>> r.gap, r.converged
    (0.1, False)
    """

    coef: np.ndarray
    objective: float
    dual_objective: float
    gap: float
    n_iter: int
    converged: bool
    history: np.ndarray = field(default_factory=lambda: np.empty((0, 2)), repr=False)
    method: str = "newton"
    stalled: bool = False


# --------------------------------------------------------------------------- validation
def _check_C(C) -> float:
    return check_real(C, "C", min_value=0.0, include_min=False)


def _check_X(X) -> np.ndarray:
    if _hf.is_sparse(X):
        return _hf.check_sparse_X(X)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_docs, n_features), got shape {X.shape}")
    # Row blocks bound the temporary boolean array on very large X.
    step = max(1, (1 << 22) // max(X.shape[1], 1))
    for start in range(0, X.shape[0], step):
        block = X[start:start + step]
        if not np.isfinite(block).all():
            r, c = np.argwhere(~np.isfinite(block))[0]
            raise ValueError(f"X holds a non-finite value ({block[r, c]}) at row {start + r}, column {c}")
    return X


def _check_index(idx, name: str, n_docs: int, n: int | None) -> np.ndarray:
    arr = np.asarray(idx)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has length {arr.shape[0]}, expected {n} (mismatched lengths)")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if arr.dtype == bool or not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integer row indices")
    arr = arr.astype(np.int64)
    bad = np.flatnonzero((arr < 0) | (arr >= n_docs))
    if bad.size:
        raise ValueError(f"{name}[{bad[0]}] = {arr[bad[0]]} is out of range for X with {n_docs} rows")
    return arr


def _check_w0(w0, d: int) -> np.ndarray:
    if w0 is None:
        return np.zeros(d)
    w0 = check_finite_1d(w0, "w0", d)
    return np.array(w0, dtype=np.float64)


def _check_iter(max_iter) -> int:
    return check_int(max_iter, "max_iter", min_value=1)


def _check_tol(tol) -> float:
    return check_real(tol, "tol", min_value=0.0)


# Smallest useful smoothing, relative to the margin.
_MU_FLOOR = 1e-14

# Above this bound on ||w*|| (C * sum of the pair weights * largest pair difference), squares
# of weights and objective values leave float64's range: no meaningful solution exists.
_MAX_WEIGHT_BOUND = 1e100


def _stalls(start_P, before_step, best_P, min_decrease):
    """Whether ``min_decrease`` stops a solve: its last Newton step gained less than that, and the
    whole solve at least that (a solve that has not yet gained it goes on to its gap: near an
    outer loop's fixed point that certifies the small step; at a coarse smoothing the first
    Newton steps can even raise the exact objective)."""
    return (min_decrease > 0 and before_step is not None and start_P - best_P >= min_decrease
            and before_step - best_P < min_decrease)


def _finish(name, w, P, D, n_iter, converged, history, tol, method="newton", stalled=False):
    gap = max(P - D, 0.0)
    if not converged and not stalled:
        warnings.warn(f"{name} stopped after {n_iter} iterations with duality gap {gap:.3g} "
                      f"(relative {gap / max(1.0, abs(P)):.3g} > tol={tol:g})", ConvergenceWarning,
                      stacklevel=3)
    return SolverResult(coef=w, objective=float(P), dual_objective=float(P - gap), gap=float(gap),
                        n_iter=int(n_iter), converged=bool(converged),
                        history=np.asarray(history, dtype=np.float64).reshape(-1, 2), method=method,
                        stalled=bool(stalled))


# --------------------------------------------------------------------------- pairwise hinge
_MU_MIN_FACTOR, _MU_MAX_FACTOR = 0.1, 0.1
_SWITCH = 0.2
# Warm starts: pairs with |z| beyond this many margins start fixed; release rounds before giving up.
_SPECULATE, _MAX_RELEASES = 1.0, 3
# Screening starts below this relative gap and compacts when it drops this share of the pairs.
_SCREEN_START, _SCREEN_MIN_SHARE = 1e-3, 0.1
_WARM_MU = 0.03
# Cold starts: the first level's smoothing costs at most mu / (2 margin) of P(0) = margin C sum(c),
# an upper bound on the optimum (here 5 %). With mu = margin (up to half of P(0), often more than the
# optimum itself) the first level was solved for little: 4-5 Newton steps whose point the next level
# moved far (Yahoo size of bench_solvers: 20 -> 15 Newton steps, 16.3 -> 10.8 s; LETOR size at
# C = 1, 10, 100: 10-11 -> 5-7 steps; MQ2008 RankSVM and PropRank 8-16 -> 5-12; implicit pairs,
# 435 candidates, PropRank C = 10: 12 -> 8).
_COLD_MU = 0.1


def _damping(damp, t):
    """Levenberg-Marquardt weight of the identity in the Newton matrix after a step of length ``t``.

    With fewer band pairs than features the band Hessian is singular: in the directions
    it misses, the Newton step trusts the identity (the regulariser) alone, overshoots
    to the next kinks, and the exact line search returns ``t << 1``. Scaling the
    identity by ``0.5 / t`` shortens the next step there (the band's large curvature
    is unchanged); steps of full length halve the weight back towards 1.
    """
    return damp if t <= 0.0 else max(1.0, damp * 0.5 / t)


def _aggregate(i, j, a, n_docs):
    """Per-document sum of pair values: ``+a`` on the first row of a pair, ``-a`` on the second."""
    return np.bincount(i, a, minlength=n_docs) - np.bincount(j, a, minlength=n_docs)


def _band_hessian(X, ib, jb, h, chunk_bytes=1 << 26, pair_chunk_bytes=1 << 23):
    """``X^T L X`` for the weighted pair Laplacian ``L = sum_b h_b (e_i - e_j)(e_i - e_j)^T``, ``h >= 0``.

    ``L X`` is formed row block by row block over the documents that touch a
    pair, so memory stays at two blocks of ``X`` whatever the number of pairs.
    """
    n, d = X.shape
    deg = np.bincount(ib, h, minlength=n) + np.bincount(jb, h, minlength=n)
    rows = np.flatnonzero(deg)
    if ib.size <= rows.size:
        # Few pairs (late smoothing levels, sampled bands): sum of outer products of pair differences.
        H = pair_gram(X, ib, jb, h, chunk_bytes=pair_chunk_bytes)
        return 0.5 * (H + H.T)
    A = sp.csr_matrix((h, (ib, jb)), shape=(n, n))
    A = (A + A.T).tocsr()                            # symmetric adjacency
    H = np.zeros((d, d))
    step = max(1, chunk_bytes // (8 * max(d, 1)))
    for start in range(0, rows.size, step):
        r = rows[start:start + step]
        contiguous = r[-1] - r[0] + 1 == r.size       # slices avoid copying X
        Xr = X[r[0]:r[-1] + 1] if contiguous else X[r]
        LX = deg[r, None] * Xr - A[r] @ X
        H += Xr.T @ LX
    return 0.5 * (H + H.T)


# A band Hessian over many more pairs than features (wide bands of the first smoothing levels)
# is estimated from a random sample of its pairs, weighted up: at least this many per feature
# (Yahoo size: 20 per feature took 27 Newton iterations, 50 took 20, as many as exact Hessians) ...
_SAMPLE_PAIRS_PER_FEATURE = 50
# ... and as many as make it cost about this many products of X with a vector.
_SAMPLE_MATVECS = 4
# Bands up to this multiple of the cap are taken whole (a sample would save little).
_SAMPLE_SLACK = 2


def _hessian_pairs(ib, jb, h, n, d, rng):
    """The band pairs a Newton Hessian is built from: all of them, or an unbiased sample.

    ``X^T L X`` costs ``2 d^2`` flops per band row, an objective and gradient
    evaluation ``4 n d``. Where the band holds more than twice ``cap = max(50 d, 4 n / d)``
    pairs, each is kept with probability ``cap / |band|`` and its weight divided by
    that probability, so the sampled Laplacian's expectation is the exact one. The
    Newton step needs only a direction: the line search and the certificate use the
    exact objective. (Yahoo size, d = 700: the first level's band holds 508K pairs
    over 309K rows, 8.4 s for the exact Hessian.)
    """
    cap = max(_SAMPLE_PAIRS_PER_FEATURE * d, _SAMPLE_MATVECS * n // max(d, 1))
    if ib.size <= _SAMPLE_SLACK * cap:
        return ib, jb, h
    rate = cap / ib.size
    take = rng.random(ib.size) < rate
    return ib[take], jb[take], h[take] / rate


_NORM_PROBE = 1024


def _exact_norms_pay(X, z, norms, undecided, work, all_i, all_j, radius, rng):
    """Whether exact norms of the ``undecided`` pairs would let screening fix its minimum share.

    They cost a gather of two rows per pair (1.2 s for 1.4M pairs at d = 700), and
    at a loose gap the ball is too wide for them to decide anything: the exact
    norms of a random sample of ``_NORM_PROBE`` undecided pairs estimate the share
    first (nothing is lost if the estimate errs: screening is retried at half the gap).
    """
    positions = np.flatnonzero(undecided)
    if positions.size <= 4 * _NORM_PROBE:
        return True
    probe = positions[rng.choice(positions.size, _NORM_PROBE, replace=False)]
    rows = work[probe]
    share = float(np.mean(np.abs(z[probe]) > _hf.pair_norms(X, all_i[rows], all_j[rows]) * radius))
    decided = np.count_nonzero(np.abs(z) > norms * radius)
    return decided + share * positions.size >= _SCREEN_MIN_SHARE * z.size


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
            lo, q_lo = t, q
        else:
            hi, q_hi = t, q
        if hi - lo <= 1e-13 * hi:
            break
        if q_hi is not None and zs.size > 64:
            # q is linear in t: one piece at both ends means one piece on the whole bracket.
            ones = (q_lo >= 1.0) & (q_hi >= 1.0)
            linear = (q_lo > 0.0) & (q_lo < 1.0) & (q_hi > 0.0) & (q_hi < 1.0)
            c0 -= float(Cd[ones].sum()) + float(np.dot(Cd[linear], zs[linear]))
            c1 += float(np.dot(Cd[linear], ds[linear]))
            keep = ~(ones | linear | ((q_lo <= 0.0) & (q_hi <= 0.0)))
            zs, ds, Cd, q_lo, q_hi = zs[keep], ds[keep], Cd[keep], q_lo[keep], q_hi[keep]
        nt = t - f1 / f2
        if not lo < nt < hi:
            nt = 2.0 * t if hi == np.inf else 0.5 * (lo + hi)
        t = nt
    return lo if lo > 0 else t


def solve_pairwise_hinge(X, pairs_i, pairs_j, pair_weights, C, *, margin=1.0, w0=None, tol=1e-6,
                         max_iter=1000, verbose=False, method="auto", min_decrease=0.0) -> SolverResult:
    """Minimise ``0.5||w||^2 + C sum_p c_p max(0, margin - (x_{i_p} - x_{j_p}).w)`` exactly.

    Parameters
    ----------
    X : (n_docs, d) array or scipy.sparse matrix
        Feature matrix; pairs index its rows. Pair features are never formed.
        A sparse ``X`` stays sparse (CSR) on the Hessian-free path.
    pairs_i, pairs_j : (n_pairs,) int arrays
        Rows of the preferred and the other document of each pair. Or
        ``pairs_i`` is a :class:`~counterfactual_ltr.implicit_pairs.ClickPairs`
        (every clicked row against every other row of its query, never
        materialised) and ``pairs_j = pair_weights = None``; then lists with
        at least 64 pairs per click are solved on sorted scores (``O(n log n)``
        per evaluation whatever the number of pairs), shorter ones on explicit
        pairs (faster there, with screening).
    pair_weights : (n_pairs,) array, >= 0
        Weights ``c_p`` (zero-weight pairs are dropped, duplicates allowed).
    C : float > 0
    margin : float
    w0 : (d,) array, optional
        Warm start (e.g. the solution for nearby weights).
    tol : float
        Stop when ``gap <= tol * max(1, |objective|)``.
    max_iter : int
        Newton iterations; on exhaustion a ``ConvergenceWarning`` is emitted
        and ``converged=False``.
    verbose : bool
        Print one line per iteration.
    method : {"auto", "newton", "newton_cg"}
        Newton steps from an explicit ``d x d`` Hessian (``"newton"``) or by
        conjugate gradients on Hessian-vector products (``"newton_cg"``, cost
        per iteration following the non-zeros of ``X``; see
        :mod:`counterfactual_ltr.hessian_free`). ``"auto"`` takes the latter
        for a sparse ``X`` or more than 2,000 features. Same objective, same
        certificate; the path is recorded in ``SolverResult.method``.
    min_decrease : float >= 0
        Also stop once a Newton step lowers the exact objective by less than this
        (absolute) amount, provided the solve has lowered it by at least this much
        since its start (else it goes on to its gap): ``SolverResult.stalled`` is then
        True, with no warning.
        For outer loops that need descent rather than a certificate, such as the
        convex-concave procedure of SVM PropDCG, whose later subproblems are done
        once their Newton steps gain little next to the outer objective's last
        decrease. The returned point is the best one evaluated, so never worse
        than the start (or the best point on the ray of a warm start).

    Returns
    -------
    SolverResult
        ``dual_objective`` is ``D(alpha) = margin sum(alpha) - 0.5||X^T g(alpha)||^2``
        at a feasible ``0 <= alpha_p <= C c_p``, so ``gap`` certifies ``coef``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(6, 3))
    >>> res = solve_pairwise_hinge(X, [0, 0, 1, 3], [1, 2, 2, 4], [1.0, 2.0, 1.0, 0.5], C=1.0)
    >>> res.converged and res.gap <= 1e-6 * max(1.0, res.objective)
    True
    >>> from counterfactual_ltr.implicit_pairs import ClickPairs
    >>> pairs = ClickPairs([0, 3, 6], [0, 4], [1.0, 2.0])      # rows 0 and 4 clicked
    >>> a = solve_pairwise_hinge(X, pairs, None, None, C=1.0, tol=1e-9)
    >>> b = solve_pairwise_hinge(X, *pairs.explicit(), C=1.0, tol=1e-9)
    >>> bool(abs(a.objective - b.objective) <= 1e-8 * b.objective)
    True
    >>> import scipy.sparse as sp
    >>> c = solve_pairwise_hinge(sp.csr_matrix(X), [0, 0, 1, 3], [1, 2, 2, 4], [1.0, 2.0, 1.0, 0.5], C=1.0)
    >>> c.method, bool(abs(c.objective - res.objective) <= 1e-6 * res.objective)
    ('newton_cg', True)
    """
    with _blas_threads(np.shape(X)):
        return _solve_pairwise_hinge(X, pairs_i, pairs_j, pair_weights, C, margin=margin, w0=w0, tol=tol,
                                     max_iter=max_iter, verbose=verbose, method=method,
                                     min_decrease=min_decrease)


def _solve_pairwise_hinge(X, pairs_i, pairs_j, pair_weights, C, *, margin, w0, tol, max_iter, verbose,
                          method="auto", min_decrease=0.0):
    C = _check_C(C)
    min_decrease = check_real(min_decrease, "min_decrease", min_value=0.0)
    method = _hf.choose_method(X, method)
    X = _check_X(X)
    if _hf.is_sparse(X) and (method == "newton" or _hf.dense_pays(X)):
        # The dense Hessian needs dense rows; and a small CSR X with many non-zeros (at most
        # 4M values, >= 10 % non-zero) is multiplied faster as a transient dense copy.
        X = X.toarray()
    n, d = X.shape
    if isinstance(pairs_i, ClickPairs):
        pairs = pairs_i
        if pairs_j is not None or pair_weights is not None:
            raise ValueError("with ClickPairs as pairs_i, pairs_j and pair_weights must be None "
                             "(the weights are the ClickPairs' own)")
        if pairs.n_rows != n:
            raise ValueError(f"the ClickPairs index {pairs.n_rows} rows but X has {n} rows")
        margin = float(margin)
        if not np.isfinite(margin):
            raise ValueError(f"margin must be finite, got {margin}")
        tol, max_iter = _check_tol(tol), _check_iter(max_iter)
        w = _check_w0(w0, d)
        if _use_implicit(pairs, d):
            ops = _hf.Products(X) if method == "newton_cg" else None
            w, P, D, it, converged, history, stalled = _solve_implicit(X, pairs, C, margin, w, w0 is not None,
                                                                       tol, max_iter, verbose, ops, min_decrease)
            method = _hf.taken(method, ops)
            return _finish("solve_pairwise_hinge", w, P, D, it, converged, history, tol, method, stalled)
        pairs_i, pairs_j, pair_weights = pairs.explicit()
    c = check_finite_1d(pair_weights, "pair_weights")
    i = _check_index(pairs_i, "pairs_i", n, c.shape[0])
    j = _check_index(pairs_j, "pairs_j", n, c.shape[0])
    if c.size and c.min() < 0:
        k = int(np.argmin(c))
        raise ValueError(f"pair_weights must be >= 0, got {c[k]} at index {k}")
    margin = check_real(margin, "margin")
    tol, max_iter = _check_tol(tol), _check_iter(max_iter)
    w = _check_w0(w0, d)

    keep = c > 0
    if not keep.all():
        i, j, c = i[keep], j[keep], c[keep]
    Cc = C * c                                   # upper bounds of the dual variables
    # ||x_i - x_j|| <= ||x_i - m|| + ||x_j - m|| for any m: bounds for the weights' norm here and
    # for the pair norms of screening.
    row_norm = _hf.centered_row_norms(X)
    if i.size:
        # ||w*|| = ||X^T g(alpha*)|| <= sum(C c) * max ||x_i - x_j|| <= sum(C c) * 2 max ||x - m||.
        bound = float(Cc.sum()) * 2.0 * float(np.max(row_norm))
        if not bound <= _MAX_WEIGHT_BOUND:
            raise ValueError(f"C = {C:g} is too large for these pair weights and features: the weights could reach "
                             f"norm {bound:.3g}, beyond float64 arithmetic (C * sum(pair_weights) * max row norm "
                             f"must stay below {_MAX_WEIGHT_BOUND:g})")
    all_i, all_j, all_Cc = i, j, Cc
    # Pairs leave the working set when their dual value is fixed: state 1 = violated
    # (alpha = C c, a linear term), 2 = idle (alpha = 0). The working arrays i, j, Cc and
    # the fixed aggregate are rebuilt from ``state`` whenever it changes.
    state = np.zeros(all_i.size, dtype=np.int8)
    fixed_g, fixed_sum, fixed_v = np.zeros(n), 0.0, np.zeros(d)
    pair_norm = norm_exact = None                # over all pairs, filled when screening starts
    ops = None                                   # the Hessian-free path's reused products (X o X, ...)
    screened_at_gap, releases = np.inf, 0

    def rebuild():
        work = np.flatnonzero(state == 0)
        viol = state == 1
        g = _aggregate(all_i[viol], all_j[viol], all_Cc[viol], n)
        return work, all_i[work], all_j[work], all_Cc[work], g, float(all_Cc[viol].sum()), X.T @ g

    work = np.arange(all_i.size)
    start = None                                 # (w, exact objective) of a warm start, see min_decrease
    s = X @ w if w.any() else np.zeros(n)       # (a pass over X saved on cold starts)
    mu = _initial_mu(margin, w0 is not None)
    # Band width of the next Newton model (above mu once, right after mu shrinks), damping.
    width, damp = mu, 1.0
    if w.any():
        # The optimum for nearby weights is mostly a rescaled w0 (CCP steps change |w| by
        # 20-90 % but its direction by a few degrees): start from the best point on the ray.
        delta = s[i] - s[j]
        a0 = min(max(margin / mu, 0.0), 1.0)
        t = _line_search(np.zeros(d), w, -a0 * float(np.dot(Cc, delta)), np.full(delta.shape, margin),
                         delta, Cc, mu)
        w, s = t * w, t * s
        # Speculative shrinking: pairs far from the margin at the warm start are assumed to
        # stay on their side; the final full-problem check releases any that did not.
        z = margin - (s[i] - s[j])
        if min_decrease > 0:                     # a solve stopped by it returns no worse a point
            start = (w.copy(), 0.5 * float(w @ w) + float(np.dot(Cc, np.maximum(z, 0.0))))
        reach = _SPECULATE * max(abs(margin), 1e-12)
        state[z > reach], state[z < -reach] = 1, 2
        if state.any():
            work, i, j, Cc, fixed_g, fixed_sum, fixed_v = rebuild()
    # The best point with its scores, so that reporting and certifying it need no product X w.
    best_P, best_w, best_s, best_D = np.inf, w.copy(), s.copy(), -np.inf
    rng = np.random.default_rng(0)               # the Hessian's pair samples: same data, same path
    rmatvec = _Rmatvec(X)
    ref = None                                   # (alpha, v, D) of the best dual point on the working set
    history = []
    converged = False
    finish_below = np.inf                        # gap below which the finisher is tried (again)
    it = 0
    # min_decrease: the first objective, the best one before the last Newton step
    stalled, start_P, before_step = False, None, None
    while True:
        z = margin - (s[i] - s[j])               # hinge argument of every working pair
        # Pairs fixed as violated contribute their (linear) hinge exactly.
        hinge = float(np.dot(Cc, np.maximum(z, 0.0)))
        P = 0.5 * float(w @ w) + margin * fixed_sum - float(s @ fixed_g) + hinge
        a = np.clip(z / mu, 0.0, 1.0)            # derivative of the smoothed hinge
        alpha = Cc * a                           # feasible dual point (fixed pairs at 0 or C c)
        v = fixed_v + rmatvec(_aggregate(i, j, alpha, n))
        D = margin * (fixed_sum + float(alpha.sum())) - 0.5 * float(v @ v)
        if P < best_P:
            best_P, best_w, best_s = P, w.copy(), s.copy()
        # Away from the smoothed optimum alpha and w disagree and D(alpha) is poor; the
        # best dual point on the segment from the previous best alpha is a cheap fix
        # (D is a concave quadratic along it and the box stays satisfied).
        if ref is None:
            ref = (alpha, v, D)
        else:
            ref_alpha, ref_v, ref_D = ref
            dv = v - ref_v
            slope = margin * float(alpha.sum() - ref_alpha.sum()) - float(ref_v @ dv)
            curv = float(dv @ dv)
            t = 1.0 if curv <= 0 else min(max(slope / curv, 0.0), 1.0)
            D_t = ref_D + t * slope - 0.5 * t * t * curv
            if D_t > ref_D:
                ref = (ref_alpha + t * (alpha - ref_alpha), ref_v + t * dv, D_t)
        best_D = max(best_D, ref[2])             # every D is a full-problem dual value: a bound
        gap = best_P - best_D
        target = tol * max(1.0, abs(best_P))
        if target < gap <= min(finish_below, _FINISH_START * max(1.0, abs(best_P))):
            kink = _kink_pairs(z, mu, d)
            if kink is not None:
                finish_below = _FINISH_BACKOFF * gap
                alpha_f, v_f, s_f, P_f, D_f = _finish_on_kink(X, i, j, Cc, z, kink, margin, fixed_v, fixed_sum,
                                                              fixed_g, target, rmatvec, n)
                if D_f > best_D:
                    best_D, ref = D_f, (alpha_f, v_f, D_f)
                if P_f < best_P:
                    best_P, best_w, best_s = P_f, v_f.copy(), s_f.copy()
                if P_f < P:                      # go on from the better point, evaluated afresh
                    w, s = v_f, s_f
                    continue
                gap = best_P - best_D
                target = tol * max(1.0, abs(best_P))
        history.append((best_P, best_D))
        if verbose:
            print(f"[solve_pairwise_hinge] it={it:3d} mu={mu:.2e} P={P:.10g} D={D:.10g} "
                  f"rel gap={gap / max(1.0, abs(best_P)):.2e} working pairs={i.size}")
        if start_P is None:
            start_P = best_P
        if _stalls(start_P, before_step, best_P, min_decrease) and gap > target:
            stalled = True
            break
        before_step = None
        if gap <= target:
            if not state.any():
                converged = True
                break
            # Certify on the full problem: the reduced objective differs from the true one
            # only through fixed pairs now on the wrong side of the margin.
            z_all = margin - (best_s[all_i] - best_s[all_j])
            full_P = 0.5 * float(best_w @ best_w) + float(np.dot(all_Cc, np.maximum(z_all, 0.0)))
            if full_P - best_D <= tol * max(1.0, abs(full_P)):
                converged = True
                break
            wrong = ((state == 1) & (z_all < 0.0)) | ((state == 2) & (z_all > 0.0))
            releases += 1
            # A wrong guess also voids later screening, which relied on the reduced problem:
            # after a few releases everything is released and only safe screening remains.
            state[wrong if releases < _MAX_RELEASES and wrong.any() else slice(None)] = 0
            work, i, j, Cc, fixed_g, fixed_sum, fixed_v = rebuild()
            ref, screened_at_gap = None, np.inf
            best_P = _hinge_objective(best_s, best_w, i, j, Cc, margin, fixed_sum, fixed_g)
            # Released pairs can sit far inside the margin: resume the continuation from the
            # warm-start level (a tiny mu makes the far-off point a piecewise-linear problem).
            mu = width = max(mu, _initial_mu(margin, True))
            damp = 1.0
            it += 1
            if it >= max_iter:
                break
            continue
        if it >= max_iter:
            break
        # Gap-safe screening: ||w - w*||^2 <= 2 (P(w) - D), so a pair whose hinge argument
        # keeps its sign over that ball is violated (alpha* = C c) or idle (alpha* = 0) at
        # the optimum (of the reduced problem); fixing it leaves that optimum unchanged and
        # the iterations cheaper.
        if P - best_D < min(_SCREEN_START * max(1.0, abs(P)), 0.5 * screened_at_gap):
            screened_at_gap = P - best_D
            radius = np.sqrt(2.0 * max(P - best_D, 0.0)) * (1.0 + 1e-9)
            if pair_norm is None:
                # The bound from the rows' centred norms; exact norms only where it does not decide.
                pair_norm, norm_exact = row_norm[all_i] + row_norm[all_j], np.zeros(all_i.size, dtype=bool)
            norms = pair_norm[work]
            undecided = (np.abs(z) <= norms * radius) & ~norm_exact[work]
            if undecided.any() and method == "newton" and _exact_norms_pay(X, z, norms, undecided, work, all_i,
                                                                        all_j, radius, rng):
                # (Hessian-free path: exact pair norms cost more than the pairs they would screen save)
                rows = work[undecided]
                norms[undecided] = pair_norm[rows] = _hf.pair_norms(X, all_i[rows], all_j[rows])
                norm_exact[rows] = True
            reach = norms * radius + 1e-12 * abs(margin)
            viol, idle = z > reach, z < -reach
            if (viol | idle).sum() >= max(1, _SCREEN_MIN_SHARE * i.size):
                state[work[viol]], state[work[idle]] = 1, 2
                work, i, j, Cc, fixed_g, fixed_sum, fixed_v = rebuild()
                ref = None
                best_P = _hinge_objective(best_s, best_w, i, j, Cc, margin, fixed_sum, fixed_g)
                continue
        # Gap of the smoothed problem at (w, alpha); once it is a small part of the exact
        # gap, the smoothing error dominates and mu must shrink.
        # The smoothed hinge is a z - mu a^2 / 2, and the smoothed dual subtracts mu a^2 / 2
        # per pair too: the two smoothing terms cancel.
        smooth_gap = P - hinge + float(alpha @ z) - D
        if smooth_gap <= _SWITCH * gap:
            width = mu
            mu *= float(np.clip(0.5 * target / gap, _MU_MIN_FACTOR, _MU_MAX_FACTOR))
            it += 1
            if mu < _MU_FLOOR * max(abs(margin), 1e-12):
                # Hinge arguments carry rounding errors far above such a smoothing (huge C or
                # tol below float64 resolution): further levels would only divide by ~0.
                warnings.warn(f"solve_pairwise_hinge: smoothing mu = {mu:.3g} fell below float64 resolution "
                              f"at C = {C:g}, gap {gap:.3g}; stopping early", ConvergenceWarning, stacklevel=2)
                break
            continue
        grad = w - v
        band = (a > 0.0) & (a < 1.0)
        if width > mu and np.count_nonzero(band) < d:
            # Path-following step after mu shrank: the pairs of the last level's band keep
            # their quadratic piece, now with slope 1 / mu (unclipped), and the rest their
            # piece. The minimiser of that quadratic is where the smoothed optimum moves if
            # no pair changes side. Needed where the new band alone holds fewer pairs than
            # features (sparse, higher-dimensional data): its Hessian then misses directions,
            # and Newton steps from there crawl (t ~ 1e-3) until the band fills again. With
            # a full band the plain step is as good and cheaper (narrower band).
            band = (z > 0.0) & (z < width)
            model_a = np.where(band, z / mu, (z >= width).astype(np.float64))
            model_grad = w - fixed_v - rmatvec(_aggregate(i, j, Cc * model_a, n))
        else:
            model_grad = grad
        width = mu
        u = None
        if method == "newton_cg":
            if ops is None:
                ops = _hf.Products(X)
            u, _ = _hf.newton_cg_direction(ops, model_grad, *_hf.explicit_band(i[band], j[band], Cc[band] / mu, n),
                                           rtol=_hf.forcing(smooth_gap, P))
        if u is None:                            # dense path, or CG lost to rounding
            ib, jb, hb = _hessian_pairs(i[band], j[band], Cc[band] / mu, n, d, rng)
            H = (_hf.dense_band_hessian if _hf.is_sparse(X) else _band_hessian)(X, ib, jb, hb)
            # Damping only where the band leaves directions without curvature (fewer pairs than d).
            H[np.diag_indices_from(H)] += damp if np.count_nonzero(band) < d else 1.0
            try:
                u = -scipy.linalg.cho_solve(scipy.linalg.cho_factor(H, overwrite_a=True), model_grad)
            except (np.linalg.LinAlgError, ValueError):
                # C / mu so large that the identity is lost in rounding: stop with the best
                # certified point (the warning of ``_finish`` reports the gap).
                warnings.warn(f"solve_pairwise_hinge: the Newton system is numerically singular at C = {C:g} "
                              f"(smoothing mu = {mu:.3g}); stopping early", ConvergenceWarning, stacklevel=2)
                break
        Xu = X @ u
        delta = Xu[i] - Xu[j]
        t = _line_search(w, u, float(grad @ u), z, delta, Cc, mu, fixed_slope=float(u @ fixed_v))
        damp = _damping(damp, t)
        w = w + t * u
        s = s + t * Xu
        before_step = best_P
        it += 1

    # Report the exact objective at the returned point on all pairs (scores tracked as s + t X u:
    # within ~1e-15 relative of X w; the product would cost a pass over X).
    w = best_w
    P = _hinge_objective(best_s, w, all_i, all_j, all_Cc, margin)
    if stalled and start is not None and start[1] < P:
        # best_w was the best on the reduced problem, whose speculatively fixed pairs can be
        # on the wrong side there: keep the (exactly evaluated) start.
        w, P = start
    converged = converged and P - best_D <= tol * max(1.0, abs(P))
    return _finish("solve_pairwise_hinge", w, P, best_D, it, converged, history, tol, _hf.taken(method, ops),
                   stalled)


# Finisher (see ``_finish_on_kink``): first tried below this relative gap, on the pairs within
# this many mu of the kink (the closest of them up to this many per feature), only while the
# band holds no more pairs than that; tried again once the gap has fallen by this factor.
_FINISH_START, _FINISH_WIDTH, _FINISH_PAIRS_PER_FEATURE, _FINISH_BACKOFF = 1e-2, 10.0, 3.0, 0.25
_FINISH_ROUNDS = 3


def _finish_cap(d):
    return int(_FINISH_PAIRS_PER_FEATURE * max(d, 100))


def _kink_pairs(z, mu, d):
    """The working pairs closest to the kink (within ``_FINISH_WIDTH mu``, at most the finisher's cap)."""
    cap = _finish_cap(d)
    if np.count_nonzero((z > 0.0) & (z < mu)) > cap:
        return None                              # a band this wide means a kink set too large to solve
    near = np.flatnonzero(np.abs(z) < _FINISH_WIDTH * mu)
    if near.size > cap:
        near = near[np.argpartition(np.abs(z[near]), cap - 1)[:cap]]
    return near if near.size else None


def _finish_on_kink(X, i, j, Cc, z, kink, margin, fixed_v, fixed_sum, fixed_g, atol, rmatvec, n):
    """Solve the problem exactly over the pairs near the kink, every other pair held on its side.

    Returns the full problem's dual point (``alpha``, ``v = X^T g(alpha)``), the primal
    candidate ``v`` with its scores, and both exact objectives. Pairs found on the other
    side at the solution join the kink set and the restricted problem is solved again
    (an outer active-set loop, ``_FINISH_ROUNDS`` at most). Where the held sides are those
    of the optimum, the two objectives meet; otherwise they are still a valid bound and
    a candidate (see :mod:`~counterfactual_ltr.pair_qp`).
    """
    best = None
    cap = 2 * _finish_cap(X.shape[1])
    held = z > 0.0                               # side each pair outside the kink set is held on
    in_kink = np.zeros(z.size, dtype=bool)
    for _ in range(_FINISH_ROUNDS):
        in_kink[kink] = True
        top = held & ~in_kink
        q = fixed_v + rmatvec(_aggregate(i[top], j[top], Cc[top], n))
        Z = X[i[kink]] - X[j[kink]]
        if _hf.is_sparse(Z):
            Z = Z.toarray()
        lam, v, _ = solve_pair_dual(Z, q, Cc[kink], margin, atol)
        alpha = np.where(top, Cc, 0.0)
        alpha[kink] = lam
        D = margin * (fixed_sum + float(alpha.sum())) - 0.5 * float(v @ v)
        s = X @ v
        z_new = margin - (s[i] - s[j])
        P = 0.5 * float(v @ v) + margin * fixed_sum - float(s @ fixed_g) + float(np.dot(Cc, np.maximum(z_new, 0.0)))
        if best is None or P - D < best[3] - best[4]:
            best = (alpha, v, s, P, D)
        wrong = ~in_kink & ((z_new > 0.0) != held)
        if P - D <= atol or not wrong.any() or kink.size + np.count_nonzero(wrong) > cap:
            break                                # (too many held on the wrong side: not near enough yet)
        kink = np.flatnonzero(wrong | in_kink)
    return best


# Implicit pairs beat explicit ones from this many pairs per anchor (list length - 1) on.
_IMPLICIT_MIN_PAIRS_PER_ANCHOR = 64


def _use_implicit(pairs, d):
    return pairs.anchors.size > 0 and pairs.n_pairs >= _IMPLICIT_MIN_PAIRS_PER_ANCHOR * pairs.anchors.size


# BLAS threads pay only for large products on idle cores; on small products, or on a busy
# machine, they cost 3-50x (measured, 2 cores shared by other jobs: d=300, 3,005 rows: 4.6 s
# with 2 threads, 0.16 s with 1; LETOR size 8.1-9.4 s against 1.9-3.2 s).
_THREADED_MIN_FLOPS = 1e10


def _blas_threads(shape):
    import os
    from contextlib import nullcontext

    n, d = (tuple(shape) + (1, 1))[:2]
    cores = os.cpu_count() or 1
    idle = cores - (os.getloadavg()[0] if hasattr(os, "getloadavg") else cores)
    if float(n) * d * d >= _THREADED_MIN_FLOPS and idle >= 1:
        return nullcontext()
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")


_CONTROLLER = None


def _hinge_objective(s, w, i, j, Cc, margin, fixed_sum=0.0, fixed_g=None):
    """Primal objective at ``w`` from its scores ``s = X w``; ``fixed_*`` add the linear hinge of pairs
    screened as violated."""
    linear = 0.0 if fixed_g is None else margin * fixed_sum - float(s @ fixed_g)
    return 0.5 * float(w @ w) + linear + float(np.dot(Cc, np.maximum(margin - (s[i] - s[j]), 0.0)))


def _initial_mu(margin, warm):
    return (abs(margin) if margin != 0 else 1.0) * (_WARM_MU if warm else _COLD_MU)


# --------------------------------------------------------------------------- generic bundle method
def pairwise_hinge_oracle(X, pairs_i, pairs_j, pair_weights, margin=1.0):
    """``oracle(w) -> (L(w), subgradient)`` of ``L(w) = sum_p c_p max(0, margin - (x_i - x_j).w)``.

    Parameters
    ----------
    X : array (n, d)
    pairs_i, pairs_j : arrays of int
        Each pair prefers row ``i`` to row ``j``.
    pair_weights : array
        ``c_p >= 0``.
    margin : float, default 1.0

    Returns
    -------
    callable ``w -> (L(w), subgradient)``

    Examples
    --------
    >>> import numpy as np
    >>> oracle = pairwise_hinge_oracle(np.eye(2), [0], [1], [2.0])
    >>> value, grad = oracle(np.zeros(2))
    >>> value, grad.tolist()
    (2.0, [-2.0, 2.0])
    """
    X = np.asarray(X, dtype=np.float64)
    i, j = np.asarray(pairs_i, dtype=np.int64), np.asarray(pairs_j, dtype=np.int64)
    c = np.asarray(pair_weights, dtype=np.float64)
    n = X.shape[0]

    def oracle(w):
        s = X @ w
        z = margin - (s[i] - s[j])
        viol = z > 0
        return float(np.dot(c[viol], z[viol])), -(X.T @ _aggregate(i[viol], j[viol], c[viol], n))

    return oracle


def _project_simplex(v):
    """Euclidean projection onto ``{b >= 0, sum b = 1}`` (sort-based)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.arange(1, v.size + 1)
    rho = np.flatnonzero(u - css / k > 0)[-1]
    return np.maximum(v - css[rho] / (rho + 1.0), 0.0)


def solve_regularized(oracle, n_features, C, *, w0=None, tol=1e-6, max_iter=1000, verbose=False) -> SolverResult:
    """Minimise ``0.5||w||^2 + C L(w)`` for a convex piecewise-linear ``L`` given by an oracle.

    BMRM bundle method (Teo et al. 2010): cutting planes ``L(w) >= a_k.w + b_k``
    from ``oracle(w) -> (L(w), subgradient)``; the master problem is solved
    in its dual over the simplex, ``max_b  C b.B - 0.5 C^2 ||A^T b||^2``, by OSQP
    warm-started from the previous multipliers. The multipliers are projected
    onto the simplex before the dual value is taken, so the lower bound is
    certified whatever OSQP's accuracy; ``gap`` = best primal value minus the
    best lower bound. Planes idle for many iterations are dropped.

    Parameters
    ----------
    oracle : callable ``w -> (L(w), subgradient)``
    n_features : int
    C : float > 0
    w0 : array (n_features,), optional
        Warm start.
    tol : float > 0, default 1e-6
        Relative duality gap at which to stop.
    max_iter : int, default 1000
    verbose : bool, default False

    Returns
    -------
    SolverResult

    Examples
    --------
    >>> import numpy as np
    >>> oracle = pairwise_hinge_oracle(np.eye(2), [0], [1], [1.0])
    >>> result = solve_regularized(oracle, 2, C=10.0)
    >>> result.converged, np.round(result.coef, 4).tolist()   # margin reached: w0 - w1 = 1
    (True, [0.5, -0.5])
    """
    import osqp

    C = _check_C(C)
    d = check_int(n_features, "n_features", min_value=1)
    tol, max_iter = _check_tol(tol), _check_iter(max_iter)
    try:
        w = _check_w0(w0, d)
    except (MemoryError, OverflowError) as err:
        raise ValueError(f"n_features = {d:.3g}: the weight vector cannot be allocated ({type(err).__name__})") from None
    except ValueError as err:
        if "n_features" in str(err) or "w0" in str(err):
            raise
        raise ValueError(f"n_features = {d:.3g}: the weight vector cannot be allocated ({err})") from None

    planes_a = np.empty((0, d))
    planes_b = np.empty(0)
    idle = np.empty(0, dtype=np.int64)
    beta = np.empty(0)
    best_P, best_w, best_D = np.inf, w.copy(), -np.inf
    history = []
    converged = False
    it = 0
    while True:
        try:
            L, g = oracle(w)
        except (TypeError, ValueError) as err:
            if it:
                raise
            raise type(err)(f"the oracle failed on a weight vector of n_features = {d} entries: {err}") from err
        g = np.asarray(g, dtype=np.float64)
        if g.size != d:
            raise ValueError(f"the oracle's subgradient has {g.size} entries but n_features = {d}")
        g = g.reshape(d)
        L = float(L)
        if not np.isfinite(L) or not np.all(np.isfinite(g)):
            raise ValueError(f"the oracle returned a non-finite value or subgradient at iteration {it} "
                             f"(at a point of norm {np.linalg.norm(w):.3g}; C = {C:g})")
        if it == 0 and not C * float(np.linalg.norm(g)) <= _MAX_WEIGHT_BOUND:
            # The iterates are -C A^T beta: their norm reaches C times the subgradients' norm.
            raise ValueError(f"C = {C:g} is too large for this loss: C times the subgradient norm "
                             f"{np.linalg.norm(g):.3g} leaves float64 arithmetic (must stay below "
                             f"{_MAX_WEIGHT_BOUND:g})")
        P = 0.5 * float(w @ w) + C * L
        if P < best_P:
            best_P, best_w = P, w.copy()
        planes_a = np.vstack([planes_a, g])
        planes_b = np.append(planes_b, L - float(g @ w))
        idle = np.append(idle, 0)
        beta = np.append(beta, 0.0)
        # Master dual: min_b 0.5 C^2 b.(A A^T) b - C B.b over the simplex.
        K = planes_b.size
        Q = C * C * (planes_a @ planes_a.T)
        Q = 0.5 * (Q + Q.T) + 1e-12 * np.trace(Q) / K * np.eye(K)
        cons = sp.vstack([sp.csc_matrix(np.ones((1, K))), sp.eye(K, format="csc")], format="csc")
        lo = np.r_[1.0, np.zeros(K)]
        hi = np.r_[1.0, np.full(K, np.inf)]
        solver = osqp.OSQP()
        solver.setup(P=sp.triu(sp.csc_matrix(Q), format="csc"), q=-C * planes_b, A=cons, l=lo, u=hi,
                     eps_abs=1e-9, eps_rel=1e-9, max_iter=4000, polishing=True, verbose=False)
        if beta.sum() > 0:
            solver.warm_start(x=beta / beta.sum())
        res = solver.solve(raise_error=False)
        x = res.x if res.x is not None and np.all(np.isfinite(res.x)) else np.full(K, 1.0 / K)
        beta = _project_simplex(x)
        Ab = planes_a.T @ beta
        D = C * float(planes_b @ beta) - 0.5 * C * C * float(Ab @ Ab)
        best_D = max(best_D, D)
        history.append((best_P, best_D))
        gap = best_P - best_D
        if verbose:
            print(f"[solve_regularized] it={it:3d} planes={K} P={best_P:.10g} D={best_D:.10g} "
                  f"rel gap={gap / max(1.0, abs(best_P)):.2e}")
        if gap <= tol * max(1.0, abs(best_P)):
            converged = True
            break
        it += 1
        if it >= max_iter:
            break
        w = -C * Ab
        # Drop planes that stayed inactive for a while: keeps the master QP small.
        idle = np.where(beta > 0, 0, idle + 1)
        keep = idle < 50
        if not keep.all():
            planes_a, planes_b, idle, beta = planes_a[keep], planes_b[keep], idle[keep], beta[keep]
    return _finish("solve_regularized", best_w, best_P, best_D, it, converged, history, tol, "bmrm")


# --------------------------------------------------------------------------- implicit click pairs
# Line searches of the implicit path stop at a strong Wolfe slope (|phi'(t)| <= 0.1 |phi'(0)|):
# every evaluation is a sort of all scores, and an exact search took 2.5-5 of them per Newton
# step (435 candidates, 570K rows, PropDCG at C = 100) for no fewer Newton steps.
_LINE_SEARCH_RTOL = 0.1
# On the cold start's first level the band Hessian is estimated from a sample of queries covering
# about this many rows per d^2 (at d = 46: 63K of the 405-570K rows at 435 candidates; PropRank
# C = 10: 2.4 s CPU, 12 Newton steps, against 3.1 s, 10 steps, with the exact Hessian).
_HESSIAN_SAMPLE_ROWS = 30


def _solve_implicit(X, pairs, C, margin, w, warm, tol, max_iter, verbose, ops=None, min_decrease=0.0):
    """Smoothing continuation + Newton over :class:`ClickPairs` without forming any pair.

    Same method, dual point and certificate as the explicit path: ``alpha =
    C c clip(z / mu, 0, 1)`` is feasible at every iterate, ``D(alpha)`` is
    exact, and the best dual point on the segment from the previous one is
    kept (only ``sum alpha`` and ``X^T g`` of it are needed). No screening:
    an evaluation already costs ``O(n log n)`` whatever the number of pairs.
    """
    from .implicit_pairs import _Smoothed, band_hessian, line_search

    keep = pairs.weights > 0
    if not keep.all():
        pairs = type(pairs)(pairs.query_offsets, pairs.anchors[keep], pairs.weights[keep])
    Cc = C * pairs.weights
    s = X @ w
    mu = mu0 = _initial_mu(margin, warm)


    def along(s_base, Xu):
        def ev_at(t, need_hess):
            ev = _Smoothed(pairs, s_base + t * Xu, Cc, margin, mu)
            return ev.aggregate()[0], ev
        return ev_at

    if warm and w.any():
        t = line_search(s, np.zeros_like(w), w, along(np.zeros_like(s), s), mu, rtol=_LINE_SEARCH_RTOL)
        w, s = t * w, t * s
    best_P, best_w, best_D = np.inf, w.copy(), -np.inf
    ref = None
    history = []
    converged = False
    it = 0
    # Band width of the last level, as in the explicit path. (From w = 0 every pair has z = margin,
    # beyond a cold start's band: the first step is the raw gradient, which the line search cuts
    # to length. A model keeping those pairs quadratic took 10 Newton steps instead of 8 at
    # mu = 0.1 margin, 435 candidates, PropRank C = 10; it paid only when the first level was
    # mu = margin.)
    width = mu
    ev = None                                    # the line search's evaluation at the new point
    # min_decrease: the first objective, the best one before the last Newton step
    stalled, start_P, before_step = False, None, None
    while True:
        if ev is None or ev.mu != mu:
            ev = _Smoothed(pairs, s, Cc, margin, mu)
        hinge = ev.hinge()
        P = 0.5 * float(w @ w) + hinge
        g, alpha_sum = ev.aggregate()
        # A full product: the aggregates come from cumulative sums over all rows, so rounding
        # changes every row between iterations and ``_Rmatvec`` would never update incrementally.
        v = _rmatvec(X, g)
        D = margin * alpha_sum - 0.5 * float(v @ v)
        if P < best_P:
            best_P, best_w = P, w.copy()
        if ref is None:
            ref = (alpha_sum, v, D)
        else:
            ref_sum, ref_v, ref_D = ref
            dv = v - ref_v
            slope = margin * (alpha_sum - ref_sum) - float(ref_v @ dv)
            curv = float(dv @ dv)
            t = 1.0 if curv <= 0 else min(max(slope / curv, 0.0), 1.0)
            D_t = ref_D + t * slope - 0.5 * t * t * curv
            if D_t > ref_D:
                ref = (ref_sum + t * (alpha_sum - ref_sum), ref_v + t * dv, D_t)
        best_D = max(best_D, ref[2])
        history.append((best_P, best_D))
        gap = best_P - best_D
        target = tol * max(1.0, abs(best_P))
        if verbose:
            print(f"[solve_pairwise_hinge/implicit] it={it:3d} mu={mu:.2e} P={P:.10g} D={D:.10g} "
                  f"rel gap={gap / max(1.0, abs(best_P)):.2e}")
        if gap <= target:
            converged = True
            break
        if start_P is None:
            start_P = best_P
        if _stalls(start_P, before_step, best_P, min_decrease):
            stalled = True
            break
        before_step = None
        if it >= max_iter:
            break
        # sum_p alpha_p z_p = margin sum(alpha) - g.s: the smoothed problem's own gap.
        smooth_gap = P - hinge + margin * alpha_sum - float(g @ s) - D
        if smooth_gap <= _SWITCH * gap:
            width = mu
            mu *= float(np.clip(0.5 * target / gap, _MU_MIN_FACTOR, _MU_MAX_FACTOR))
            it += 1
            continue
        grad = w - v
        if width > mu:
            # Path-following step after mu shrank (see the explicit path). On long lists it
            # pays whatever the band's size (435 candidates, d = 46, PropDCG at C = 100:
            # inner iterations 8 -> 15 over the CCP instead of 9 -> 20, 24.8 s CPU against 35.1 s,
            # before the cheaper line search and Hessians).
            model = _Smoothed(pairs, s, Cc, margin, mu, width=width)
            model_grad = w - _rmatvec(X, model.aggregate()[0])
        else:
            model, model_grad = ev, grad
        width = mu
        u = None
        if ops is not None:                      # Hessian-free path (a Products of X)
            u, _ = _hf.newton_cg_direction(ops, model_grad, *_hf.implicit_band(model), rtol=_hf.forcing(smooth_gap, P))
        if u is None:                            # dense path, or CG lost to rounding
            # The cold start's first level (bands over most rows): the Hessian from a
            # sample of the queries (see band_hessian). Elsewhere the exact one: on warm starts a
            # sampled Hessian doubled the Newton steps even at gaps above 1e-2.
            sample = _HESSIAN_SAMPLE_ROWS * X.shape[1] ** 2 if mu == mu0 and not warm else None
            H = band_hessian(X.toarray() if _hf.is_sparse(X) else X, model, max_rows=sample)
            H[np.diag_indices_from(H)] += 1.0
            u = -scipy.linalg.cho_solve(scipy.linalg.cho_factor(H, overwrite_a=True), model_grad)
        Xu = X @ u
        t, ev = line_search(Xu, w, u, along(s, Xu), mu, f0=float(grad @ u), return_eval=True,
                            rtol=_LINE_SEARCH_RTOL)
        w = w + t * u
        s = s + t * Xu
        before_step = best_P
        it += 1
    # ``best_P`` is the exact objective (hinge on every pair) at ``best_w``, from scores updated
    # as ``s + t X u``: within rounding (~1e-15 relative) of ``X w``, so not recomputed (a
    # product and a sort per solve, 9 of them in a CCP).
    return best_w, best_P, best_D, it, converged, history, stalled


def _rmatvec(X, g):
    return X.T @ g


# X^T g from the last product when at most this share of the rows of g changed.
_INCREMENTAL_SHARE = 0.2


def _rows_rmatvec(X, rows, coeffs, chunk_bytes=1 << 20):
    """``X[rows]^T coeffs`` gathered in cache-sized blocks of rows into one reused buffer.

    ``X[rows]`` at once writes and re-reads a copy of those rows, in fresh memory:
    8K rows of a 480K x 700 ``X`` took 0.13-0.15 s that way (as long as the full
    product), 13 ms in 1 MiB blocks (60K rows: 0.76 s against 0.07 s).
    """
    if _hf.is_sparse(X):
        return _rmatvec(X[rows], coeffs)
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
    over the changed rows ``C`` costs ``|C| d`` instead of ``n d`` (Yahoo size: 480K
    rows, d = 700, 0.16 s per full product; 8-60K changed rows on the last levels).
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
        self.g, self.v = g, _rmatvec(self.X, g)
        return self.v
