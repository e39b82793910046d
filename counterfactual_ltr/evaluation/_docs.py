"""Parameter and section text the off-policy estimators and their scorers share (see :mod:`counterfactual_ltr._docs`).

A docstring line ``{name, ...}`` in :mod:`.offpolicy` or :mod:`.scorers` is filled from :data:`DOCS` at import.
"""

from __future__ import annotations

from .._docs import fill_doc

__all__ = ["DOCS", "doc"]

DOCS = {
    # the estimators (offpolicy.py)
    "log": "log : ClickLog\n    The logged sessions (shown documents, their positions and clicks).",
    "scores_or_ranker": """\
scores_or_ranker : array of shape (n_docs,) or object with ``predict``
    Scores of every data-set row, or a fitted ranker whose ``predict`` is
    called on the rows of the queries the log touches; each query's rows
    are ranked by decreasing score.""",
    "metric": """\
metric : str or callable, default "dcg"
    Name of :data:`~counterfactual_ltr.metrics.LAMBDA_WEIGHTS` or a rank
    weight ``m(ranks) -> weights``; see :func:`~counterfactual_ltr.metrics.metric_weight`.""",
    "propensity": """\
propensity : None, float or propensity model, default None
    Examination model of the log: a number for the ``eta`` of
    ``PositionBasedPropensity``, or a model (e.g.
    :class:`~counterfactual_ltr.propensity.TrustBiasPropensity`, corrected
    affinely by ``(c - beta) / alpha``). ``None``: the ranker's own
    ``propensity`` when it is an estimator that carries one (what it was
    trained under), else ``PositionBasedPropensity(1.0)``; see
    :func:`~counterfactual_ltr.examination.propensity_models.resolve_propensity`.""",
    "confidence": "confidence : float in (0, 1), default 0.95\n    Level of the normal and bootstrap intervals.",
    "n_bootstrap": """\
n_bootstrap : int >= 0, default 200
    Number of bootstrap resamples of the sessions (0: no bootstrap
    interval, ``boot_low`` and ``boot_high`` are ``None``).""",
    "random_state": "random_state : None, int or numpy Generator, default None\n    Seed of the bootstrap.",
    "metric_params": '**metric_params\n    Parameters of the metric: ``k`` for ``"prec@k"``, ``p`` for ``"rbp"``.',
    "warns": """\
Warns
-----
EstimateWarning
    When a diagnostic says not to trust the number (see
    :class:`EstimateWarning`); its message is also in ``Estimate.warnings``.""",
    # the scorers (scorers.py)
    "scorer_metric": """\
metric : str or callable, default "dcg"
    Metric to estimate; see :func:`~counterfactual_ltr.metrics.metric_weight`.""",
    "scorer_propensity": """\
propensity : None, float or propensity model, default None
    Examination model of the scored logs, as the estimators take it (a
    number: its ``eta``; ``None``: the scored estimator's own
    ``propensity``, else ``PositionBasedPropensity(1.0)``).""",
    "propensity_quantile": """\
propensity_quantile : float in (0, 0.5] or None, default 0.1
    With a propensity estimated with bootstrap replicates (``bootstrap_``): the score is this
    quantile, over the point estimate and up to ``SCORER_REPLICATES`` replicates, of the
    estimate's improvement over the logged rankings under the same replicate (paired), so that a
    ranker whose gain rests on weights the log does not pin down scores low; a failed replicate
    counts as the worst. ``None``, or a propensity without replicates: the plain estimate under
    the point propensity.""",
    "raises": """\
Raises
------
ValueError
    If the log has no sessions or no clicks, or the scores do not have one
    finite value per data-set row.""",
}
# The whole Parameters section of the estimators that take nothing else (IPS, SNIPS).
DOCS["parameters"] = "Parameters\n----------\n" + "\n".join(
    DOCS[name] for name in ("log", "scores_or_ranker", "metric", "propensity", "confidence", "n_bootstrap",
                            "random_state", "metric_params"))
# What each scorer returns: "ips_scorer_returns", ... (the estimate's name is all that differs).
for _kind, _name in (("ips", "IPS"), ("snips", "SNIPS"), ("clipped_ips", "clipped IPS"), ("dr", "doubly robust"),
                     ("policy_aware", "policy-aware")):
    DOCS[f"{_kind}_scorer_returns"] = f"""\
Returns
-------
callable
    ``scorer(estimator, log, y=None) -> float``: the {_name} estimate of
    ``estimator`` (a fitted ranker with ``predict``) on the
    :class:`~counterfactual_ltr.logs.clicklog.ClickLog` ``log``, at
    ``confidence=0.95`` without bootstrap; negated for average rank.
    A ``log`` that is not a ``ClickLog`` is a ``ValueError``."""

#: decorator filling a docstring's ``{name, ...}`` lines from :data:`DOCS`
doc = fill_doc(DOCS)
