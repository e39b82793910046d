"""Exact solvers for the regularised convex problems of the linear rankers.

Every linear ranking SVM of the toolkit minimises

    P(w) = 0.5 ||w||^2 + C sum_p c_p max(0, margin - (x_{i_p} - x_{j_p}) . w)

over weighted pairs of rows of ``X`` (RankSVM, SVM PropRank, and the re-weighted subproblems of
the convex-concave procedure of SVM PropDCG and PropRBP, :mod:`counterfactual_ltr.solvers.ccp`). Its dual
is ``D(alpha) = margin sum(alpha) - 0.5 ||X^T g(alpha)||^2``, ``0 <= alpha_p <= C c_p``, with
``g`` the per-document aggregation ``g_k = sum_{i_p=k} alpha_p - sum_{j_p=k} alpha_p``. Pair
features are never formed.

:func:`solve_pairwise_hinge` solves it to a certified relative duality gap by Huber smoothing
with continuation, each smoothing level solved by Newton's method: the smoothed hinge's
derivative is a feasible dual point at every iterate, so every iteration certifies an exact gap,
and Newton converges in a few steps per level where first-order and cutting-plane methods need
many (their iteration counts grow like ``C / eps``). Its parts, one module each:

* :mod:`.pairwise`: the entry point: inputs checked, the path chosen, BLAS threads limited;
* :mod:`.smoothing`: the continuation both Newton paths share (where ``mu`` starts, when it
  shrinks, the dual search, the ``min_decrease`` stop);
* :mod:`.explicit`: the Newton loop on pairs given as index arrays, as a state object whose
  steps are named methods (evaluate, finish near the kink, stop or release, screen, shrink the
  smoothing, Newton step);
* :mod:`.newton_direction`: the Newton system from the band Hessian (exact, sampled, or by
  conjugate gradients, :mod:`counterfactual_ltr.solvers.hessian_free`);
* :mod:`.working_set`: gap-safe screening and the speculative fixing of pairs on warm starts;
* :mod:`.finisher`: the exact interior-point solve of the pairs near the kink
  (:mod:`counterfactual_ltr.solvers.pair_qp`);
* :mod:`.implicit`: the same method over :class:`~counterfactual_ltr.surrogates.implicit_pairs.ClickPairs`
  on long candidate lists, from scores sorted per query, without pair arrays.

:func:`solve_regularized` (:mod:`.bmrm`) is the generic bundle method for
``0.5||w||^2 + C L(w)`` with ``L`` convex piecewise linear given by an oracle (SLAM uses it):
slower, but exact to the same certified tolerance. :mod:`.common` holds what every solver
shares, :mod:`counterfactual_ltr.solvers.constrained` included: :class:`SolverResult`, input checks,
pair aggregation.

Measurements behind these choices, and what was tried without gain: ``docs/solver-notes.md``.
"""

from .bmrm import pairwise_hinge_oracle, solve_regularized
from .common import SolverResult
from .pairwise import solve_pairwise_hinge

__all__ = ["SolverResult", "solve_pairwise_hinge", "solve_regularized", "pairwise_hinge_oracle"]
