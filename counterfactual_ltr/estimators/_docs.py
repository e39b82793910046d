"""Parameter text the estimators share (see :mod:`counterfactual_ltr._docs`).

A docstring line ``{name, ...}`` of an estimator is filled from :data:`DOCS` at import; the classes'
docstrings, as ``help()`` and ``tests/test_estimator_docs.py`` read them, stay complete.
"""

from __future__ import annotations

from .._docs import fill_doc

__all__ = ["DOCS", "doc"]

DOCS = {
    # the two lines under ``C`` that every learner with a C shares
    "C_scale": """\
A C too large for the solver is refused before any solving, by the rule every learner with
a C shares (:func:`~counterfactual_ltr.estimators._base.check_C_scale`).""",
    "propensity": """\
propensity : None, float or propensity model, default None
    Examination propensities of the logged clicks: ``None`` is position-based
    with eta = 1, a float is that eta. It must match how the log was collected
    (see :mod:`counterfactual_ltr.propensity`); a trust-bias model
    (:class:`~counterfactual_ltr.propensity.TrustBiasPropensity`) gives the affine correction.""",
    "max_iter_warning": "max_iter : int >= 1, default 1000\n    Solver iterations before a ConvergenceWarning.",
    # the convex-concave procedure of SVMPropDCG / SVMPropRBP
    "max_ccp_iter": """\
max_ccp_iter : int >= 1, default 50
    Convex-concave iterations before a ConvergenceWarning.""",
    "tol": """\
tol : float >= 0, default 1e-3
    Relative change of the objective at which the CCP stops.""",
    "solver_tol": """\
solver_tol : float > 0, default 1e-6
    Tightest relative duality gap asked of a subproblem.""",
    "max_iter": """\
max_iter : int >= 1, default 1000
    Solver iterations per subproblem.""",
    "preprocessor": """\
preprocessor : scikit-learn transformer, optional
    E.g. ``StandardScaler()``: a clone is fitted in ``fit`` on the documents the
    training input touches (a click log's queries' rows) and applied in
    ``predict``; tunable in model selection as ``preprocessor__<param>``.""",
    "monotone_constraints": """\
monotone_constraints : sequence of -1/0/+1 per feature, or dict {feature index: sign}, optional
    LightGBM's convention: ``+1``, the score never decreases when the feature increases
    (``coef_[k] >= 0`` for a linear ranker); ``-1``, it never increases; ``0``, free.""",
    "bounds": """\
bounds : (lower, upper), optional
    Bounds on the weights, each None, a number or one value per feature (``-inf``/``inf``: free).""",
    "penalty": """\
penalty : {"l2", "l1", "elasticnet"}, default "l2"
    The regulariser: ``0.5 ||w||^2``, ``||w||_1`` or ``l1_ratio ||w||_1 + 0.5 (1 - l1_ratio) ||w||^2``.""",
    "l1_ratio": """\
l1_ratio : float in [0, 1], default 0.5
    Share of L1 in the elastic net (used only by ``penalty="elasticnet"``, checked whatever the penalty).""",
    "constraints": """\
constraints : callable, optional
    ``w -> list of cvxpy constraints`` on a cvxpy variable ``w`` of shape ``(n_features,)``,
    e.g. ``lambda w: [w[0] >= w[1]]``; checked (convex, feasible) before any solving.""",
    "solver": """\
solver : {"auto", "newton", "cutting_plane", "cvxpy"}, default "auto"
    ``"auto"``: the Newton solver (:func:`~counterfactual_ltr.solvers.solve_pairwise_hinge`)
    for the unconstrained L2 problem, the cutting-plane method of
    :mod:`counterfactual_ltr.solvers.constrained` with constraints or an L1 / elastic-net penalty;
    ``"cvxpy"``: one slack per pair through cvxpy (small problems only).""",
    # the last two attributes of a fitted estimator
    "fitted": "preprocessor_ : the fitted preprocessor or None\nn_features_in_ : int",
    # the whole of a ranker's ``predict`` docstring after its summary
    "predict": """\
Parameters
----------
X : array (n_docs, n_features), RankingDataset or ClickLog
    The rows to score (a data set's or a log's data-set rows).

Returns
-------
scores : array (n_docs,)
    Through ``preprocessor_`` first when a preprocessor was given.""",
}
# The options of the linear SVMs after ``max_iter`` (the solver's constraints, penalty and method).
DOCS["svm_options"] = "\n".join(DOCS[name] for name in ("preprocessor", "monotone_constraints", "bounds", "penalty",
                                                        "l1_ratio", "constraints", "solver"))

#: decorator filling a docstring's ``{name, ...}`` lines from :data:`DOCS`
doc = fill_doc(DOCS)
