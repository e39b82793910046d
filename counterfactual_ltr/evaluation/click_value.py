"""The value of clicks: what the logged rankings earned on-policy, and a candidate's estimate of the same.

Session ``i`` shows ``L_i`` documents ``d_1 .. d_L`` and records clicks
``c_k``. The logging policy's metric of clicks, observed without any
weighting, is ``Y_i = sum_k m(k) c_k``. Under the affine click model
``P(click | d at k) = alpha_k R(d) + beta_k`` its expectation is::

    E[Y_i] = sum_k m(k) (alpha_k R(d_k) + beta_k)

the expected metric *of clicks*, in which every position's weight carries its
examination ``alpha_k``: not the metric over click-relevance
``sum_k m(k) R(d_k)`` that the estimators of
:mod:`~counterfactual_ltr.evaluation.offpolicy` target (that one needs the
propensity weighting). So a candidate ``S`` compared with the logged rankings
themselves is compared on the same quantity, the value of clicks if ``S``
showed its top ``L_i`` in session ``i`` (what an online A/B test of ``S``
would measure)::

    V_i(S) = sum_{d: r_S(d) <= L_i} m(r_S(d)) (alpha_{r_S(d)} R(d) + beta_{r_S(d)})

estimated from the log with the rank weight ``g(r) = m(r) alpha_r``::

    X_i = sum_{r <= L_i} m(r) beta_r + sum_{shown d, r_S(d) <= L_i} g(r_S(d)) (c(d) - beta_k) / alpha_k

``(c - beta_k) / alpha_k`` has mean ``R(d)``, so ``X_i`` is unbiased when the
log shows every document ``S`` puts in its top ``L_i`` (always with full
lists). For ``S`` equal to the logger, ``g(k) (c - beta_k) / alpha_k =
m(k) (c - beta_k)``: ``X_i = Y_i`` session by session, and the paired
difference is exactly 0. SNIPS divides the summed ``X`` by the summed
``W_i = sum_{shown d} (c - beta_k) / alpha_k`` (the logger's ``Y`` too: both
are then per relevant document), clipped IPS floors ``alpha_k`` at ``clip``,
policy-aware IPS and DR divide by the expected slope ``rho(d)`` and DR adds
``sum_{d: r_S(d) <= L_i} g(r_S(d)) R_hat(d)`` minus its correction, as in
the module docstring of :mod:`~counterfactual_ltr.evaluation.offpolicy`.
"""

from __future__ import annotations

import numpy as np

from .._segments import rank_within_queries, segment_ids
from ..logs.clicklog import ClickLog
from ..metrics import metric_weight
from ..examination.propensity_models import (affine_parts, as_propensity_model, checked_item_propensities,
                                             is_session_dependent, warn_if_extrapolated)
from .offpolicy import _scores_for_log

__all__ = ["on_policy_value", "true_click_values"]


def _weights_by_rank(metric, metric_params, model, n_ranks):
    """``m(r)``, ``alpha_r``, ``beta_r`` for ranks 1..n_ranks."""
    ranks = np.arange(1, max(n_ranks, 1) + 1)
    m = np.asarray(metric_weight(metric, **metric_params)(ranks), dtype=np.float64)
    if m.shape != ranks.shape or not np.all(np.isfinite(m)):
        raise ValueError(f"the metric's rank weights must be finite, one per rank; got shape {m.shape}")
    alpha, beta = affine_parts(model, ranks)
    return m, alpha, beta


def logged_terms(log: ClickLog, metric, metric_params) -> np.ndarray:
    """``Y_i = sum_k m(k) c_k`` per session: the logged rankings' metric of clicks, unweighted."""
    m = np.asarray(metric_weight(metric, **metric_params)(np.arange(1, max(int(log.positions.max(initial=0)), 1) + 1)),
                   dtype=np.float64)
    items = np.flatnonzero(log.clicks)
    session = np.searchsorted(log.session_offsets, items, side="right") - 1
    positions = log.positions[items] - 1   # as recorded (gaps allowed)
    return np.bincount(session, weights=m[positions], minlength=log.n_sessions)


def logged_relevance_terms(log: ClickLog, metric, metric_params, model):
    """``X_i = sum_k m(k) (c_k - beta_k) / alpha_k``: the logged rankings' metric over relevance, by IPS.

    Each session is weighted by its own ``alpha_k`` (not a policy's expected
    slope): unbiased for the logging policy's expected value whatever it is.
    Returns ``X`` and the click weights ``1 / alpha_k``.
    """
    if is_session_dependent(model):      # one propensity per shown result: each click by its own 1 / q
        m = np.asarray(metric_weight(metric, **metric_params)(np.arange(1, max(int(log.positions.max(initial=0)), 1)
                                                                         + 1)), dtype=np.float64)
        items = np.flatnonzero(log.clicks)
        session = np.searchsorted(log.session_offsets, items, side="right") - 1
        w = 1.0 / checked_item_propensities(model, log)[items]
        return np.bincount(session, weights=m[log.positions[items] - 1] * w, minlength=log.n_sessions), w
    m_t, alpha_t, beta_t = _weights_by_rank(metric, metric_params, model, int(log.positions.max(initial=0)))
    affine = bool(np.any(beta_t != 0))
    items = np.arange(log.n_items) if affine else np.flatnonzero(log.clicks)
    session = np.searchsorted(log.session_offsets, items, side="right") - 1
    pos = log.positions[items] - 1
    X = np.bincount(session, weights=m_t[pos] * (log.clicks[items] - beta_t[pos]) / alpha_t[pos],
                    minlength=log.n_sessions)
    return X, 1.0 / alpha_t[pos[log.clicks[items]]]


def ranking_free(metric, metric_params, model, log: ClickLog) -> bool:
    """Whether the metric of clicks is the same for every ranking: ``m(r) alpha_r`` constant over the shown ranks.

    So for the average rank under ``eta = 1`` (``r * 1/r = 1``): the expected
    sum of the ranks of the clicks is then the number of relevant documents
    shown, whatever their order.
    """
    L = int(log.positions.max(initial=0))
    m, alpha, _ = _weights_by_rank(metric, metric_params, model, L)
    g = m * alpha
    return bool(L > 1 and np.ptp(g) <= 1e-12 * np.max(np.abs(g)))


def click_terms(setup, log: ClickLog, scores: np.ndarray, metric, metric_params):
    """Per-session ``X_i`` (the candidate's click value), ``W_i``, click weights, clipping bias bound, ``g`` per row.

    ``setup`` is the estimator's per-log part (``offpolicy._Setup``): its
    propensity model, expected slopes ``rho``, DR predictions ``rhat`` and ``clip``.
    """
    data, n = log.data, log.n_sessions
    offsets = log.session_offsets
    lengths = np.diff(offsets)
    L = max(int(log.positions.max(initial=0)), 1)   # recorded positions may have gaps: L >= every length
    warn_if_extrapolated(setup.model, int(log.positions[log.clicks].max(initial=0)))
    m_t, alpha_t, beta_t = _weights_by_rank(metric, metric_params, setup.model, L)
    g_t = m_t * alpha_t
    ranks = rank_within_queries(scores, data.query_offsets)
    g_rows = np.where(ranks <= L, g_t[np.minimum(ranks, L) - 1], 0.0)
    affine = bool(np.any(beta_t != 0))
    # Only clicked items carry weight unless beta != 0 (every shown item) or DR corrects every shown item.
    items = np.arange(log.n_items) if affine or setup.rhat is not None else np.flatnonzero(log.clicks)
    session = np.searchsorted(offsets, items, side="right") - 1
    pos = log.positions[items] - 1                       # 0-based position (as recorded)
    docs = log.docs[items]
    r = ranks[docs]
    g = np.where(r <= lengths[session], g_rows[docs], 0.0)   # the candidate shows only its top L_i
    if setup.rho is not None:
        denom = setup.rho[docs]
    elif setup.clip is not None:
        denom = np.maximum(alpha_t[pos], setup.clip)
    else:
        denom = alpha_t[pos]
    gain = log.clicks[items] - beta_t[pos]
    X = np.bincount(session, weights=g * gain / denom, minlength=n)
    W = np.bincount(session, weights=gain / denom, minlength=n)
    if affine:
        X += np.cumsum(m_t * beta_t)[lengths - 1]
    if setup.rhat is not None:
        X += _top_model_term(log, ranks, g_rows * setup.rhat, lengths)
        X -= np.bincount(session, weights=g * alpha_t[pos] * setup.rhat[docs] / denom, minlength=n)
    bias_bound = 0.0
    if setup.clip is not None and setup.rho is None:
        # As for clipped IPS: |bias| <= (1/N) sum over shown items of |g| (1 - alpha_k / clip)^+.
        every_session = segment_ids(offsets)
        every_pos = log.positions - 1
        every_g = np.where(ranks[log.docs] <= lengths[every_session], g_rows[log.docs], 0.0)
        shortfall = np.clip(1.0 - alpha_t[every_pos] / setup.clip, 0.0, None)
        bias_bound = float(np.dot(np.abs(every_g), shortfall)) / n
    return X, W, 1.0 / denom[log.clicks[items]], bias_bound, g_rows


def _top_model_term(log, ranks, values, lengths) -> np.ndarray:
    """``sum_{d in q_i: rank(d) <= L_i} values(d)`` per session, from cumulative sums in rank order."""
    data = log.data
    starts = data.query_offsets[:-1]
    in_rank_order = np.zeros(data.n_docs)
    in_rank_order[starts[data.query_index] + ranks - 1] = values
    cumulative = np.r_[0.0, np.cumsum(in_rank_order)]
    q = log.session_query
    last = starts[q] + np.minimum(lengths, data.query_lengths[q])
    return cumulative[last] - cumulative[starts[q]]


def on_policy_value(log: ClickLog, *, metric="dcg", **metric_params) -> float:
    """The logged rankings' mean metric of clicks ``(1/N) sum_i sum_k m(k) c_k``: observed, not estimated.

    Each click counts with the metric's rank weight at the position where it
    was shown, without propensity weighting: its expectation is the value of
    clicks ``sum_k m(k) (alpha_k R(d_k) + beta_k)`` (module docstring), the
    quantity ``compare_rankers(..., baseline="logging")`` compares candidates on.

    Parameters
    ----------
    log : ClickLog
        The logged sessions.
    metric : str or callable, default "dcg"
        Metric; see :func:`~counterfactual_ltr.metrics.metric_weight`.
    **metric_params
        Parameters of the metric: ``k`` for ``"prec@k"``, ``p`` for ``"rbp"``.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import RankingDataset, ClickLog
    >>> data = RankingDataset(np.eye(3), [1, 0, 1], [5, 5, 5])
    >>> log = ClickLog(data, [0, 0], [0, 3, 6], [2, 0, 1, 0, 2, 1], [0, 1, 0, 1, 0, 0])
    >>> round(on_policy_value(log, metric="dcg"), 4)    # clicks at positions 2 and 1: (1/log2(3) + 1) / 2
    0.8155
    """
    if not isinstance(log, ClickLog):
        raise TypeError(f"the log must be a ClickLog, got {type(log).__name__}")
    if log.n_sessions == 0:
        raise ValueError("the click log has no sessions")
    return float(logged_terms(log, metric, metric_params).mean())


def true_click_values(log: ClickLog, scores_or_ranker, relevance, *, metric="dcg", propensity=None,
                      **metric_params) -> dict:
    """The value of clicks over ``log``'s sessions, computed from the known click-relevance of every row.

    ``ips``: ``(1/N) sum_i V_i`` with ``V_i`` the expected metric of clicks of
    session ``i`` (module docstring) when ``scores_or_ranker`` shows its top
    ``L_i``, or, for ``"logging"``, the session's logged ranking; ``snips``:
    ``sum_i V_i / sum_i sum_{shown d} R(d)``. What the click-value estimates of
    :func:`~counterfactual_ltr.evaluation.compare_rankers` target.

    Parameters
    ----------
    log : ClickLog
        The sessions whose queries and lengths are averaged over.
    scores_or_ranker : array of shape (n_docs,), object with ``predict``, or "logging"
        The ranker, or ``"logging"`` for the rankings the log shows.
    relevance : array of shape (n_docs,)
        Known click-relevance ``R`` of every data-set row.
    metric : str or callable, default "dcg"
        Metric; see :func:`~counterfactual_ltr.metrics.metric_weight`.
    propensity : None, float or propensity model, default None
        The click model's examination (affine parts ``alpha``, ``beta``).
    **metric_params
        Parameters of the metric: ``k`` for ``"prec@k"``, ``p`` for ``"rbp"``.

    Returns
    -------
    dict
        ``{"ips": float, "snips": float}``.

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=20, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=2, random_state=0)
    >>> rel = (data.y >= 1).astype(float)
    >>> logged = true_click_values(log, "logging", rel)
    >>> same = true_click_values(log, data.X[:, 0], rel)
    >>> abs(logged["ips"] - same["ips"]) < 1e-12     # the logger shows its own full ranking
    True
    """
    if not isinstance(log, ClickLog):
        raise TypeError(f"the log must be a ClickLog, got {type(log).__name__}")
    log._need_data("true_click_values")
    data = log.data
    R = np.asarray(relevance, dtype=np.float64)
    if R.shape != (data.n_docs,) or not np.all(np.isfinite(R)):
        raise ValueError(f"relevance must hold one finite value per data-set row ({data.n_docs}), got shape {R.shape}")
    model = as_propensity_model(propensity)
    offsets = log.session_offsets
    lengths = np.diff(offsets)
    L = max(int(lengths.max(initial=0)), 1)
    m_t, alpha_t, beta_t = _weights_by_rank(metric, metric_params, model, L)
    session = segment_ids(offsets)
    shown_rel = np.bincount(session, weights=R[log.docs], minlength=log.n_sessions)
    base = np.cumsum(m_t * beta_t)[lengths - 1]
    if isinstance(scores_or_ranker, str):
        if scores_or_ranker != "logging":
            raise ValueError(f"scores_or_ranker must be scores, a ranker or 'logging', got {scores_or_ranker!r}")
        pos = np.arange(log.n_items) - offsets[session]
        V = base + np.bincount(session, weights=m_t[pos] * alpha_t[pos] * R[log.docs], minlength=log.n_sessions)
    else:
        scores = _scores_for_log(log, scores_or_ranker)
        ranks = rank_within_queries(scores, data.query_offsets)
        g_rows = np.where(ranks <= L, (m_t * alpha_t)[np.minimum(ranks, L) - 1], 0.0)
        V = base + _top_model_term(log, ranks, g_rows * R, lengths)
    return {"ips": float(V.mean()), "snips": float(V.sum() / max(shown_rel.sum(), 1e-300))}
