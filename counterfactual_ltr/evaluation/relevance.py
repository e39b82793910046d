"""Relevance models of the doubly robust estimator, cross-fitted by query on the log they correct.

The doubly robust estimate is unbiased whatever its relevance model ``R_hat``
as long as ``R_hat`` does not depend on the clicks it corrects. A model
fitted on the log being evaluated is therefore cross-fitted: the log's
queries are split into folds, and each query's predictions come from a
model fitted on the other folds' sessions only, on the debiased clicks
``(c - beta) / alpha`` of the affine click model. One fit serves every
ranker evaluated on the same log (:class:`RelevanceFit`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_int
from ..logs.clicklog import ClickLog
from ..examination.propensity_models import affine_parts, as_propensity_model

__all__ = ["RelevanceFit", "fit_relevance"]


@dataclass(frozen=True)
class RelevanceFit:
    """Predicted click-relevance ``R_hat`` of every data-set row for the doubly robust estimator.

    A model fitted on the log is cross-fitted by query: ``query_fold[q]`` is the
    fold of query ``q`` (-1: not in the log), and the predictions for its rows
    come from a model fitted on the other folds' sessions only, so they never
    saw the clicks they correct.

    Made by :func:`fit_relevance`; pass it as ``relevance_model=`` to
    :func:`~counterfactual_ltr.evaluation.dr_estimate` to reuse one fit for several rankers on the same log.

    Parameters
    ----------
    predictions : ndarray of shape (n_docs,)
        Predicted click-relevance ``R_hat`` of every data-set row.
    query_fold : ndarray of int, shape (n_queries,)
        Cross-fitting fold of every query, -1 for queries not in the log; all
        -1 when the predictions come from a fitted model, a callable or an array.
    log : ClickLog
        The log the predictions were made for (a fit is refused on another log).
    model : object, default None
        The relevance model given (the unfitted estimator that was cloned per
        fold, a fitted estimator, a callable or the array).

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=20, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], random_state=0)
    >>> fit = fit_relevance(log, (data.y >= 1).astype(float))
    >>> fit.predictions.shape == (data.n_docs,), set(fit.query_fold.tolist())
    (True, {-1})
    """

    predictions: np.ndarray
    query_fold: np.ndarray
    log: ClickLog
    model: object = None


def _check_predictions(pred, n_docs, where) -> np.ndarray:
    pred = np.asarray(pred, dtype=np.float64)
    if pred.ndim == 2 and pred.shape[1] == 1:
        pred = pred[:, 0]
    if pred.shape != (n_docs,):
        raise ValueError(f"{where} gave predictions of shape {pred.shape}, expected ({n_docs},) (one per data-set row)")
    bad = np.flatnonzero(~np.isfinite(pred))
    if bad.size:
        raise ValueError(f"{where} predicted a non-finite relevance ({pred[bad[0]]}) for row {bad[0]}")
    return pred


def _predict_relevance(model, X, where) -> np.ndarray:
    from sklearn.base import is_classifier

    if is_classifier(model) and hasattr(model, "predict_proba"):
        classes = list(getattr(model, "classes_", []))
        if 1 not in classes:
            raise ValueError(f"{where} is a classifier without the class 1 (relevant); classes {classes}")
        proba = np.asarray(model.predict_proba(X))
        if proba.ndim != 2 or proba.shape[1] != len(classes):
            raise ValueError(f"{where}.predict_proba gave shape {proba.shape}, expected ({len(X)}, {len(classes)})")
        return proba[:, classes.index(1)]
    return model.predict(X)


def _debiased_targets(log, model, session_mask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows shown in the selected sessions, their mean ``(c - beta) / alpha`` and number of showings."""
    lengths = np.diff(log.session_offsets)
    alpha_t, beta_t = affine_parts(model, np.arange(1, max(int(lengths.max(initial=0)), 1) + 1))
    items = np.flatnonzero(np.repeat(session_mask, lengths))
    positions = log.positions[items] - 1
    target = (log.clicks[items] - beta_t[positions]) / alpha_t[positions]
    n = log.data.n_docs
    counts = np.bincount(log.docs[items], minlength=n)
    sums = np.bincount(log.docs[items], weights=target, minlength=n)
    rows = np.flatnonzero(counts)
    return rows, sums[rows] / counts[rows], counts[rows].astype(np.float64)


def _fit_one(estimator, X, target, weight):
    from sklearn.base import clone, is_classifier

    est = clone(estimator)
    if is_classifier(est):
        # Soft labels: the debiased relevance t in [0, 1] as weights of a positive and a negative copy.
        t = np.clip(target, 0.0, 1.0)
        Xd = np.vstack([X, X])
        yd = np.r_[np.ones(len(X), dtype=int), np.zeros(len(X), dtype=int)]
        wd = np.r_[weight * t, weight * (1 - t)]
        keep = wd > 0
        if np.unique(yd[keep]).size < 2:
            raise ValueError("the log's debiased relevance is all 0 or all 1: a classifier cannot be fitted; "
                             "give a regressor or a fixed relevance model")
        est.fit(Xd[keep], yd[keep], sample_weight=wd[keep])
    else:
        try:
            est.fit(X, target, sample_weight=weight)
        except TypeError:  # a regressor without sample_weight: each row once
            est.fit(X, target)
    return est


def fit_relevance(log: ClickLog, relevance_model=None, *, propensity=None, n_folds: int = 2,
                  random_state=None) -> RelevanceFit:
    """The doubly robust estimator's relevance predictions for ``log``.

    Parameters
    ----------
    log : ClickLog
        The log whose clicks the relevance model is fitted on (and whose
        queries are split into folds).
    relevance_model : None, scikit-learn estimator, callable, array (n_docs,) or RelevanceFit
        ``None``: a ridge regression on the features. An *unfitted* regressor
        is fitted, per row, on the mean debiased click ``(c - beta) / alpha``
        of its showings (weighted by their number); an unfitted classifier on
        the same values as soft labels. Either is cross-fitted over
        ``n_folds`` random folds of the log's queries. A *fitted* estimator (its
        ``predict_proba[:, class 1]`` for a classifier), a callable ``f(X)``
        or an array of one prediction per data-set row is used as is.
    propensity : propensity or trust-bias model of the debiased targets
        ``None`` (default: ``PositionBasedPropensity(1.0)``), an ``eta`` or a
        propensity model such as
        :class:`~counterfactual_ltr.propensity.TrustBiasPropensity`: the
        targets are ``(c - beta) / alpha`` of its affine parts.
    n_folds : int >= 2, default 2
        Number of folds of the log's queries for cross-fitting an unfitted
        model; the log needs at least this many queries.
    random_state : None, int or numpy Generator, default None
        Seed of the random assignment of queries to folds.

    Returns
    -------
    RelevanceFit
        The predictions for every data-set row and each query's fold (-1 when
        no model was fitted here). A ``RelevanceFit`` given as
        ``relevance_model`` is returned as is (``ValueError`` if it was made
        for another log).

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=30, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> fit = fit_relevance(log, random_state=0)
    >>> fit.predictions.shape == (data.n_docs,), sorted(set(fit.query_fold.tolist()))
    (True, [0, 1])
    """
    if isinstance(relevance_model, RelevanceFit):
        if relevance_model.log is not log:
            raise ValueError("this RelevanceFit was made for another log; fit it on the log being evaluated")
        return relevance_model
    if not isinstance(log, ClickLog):
        raise TypeError(f"the log must be a ClickLog, got {type(log).__name__}")
    log._need_data("fit_relevance")
    data = log.data
    no_folds = np.full(data.n_queries, -1, dtype=np.int64)
    if relevance_model is not None and not hasattr(relevance_model, "fit"):
        if callable(relevance_model):
            pred = _check_predictions(relevance_model(data.X), data.n_docs, "the relevance model")
        else:
            pred = _check_predictions(relevance_model, data.n_docs, "the relevance array")
        return RelevanceFit(pred, no_folds, log, relevance_model)
    from sklearn.exceptions import NotFittedError
    from sklearn.linear_model import Ridge
    from sklearn.utils.validation import check_is_fitted

    estimator = Ridge(alpha=1.0) if relevance_model is None else relevance_model
    try:
        check_is_fitted(estimator)
        fitted = True
    except NotFittedError:
        fitted = False
    if fitted:
        pred = _check_predictions(_predict_relevance(estimator, data.X, "the relevance model"), data.n_docs,
                                  "the relevance model")
        return RelevanceFit(pred, no_folds, log, estimator)
    n_folds = check_int(n_folds, "n_folds", min_value=2)
    queries = np.unique(log.session_query)
    if queries.size < n_folds:
        raise ValueError(f"cross-fitting by query needs at least n_folds={n_folds} queries, the log has {queries.size}")
    model = as_propensity_model(propensity)
    query_fold = no_folds.copy()
    query_fold[queries] = np.random.default_rng(random_state).permutation(queries.size) % n_folds
    session_fold = query_fold[log.session_query]
    predictions = np.zeros(data.n_docs)
    for f in range(n_folds):  # fit on the other folds' sessions, predict this fold's rows
        rows, target, weight = _debiased_targets(log, model, session_fold != f)
        est = _fit_one(estimator, data.X[rows], target, weight)
        mine = data.rows_of(np.flatnonzero(query_fold == f))
        predictions[mine] = _check_predictions(_predict_relevance(est, data.X[mine], "the relevance model"),
                                               len(mine), "the relevance model")
    return RelevanceFit(predictions, query_fold, log, estimator)
