"""Off-policy evaluation of rankers from click logs: IPS, SNIPS, clipped IPS, doubly robust, policy-aware.

For a scoring function ``S`` and a log of ``N`` sessions, the target is the
full-information value of an additive metric, averaged over the logged
sessions' queries::

    Delta(S) = (1/N) sum_i sum_{d in q_i} omega(d) R(d),      omega(d) = m(rank_S(d))

with ``R(d)`` the click-relevance of ``d`` (``P(click | examined)``) and ``m``
the metric's rank weight in its natural orientation: ``1 / log2(1 + r)`` for
DCG, ``r`` for average rank (lower is better), ``1[r <= k] / k`` for Prec@k,
``(1 - p) p^(r - 1)`` for RBP; i.e. minus the risk weights ``lambda`` of
Table 1 (``r`` itself for AvgRank).

Clicks follow an affine model per position ``k`` (Vardasbi et al., CIKM 2020):
``P(click | d at k) = alpha_k R(d) + beta_k``; a plain propensity model is
``alpha = q``, ``beta = 0`` (:func:`~counterfactual_ltr.propensity.affine_parts`),
so one code path serves position bias and trust bias. Every estimator here is
the mean over sessions of a per-session value ``X_i``:

* **IPS** (Agarwal et al. 2019, Eq. 5; affine: Vardasbi et al.):
  ``X_i = sum_{shown d} omega(d) (c(d) - beta_k) / alpha_k``, ``k`` the
  position of ``d`` in session ``i``. Unbiased when every document with
  ``omega != 0`` is shown (a top-k cutoff breaks this).
* **SNIPS** (Swaminathan & Joachims 2015): ``sum_i X_i / sum_i W_i`` with
  ``W_i = sum_{shown d} (c(d) - beta_k) / alpha_k``: the metric *per relevant
  document* (a ratio estimator: consistent, not unbiased, smaller variance).
* **Clipped IPS**: ``alpha_k`` replaced by ``max(alpha_k, tau)``. Since
  ``E[(c - beta) / max(alpha, tau)] = R alpha / max(alpha, tau)`` and
  ``0 <= R <= 1``, the bias is at most, in absolute value,
  ``(1/N) sum_i sum_{shown d, alpha_k < tau} |omega(d)| (1 - alpha_k / tau)``:
  ``Estimate.bias_bound``, computable from the log alone.
* **Policy-aware** (Oosterhuis & de Rijke, CIKM 2020): divides by the
  *expected* slope under the logging policy,
  ``rho(d) = sum_k P_logger(d at k) alpha_k``:
  ``X_i = sum_{shown d} omega(d) (c(d) - beta_k) / rho(d)``. Since
  ``E[c(d) - beta_k(d)] = rho(d) R(d)`` over the logger's rankings (a document
  not shown has ``c = alpha = beta = 0``), it is unbiased for every document
  the logger may show, also those a stochastic logger shows only sometimes
  above a cutoff.
* **Doubly robust** (Oosterhuis, TOIS 2023): with a relevance model ``R_hat``,
  ``X_i = sum_{d in q_i} omega(d) R_hat(d)
  + sum_{shown d} omega(d) (c(d) - beta_k - alpha_k R_hat(d)) / rho(d)``,
  ``rho`` the expected slope when the log carries its logging policy, else the
  session's ``alpha_k``. The correction has mean ``omega (R - R_hat)``, so the
  estimate is unbiased whatever ``R_hat`` (when ``R_hat`` does not depend on
  the clicks it corrects: a model fitted on the log is cross-fitted over
  folds of queries, each query's ``R_hat`` coming from a model fitted on the
  other folds), with less variance when ``R_hat`` is close to ``R``.

Every :class:`Estimate` carries diagnostics: the effective sample size and the
largest share of the click weights, the share of the evaluated ranker's metric
mass on documents the log never showed, normal intervals (CLT over sessions;
delta method for SNIPS) and percentile-bootstrap intervals over sessions; an
:class:`EstimateWarning` is issued when a diagnostic says not to trust the number.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._segments import predicted_scores, rank_within_queries
from .._validation import check_int, check_real
from ..ids import format_id
from ..logs.clicklog import ClickLog
from ..metrics import metric_weight
from ..examination.propensity_models import (affine_parts, as_propensity_model, checked_item_propensities,
                                             is_session_dependent, resolve_propensity, warn_if_extrapolated)
from ._docs import doc
from .relevance import fit_relevance

__all__ = ["Estimate", "EstimateWarning", "ips_estimate", "snips_estimate", "clipped_ips_estimate",
           "dr_estimate", "policy_aware_estimate", "ESTIMATORS", "session_contributions", "true_values"]

#: warn below this effective sample size of the click weights
MIN_ESS = 100.0
#: warn when one click carries more than this share of the summed click weights
MAX_WEIGHT_SHARE = 0.05
#: warn when more than this share of the ranker's metric mass is on documents the log never showed
MAX_UNSHOWN_MASS = 0.05
#: warn when the Monte Carlo expected examination of a clicked document has a larger relative error
MAX_POLICY_ERROR = 0.02
#: the bootstrap resamples at most this many blocks of sessions (sessions themselves in smaller logs)
BOOTSTRAP_BLOCKS = 2000


class EstimateWarning(UserWarning):
    """A diagnostic of an off-policy estimate says the number is not to be trusted.

    Issued (and its message also kept in :attr:`Estimate.warnings`) when the
    effective sample size of the click weights is below :data:`MIN_ESS`, one
    click carries more than :data:`MAX_WEIGHT_SHARE` of the summed weights,
    more than :data:`MAX_UNSHOWN_MASS` of the ranker's metric mass is on
    documents the log never showed, the logging policy's Monte Carlo expected
    examination is too imprecise (:data:`MAX_POLICY_ERROR`), or bootstrap
    resamples had no clicks. Filter it with the :mod:`warnings` module.

    Examples
    --------
    >>> import warnings
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=5, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], random_state=0)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     est = ips_estimate(log, data.X[:, 0], n_bootstrap=0)
    >>> any(issubclass(w.category, EstimateWarning) for w in caught)
    True
    >>> est.warnings[0].startswith("effective sample size")
    True
    """


@dataclass(frozen=True)
class Estimate:
    """An off-policy estimate with its uncertainty and diagnostics.

    ``ess`` is the effective sample size of the click weights ``w = 1/alpha``
    (``1/rho`` policy-aware), ``(sum w)^2 / sum w^2``; ``max_weight`` the
    largest ``w`` and ``max_weight_share`` its share of ``sum w``.
    ``unshown_mass``: share of the ranker's metric mass ``sum |omega|`` (over
    the logged sessions' queries) on documents the log never showed.
    ``ci_low``/``ci_high``: normal interval; ``boot_low``/``boot_high``:
    percentile bootstrap over sessions (``None`` when not computed).
    ``bias_bound``: bound on the absolute bias the estimator adds by design
    (clipping); 0 for the others. ``warnings``: the diagnostics' messages.

    Made by the estimators (:func:`ips_estimate` and the others), not by hand;
    ``float(estimate)`` is its ``value``.

    Parameters
    ----------
    value : float
        The estimate of the metric (the mean of the per-session values; their
        ratio for SNIPS).
    stderr : float
        Its standard error over sessions (delta method for SNIPS; ``inf`` for a
        single session).
    ci_low, ci_high : float
        Normal confidence interval ``value -+ z stderr`` at level ``confidence``.
    confidence : float
        Level of both intervals, in (0, 1).
    n_sessions : int
        Number of sessions of the log.
    n_clicks : int
        Number of clicks of the log (one click weight each).
    ess : float
        Effective sample size ``(sum w)^2 / sum w^2`` of the click weights.
    max_weight : float
        Largest click weight ``w``.
    estimator : str
        Name of the estimator: ``"ips"``, ``"snips"``, ``"clipped_ips"``,
        ``"dr"`` or ``"policy_aware"``.
    metric : str
        Name of the metric (``"custom"`` or the function's name for a callable).
    max_weight_share : float, default 0.0
        ``max_weight / sum w``.
    unshown_mass : float, default 0.0
        Share of the ranker's metric mass on documents the log never showed.
    boot_low, boot_high : float or None, default None
        Percentile-bootstrap interval over sessions; ``None`` without bootstrap.
    bias_bound : float, default 0.0
        Bound on the absolute bias added by design (clipped IPS), else 0.
    warnings : tuple of str, default ()
        Messages of the diagnostics that also issued an :class:`EstimateWarning`.

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=50, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0)
    >>> est = snips_estimate(log, data.X[:, 0], n_bootstrap=0)
    >>> est.estimator, est.metric, est.n_sessions, est.boot_low is None
    ('snips', 'dcg', 1000, True)
    >>> float(est) == est.value and est.ci_low < est.value < est.ci_high
    True
    """

    value: float
    stderr: float
    ci_low: float
    ci_high: float
    confidence: float
    n_sessions: int
    n_clicks: int
    ess: float
    max_weight: float
    estimator: str
    metric: str
    max_weight_share: float = 0.0
    unshown_mass: float = 0.0
    boot_low: float | None = None
    boot_high: float | None = None
    bias_bound: float = 0.0
    warnings: tuple = ()

    def __float__(self) -> float:
        return float(self.value)


def _metric_name(metric) -> str:
    return metric if isinstance(metric, str) else getattr(metric, "__name__", "custom")


def _scores_for_log(log: ClickLog, scores_or_ranker) -> np.ndarray:
    data = log.data
    if hasattr(scores_or_ranker, "predict"):
        # Score only the queries the log touches: sub-logs of cross-validation stay cheap.
        queries = np.unique(log.session_query)
        rows = data.rows_of(queries)
        scores = np.zeros(data.n_docs)
        scores[rows] = predicted_scores(scores_or_ranker, data.X[rows], rows.size)
    else:
        scores = np.asarray(scores_or_ranker)
        if scores.dtype.kind not in "biuf":
            raise TypeError(f"scores must be real numbers (or a ranker with predict), got dtype {scores.dtype}")
        scores = scores.astype(np.float64)
        if scores.shape != (data.n_docs,):
            raise ValueError(f"scores have shape {scores.shape}, expected ({data.n_docs},) (one per data-set row)")
    if not np.all(np.isfinite(scores)):
        row = np.flatnonzero(~np.isfinite(scores))[0]
        raise ValueError(f"scores hold a non-finite value ({scores[row]}) at data-set row {row} (query "
                         f"{format_id(data.query_keys[data.query_index[row]])}, document {format_id(data.doc_keys[row])})")
    return scores


def _omega(log, scores_or_ranker, metric, metric_params) -> np.ndarray:
    """The evaluated ranker's metric weight ``m(rank_S(d))`` of every data-set row."""
    scores = _scores_for_log(log, scores_or_ranker)
    ranks = rank_within_queries(scores, log.data.query_offsets)
    omega = np.asarray(metric_weight(metric, **metric_params)(ranks), dtype=np.float64)
    if omega.shape != ranks.shape or not np.all(np.isfinite(omega)):
        raise ValueError(f"the metric's rank weights must be finite, one per rank; got shape {omega.shape}")
    return omega


# ----------------------------------------------------------------------------- logging policy


def _expected_alpha(log, model, logging_policy) -> tuple[np.ndarray, float]:
    """``rho(d) = sum_k P(d at k) alpha_k`` per row, and the largest relative Monte Carlo error."""
    policy = log.logging_policy if logging_policy is None else logging_policy
    if policy is None:
        raise ValueError("the log carries no logging policy (log.logging_policy is None): the policy-aware "
                         "estimator needs P(document at position) of the logger; give logging_policy=... "
                         "(e.g. PlackettLucePolicy or PositionProbabilities)")
    if not callable(getattr(policy, "position_probabilities", None)):
        raise ValueError(f"logging_policy must have a position_probabilities(data) method, got {type(policy).__name__}")
    probs = policy.position_probabilities(log.data)
    K = probs.probabilities.shape[1]
    alpha = affine_parts(model, np.arange(1, K + 1))[0]
    rho = probs.expected(alpha)
    err = probs.expected_stderr(alpha)
    clicked_rows = log.docs[log.clicks]
    rel = err[clicked_rows] / np.maximum(rho[clicked_rows], 1e-300)
    return rho, float(rel.max()) if rel.size else 0.0


# ----------------------------------------------------------------------------- the shared computation


def _session_terms(log, omega, model, *, rho=None, rhat=None, clip=None):
    """Per-session ``X_i``, ``W_i``, the click weights and the clipping bias bound (see module docstring).

    ``rho`` (expected slope per data-set row) replaces the session's ``alpha`` as
    denominator when given; ``rhat`` (relevance per row) adds the doubly robust
    model terms. Only clicked items enter the IPS part unless ``beta != 0``.
    """
    n = log.n_sessions
    offsets = log.session_offsets
    lengths = np.diff(offsets)
    if is_session_dependent(model):
        return _item_terms(log, omega, checked_item_propensities(model, log), clip)
    warn_if_extrapolated(model, int(log.positions[log.clicks].max(initial=0)))
    # alpha and beta by position, looked up per item (cheaper than evaluating the model per item)
    alpha_t, beta_t = affine_parts(model, np.arange(1, max(int(lengths.max(initial=0)), 1) + 1))
    affine = bool(np.any(beta_t != 0))
    bias_bound = 0.0
    denom_t = alpha_t
    if clip is not None:
        shortfall = np.clip(1.0 - alpha_t / clip, 0.0, None)
        if shortfall.any():
            bias_bound = float(np.dot(np.abs(omega)[log.docs], shortfall[log.positions - 1])) / n
        denom_t = np.maximum(alpha_t, clip)
    if affine:
        session = np.repeat(np.arange(n, dtype=np.int32 if n < 2**31 else np.int64), lengths)
        positions = log.positions
        docs, click = log.docs, log.clicks
    else:
        items = np.flatnonzero(log.clicks)
        session = np.searchsorted(offsets, items, side="right") - 1
        positions = items - offsets[session] + 1
        docs, click = log.docs[items], np.ones(items.size, dtype=bool)
    denom = rho[docs] if rho is not None else denom_t[positions - 1]
    gain = click - beta_t[positions - 1] if affine else click.astype(np.float64)
    w_sn = gain / denom
    X = np.bincount(session, weights=omega[docs] * w_sn, minlength=n)
    W = np.bincount(session, weights=w_sn, minlength=n)
    if rhat is not None:
        # + sum_{d in q} omega R_hat - sum_{shown d} omega alpha_k R_hat / rho(d); with the session's own
        # alpha as denominator the last term is sum_{shown d} omega R_hat (alpha_k / alpha_k = 1).
        v = omega * rhat
        X += np.bincount(log.data.query_index, v, minlength=log.data.n_queries)[log.session_query]
        every = np.repeat(np.arange(n, dtype=np.int32 if n < 2**31 else np.int64), lengths)
        if rho is None:
            X -= np.bincount(every, weights=v[log.docs], minlength=n)
        else:
            scaled = np.divide(v, rho, out=np.zeros_like(v), where=rho > 0)
            X -= np.bincount(every, weights=scaled[log.docs] * alpha_t[log.positions - 1], minlength=n)
    return X, W, 1.0 / denom[click], bias_bound


def _item_terms(log, omega, q, clip):
    """:func:`_session_terms` with one propensity per shown result (a cascade-aware model: ``q`` per item).

    Each click is weighted by its own ``1 / q`` (Vardasbi et al. 2020): unbiased for the metric's
    weighted attractiveness of the shown results when ``q`` is the examination given the clicks
    above. Clipping at ``clip`` bounds the bias by ``sum |omega| max(0, 1 - q / clip)`` over the
    shown results, per session.
    """
    n = log.n_sessions
    bias_bound = 0.0
    if clip is not None:
        shortfall = np.clip(1.0 - q / clip, 0.0, None)
        bias_bound = float(np.dot(np.abs(omega)[log.docs], shortfall)) / n
        q = np.maximum(q, clip)
    items = np.flatnonzero(log.clicks)
    session = np.searchsorted(log.session_offsets, items, side="right") - 1
    w = 1.0 / q[items]
    X = np.bincount(session, weights=omega[log.docs[items]] * w, minlength=n)
    W = np.bincount(session, weights=w, minlength=n)
    return X, W, w, bias_bound


def session_contributions(log: ClickLog, scores_or_ranker, *, metric="dcg", propensity=None, **metric_params):
    """Per-session IPS ``X_i`` (weighted metric) and ``W_i`` (summed ``(c - beta) / alpha``), and the click weights.

    The building blocks of :func:`ips_estimate` (``X.mean()``) and
    :func:`snips_estimate` (``X.sum() / W.sum()``); see the module docstring.

    Parameters
    ----------
    log : ClickLog
        The logged sessions.
    scores_or_ranker : array of shape (n_docs,) or object with ``predict``
        Scores of every data-set row or a fitted ranker, as the estimators
        take them.
    metric : str or callable, default "dcg"
        Metric; see :func:`~counterfactual_ltr.metrics.metric_weight`.
    propensity : None, float or propensity model, default None
        Examination model of the log (a number: its ``eta``); ``None``: the
        ranker's own when it carries one, else ``PositionBasedPropensity(1.0)``.
    **metric_params
        Parameters of the metric: ``k`` for ``"prec@k"``, ``p`` for ``"rbp"``.

    Returns
    -------
    X : ndarray of shape (n_sessions,)
        ``sum_{shown d} omega(d) (c(d) - beta_k) / alpha_k`` per session.
    W : ndarray of shape (n_sessions,)
        ``sum_{shown d} (c(d) - beta_k) / alpha_k`` per session.
    w : ndarray of shape (n_clicks,)
        The click weights ``1 / alpha_k`` of the log's clicks, in log order.

    Examples
    --------
    >>> import numpy as np
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=50, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0)
    >>> X, W, w = session_contributions(log, data.X[:, 0])
    >>> X.shape == W.shape == (log.n_sessions,), w.shape == (log.n_clicks,)
    (True, True)
    >>> bool(np.isclose(X.mean(), ips_estimate(log, data.X[:, 0], n_bootstrap=0).value))
    True
    """
    _need_features(log, "session_contributions")
    omega = _omega(log, scores_or_ranker, metric, metric_params)
    X, W, w, _ = _session_terms(log, omega, resolve_propensity(propensity, scores_or_ranker)[0])
    return X, W, w


def _unshown_mass(log, omega, shown) -> float:
    data = log.data
    mass = np.abs(omega)
    per_query = np.bincount(data.query_index, mass, minlength=data.n_queries)
    unshown = np.bincount(data.query_index, mass * ~shown, minlength=data.n_queries)
    sessions = np.bincount(log.session_query, minlength=data.n_queries)
    total = float(sessions @ per_query)
    return float(sessions @ unshown) / total if total > 0 else 0.0


def _bootstrap(X, D, confidence, n_bootstrap, rng):
    """Percentile interval of ``sum X / sum D`` over sessions resampled with replacement.

    Sessions are i.i.d., so sums over random blocks of sessions are too: a log
    of more than ``BOOTSTRAP_BLOCKS`` sessions is resampled by blocks, which
    keeps the cost independent of its size.
    """
    n = len(X)
    if n > BOOTSTRAP_BLOCKS:
        block = rng.permutation(n) % BOOTSTRAP_BLOCKS
        X = np.bincount(block, weights=X, minlength=BOOTSTRAP_BLOCKS)
        D = np.bincount(block, weights=D, minlength=BOOTSTRAP_BLOCKS)
    G = len(X)
    idx = rng.integers(0, G, size=(n_bootstrap, G))
    num, den = X[idx].sum(axis=1), D[idx].sum(axis=1)
    ok = den != 0
    if not ok.any():
        return None, None, 0
    values = num[ok] / den[ok]
    low, high = np.quantile(values, [0.5 - confidence / 2, 0.5 + confidence / 2])
    return float(low), float(high), int(np.count_nonzero(~ok))


def _finish(kind, log, metric, X, W, w, confidence, *, ratio=False, bias_bound=0.0, unshown=0.0,
            n_bootstrap=200, random_state=None, extra_warnings=()):
    n = log.n_sessions
    if ratio:
        if W.sum() == 0:
            raise ValueError("the click log has no clicks: SNIPS is undefined")
        value = X.sum() / W.sum()
        # Delta method for a ratio of means.
        resid = X - value * W
        stderr = np.sqrt(np.sum(resid**2) * n / max(n - 1, 1)) / abs(W.sum()) if n > 1 else np.inf
    else:
        value = X.mean()
        stderr = X.std(ddof=1) / np.sqrt(n) if n > 1 else np.inf
    z = stats.norm.ppf(0.5 + confidence / 2)
    messages = list(extra_warnings)
    boot_low = boot_high = None
    if n_bootstrap:
        rng = np.random.default_rng(random_state)
        boot_low, boot_high, failed = _bootstrap(X, W if ratio else np.ones(n), confidence, n_bootstrap, rng)
        if failed:
            messages.append(f"{failed} of {n_bootstrap} bootstrap resamples had no clicks and were left out")
    ess = w.sum() ** 2 / np.sum(w**2) if w.size else 0.0
    share = float(w.max() / w.sum()) if w.size else 0.0
    if ess < MIN_ESS:
        messages.append(f"effective sample size {ess:.1f} < {MIN_ESS:g}: the estimate rests on few clicks")
    if share > MAX_WEIGHT_SHARE:
        messages.append(f"one click carries {share:.1%} of the summed weights (> {MAX_WEIGHT_SHARE:.0%})")
    if unshown > MAX_UNSHOWN_MASS:
        who = "only the relevance model speaks for them" if kind == "dr" else "IPS-type estimates cannot see them"
        messages.append(f"{unshown:.1%} of the ranker's metric mass is on documents the log never showed "
                        f"(> {MAX_UNSHOWN_MASS:.0%}): {who}")
    for message in messages:
        warnings.warn(f"{kind}: {message}", EstimateWarning, stacklevel=5)
    return Estimate(float(value), float(stderr), float(value - z * stderr), float(value + z * stderr),
                    confidence, n, int(w.size), float(ess), float(w.max()) if w.size else 0.0, kind,
                    _metric_name(metric), share, float(unshown), boot_low, boot_high, float(bias_bound),
                    tuple(messages))


@dataclass(frozen=True)
class _Setup:
    """What an estimator needs from the log, whatever ranker it evaluates: computed once per log.

    ``model`` the propensity model, ``rho`` the expected slope per row (policy-aware,
    and DR with a logging policy), ``rhat`` DR's relevance predictions, ``clip`` the
    clipping floor, ``shown`` which rows the log ever shows, ``messages`` the
    diagnostics of the log itself (the logging policy's Monte Carlo error).
    """

    kind: str
    model: object
    rho: np.ndarray | None
    rhat: np.ndarray | None
    clip: float | None
    shown: np.ndarray
    messages: tuple


def _need_features(log, what):
    """A ClickLog over a data set: a raw log (``ClickLog.from_events``) has no features to score."""
    if not isinstance(log, ClickLog):
        raise TypeError(f"the log must be a ClickLog, got {type(log).__name__}")
    log._need_data(what)


def _check_log(log, kind):
    _need_features(log, f"the {kind.upper()} estimate")
    if log.n_sessions == 0:
        raise ValueError("the click log has no sessions")
    if log.n_clicks == 0:
        # Every ranker would score 0 with a zero-width interval: the log says nothing about the ranker.
        raise ValueError(f"the click log has no clicks ({log.n_sessions} sessions): {kind.upper()} cannot "
                         "estimate anything from it (every ranker would get 0 with a zero-width interval)")


def _setup(kind, log, propensity, *, clip=None, relevance_model=None, logging_policy=None, n_folds=2,
           random_state=None) -> _Setup:
    """The per-log part of estimator ``kind`` (see :class:`_Setup`), with the log checked."""
    _check_log(log, kind)
    model = as_propensity_model(propensity)
    if is_session_dependent(model) and kind in ("dr", "policy_aware"):
        raise ValueError(f"{kind}: {model!r} gives a propensity per shown result (the examination given the clicks "
                         "above it); the doubly robust and policy-aware estimates need the examination per position "
                         "(a position-based model): use ips, snips or clipped_ips with it")
    messages = []
    rho = None
    if kind == "policy_aware" or (kind == "dr" and (logging_policy is not None or log.logging_policy is not None)):
        rho, policy_error = _expected_alpha(log, model, logging_policy)
        if policy_error > MAX_POLICY_ERROR:
            messages.append(f"the logging policy's Monte Carlo expected examination has a relative error up to "
                            f"{policy_error:.1%} on clicked documents (> {MAX_POLICY_ERROR:.0%}): raise its n_samples")
    if clip is not None:
        clip = check_real(clip, "clip", min_value=0.0, max_value=1.0, include_min=False)
    shown = np.bincount(log.docs, minlength=log.data.n_docs) > 0
    if rho is not None:
        never = np.flatnonzero(shown & (rho <= 0))
        if never.size:
            raise ValueError(f"the log shows row {never[0]}, whose expected examination under the logging policy "
                             "is 0: the policy does not match the log")
    rhat = None
    if kind == "dr":
        rhat = fit_relevance(log, relevance_model, propensity=model, n_folds=n_folds,
                             random_state=random_state).predictions
    return _Setup(kind, model, rho, rhat, clip, shown, tuple(messages))


def _estimate(kind, log, scores_or_ranker, metric, propensity, confidence, metric_params, *, clip=None,
              relevance_model=None, logging_policy=None, n_folds=2, n_bootstrap=200, random_state=None):
    _check_log(log, kind)
    confidence = check_real(confidence, "confidence", min_value=0.0, max_value=1.0, include_min=False,
                            include_max=False)
    n_bootstrap = check_int(n_bootstrap, "n_bootstrap", min_value=0)
    propensity = resolve_propensity(propensity, scores_or_ranker)[0]
    setup = _setup(kind, log, propensity, clip=clip, relevance_model=relevance_model, logging_policy=logging_policy,
                   n_folds=n_folds, random_state=random_state)
    return _estimate_with(setup, log, scores_or_ranker, metric, metric_params, confidence, n_bootstrap,
                          random_state)


def _estimate_with(setup, log, scores_or_ranker, metric, metric_params, confidence, n_bootstrap, random_state,
                   *, omega=None):
    """The :class:`Estimate` of one ranker from a prepared :class:`_Setup` (``omega``: its rank weights, if known)."""
    if omega is None:
        omega = _omega(log, scores_or_ranker, metric, metric_params)
    X, W, w, bias_bound = _session_terms(log, omega, setup.model, rho=setup.rho, rhat=setup.rhat, clip=setup.clip)
    unshown = _unshown_mass(log, omega, setup.shown)
    return _finish(setup.kind, log, metric, X, W, w, confidence, ratio=setup.kind == "snips", bias_bound=bias_bound,
                   unshown=unshown, n_bootstrap=n_bootstrap, random_state=random_state,
                   extra_warnings=setup.messages)


_EXAMPLE = """
    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks, PositionBasedClickModel
    >>> data = make_ranking(n_queries=50, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(eta=1, eps_minus=0), 20, random_state=0)
    >>> est = {call}
    >>> est.ci_low <= est.value <= est.ci_high and est.boot_low <= est.boot_high
    True
"""


@doc
def ips_estimate(log: ClickLog, scores_or_ranker, *, metric="dcg", propensity=None, confidence=0.95,
                 n_bootstrap=200, random_state=None, **metric_params) -> Estimate:
    """IPS estimate of ``metric`` for a ranker (object with ``predict``) or scores per data-set row.

    ``propensity``: a propensity model, an ``eta``, or a
    :class:`~counterfactual_ltr.propensity.TrustBiasPropensity` (affine
    correction ``(c - beta) / alpha``). ``n_bootstrap`` resamples (0: no
    bootstrap interval) drawn with ``random_state``. See the module docstring.

    A log without any click is a ``ValueError``: every ranker would get 0 with a zero-width interval,
    a certainty the log does not give (as SNIPS, which is undefined there).

    {parameters}

    Returns
    -------
    Estimate
        The IPS estimate of the metric (mean over sessions), with its
        intervals and diagnostics.

    {raises, warns}
    """
    return _estimate("ips", log, scores_or_ranker, metric, propensity, confidence, metric_params,
                     n_bootstrap=n_bootstrap, random_state=random_state)


@doc
def snips_estimate(log: ClickLog, scores_or_ranker, *, metric="dcg", propensity=None, confidence=0.95,
                   n_bootstrap=200, random_state=None, **metric_params) -> Estimate:
    """SNIPS estimate (metric per relevant document) of ``metric``; see the module docstring.

    {parameters}

    Returns
    -------
    Estimate
        The SNIPS estimate (ratio of the summed weighted metric to the summed
        click weights), with its intervals and diagnostics.

    {raises, warns}
    """
    return _estimate("snips", log, scores_or_ranker, metric, propensity, confidence, metric_params,
                     n_bootstrap=n_bootstrap, random_state=random_state)


@doc
def clipped_ips_estimate(log: ClickLog, scores_or_ranker, *, metric="dcg", propensity=None, confidence=0.95,
                         clip=0.1, n_bootstrap=200, random_state=None, **metric_params) -> Estimate:
    """IPS with every ``alpha`` (propensity) floored at ``clip``; ``Estimate.bias_bound`` bounds the bias.

    The weights are at most ``1 / clip``. The bound
    ``(1/N) sum_i sum_{shown d, alpha < clip} |omega(d)| (1 - alpha / clip)``
    holds for any relevance in [0, 1]; see the module docstring.

    Parameters
    ----------
    {log, scores_or_ranker, metric, propensity, confidence}
    clip : float in (0, 1], default 0.1
        Floor ``tau`` of the propensities (the slopes ``alpha``).
    {n_bootstrap, random_state, metric_params}

    Returns
    -------
    Estimate
        The clipped IPS estimate of the metric, with its intervals and
        diagnostics; ``bias_bound`` bounds its absolute bias.

    Raises
    ------
    ValueError
        If the log has no sessions or no clicks, or the scores do not have one
        finite value per data-set row, or ``clip`` is not in (0, 1].

    {warns}
    """
    return _estimate("clipped_ips", log, scores_or_ranker, metric, propensity, confidence, metric_params,
                     clip=clip, n_bootstrap=n_bootstrap, random_state=random_state)


@doc
def dr_estimate(log: ClickLog, scores_or_ranker, *, metric="dcg", propensity=None, confidence=0.95,
                relevance_model=None, n_folds=2, logging_policy=None, n_bootstrap=200, random_state=None,
                **metric_params) -> Estimate:
    """Doubly robust estimate (Oosterhuis, TOIS 2023): relevance model plus IPS correction.

    ``relevance_model``: see :func:`fit_relevance` (default: ridge regression
    on the features, cross-fitted over ``n_folds`` folds of queries drawn with
    ``random_state``). Divides by the logging policy's expected examination
    when the log carries its policy (or ``logging_policy`` is given), else by
    each session's propensity. See the module docstring.

    Parameters
    ----------
    {log, scores_or_ranker, metric, propensity, confidence}
    relevance_model : None, scikit-learn estimator, callable, array (n_docs,) or RelevanceFit
        The relevance model ``R_hat``, as :func:`fit_relevance` takes it;
        default ``None``: a ridge regression on the features, cross-fitted.
    n_folds : int >= 2, default 2
        Number of folds of queries when the relevance model is fitted here.
    logging_policy : object with ``position_probabilities(data)``, optional
        Policy that logged the sessions (e.g. a
        :class:`~counterfactual_ltr.examination.logging_policy.PlackettLucePolicy`); default
        ``None``: the log's own ``log.logging_policy``, and when neither
        is there, each session's propensity is the denominator.
    {n_bootstrap}
    random_state : None, int or numpy Generator, default None
        Seed of the bootstrap and of the folds of the relevance model.
    {metric_params}

    Returns
    -------
    Estimate
        The doubly robust estimate of the metric (mean over sessions), with
        its intervals and diagnostics.

    Raises
    ------
    ValueError
        If the log has no sessions or no clicks, or the scores do not have one
        finite value per data-set row, or the relevance model does not give
        one finite prediction per row.

    {warns}
    """
    return _estimate("dr", log, scores_or_ranker, metric, propensity, confidence, metric_params,
                     relevance_model=relevance_model, n_folds=n_folds, logging_policy=logging_policy,
                     n_bootstrap=n_bootstrap, random_state=random_state)


@doc
def policy_aware_estimate(log: ClickLog, scores_or_ranker, *, metric="dcg", propensity=None, confidence=0.95,
                          logging_policy=None, n_bootstrap=200, random_state=None, **metric_params) -> Estimate:
    """Policy-aware IPS (Oosterhuis & de Rijke, CIKM 2020): divide by the expected examination under the logger.

    Needs the logging policy: ``log.logging_policy`` (simulated logs carry
    it) or ``logging_policy=`` (e.g. a
    :class:`~counterfactual_ltr.examination.logging_policy.PlackettLucePolicy` or
    :class:`~counterfactual_ltr.examination.logging_policy.PositionProbabilities`);
    ``ValueError`` without one.

    Parameters
    ----------
    {log, scores_or_ranker, metric, propensity, confidence}
    logging_policy : object with ``position_probabilities(data)``, optional
        Policy that logged the sessions (e.g. a
        :class:`~counterfactual_ltr.examination.logging_policy.PlackettLucePolicy`); default
        ``None``: the log's own ``log.logging_policy``.
    {n_bootstrap, random_state, metric_params}

    Returns
    -------
    Estimate
        The policy-aware estimate of the metric (mean over sessions), with
        its intervals and diagnostics.

    Raises
    ------
    ValueError
        If the log has no sessions or no clicks, or the scores do not have one
        finite value per data-set row, or no logging policy is known or it
        gives 0 expected examination to a document the log shows.

    {warns}
    """
    return _estimate("policy_aware", log, scores_or_ranker, metric, propensity, confidence, metric_params,
                     logging_policy=logging_policy, n_bootstrap=n_bootstrap, random_state=random_state)


for _f, _call in ((ips_estimate, 'ips_estimate(log, data.X[:, 0], metric="dcg", random_state=0)'),
                  (snips_estimate, 'snips_estimate(log, data.X[:, 0], metric="dcg", random_state=0)'),
                  (clipped_ips_estimate, 'clipped_ips_estimate(log, data.X[:, 0], clip=0.2, random_state=0)'),
                  (dr_estimate, 'dr_estimate(log, data.X[:, 0], random_state=0)'),
                  (policy_aware_estimate, 'policy_aware_estimate(log, data.X[:, 0], random_state=0)')):
    _f.__doc__ += _EXAMPLE.format(call=_call)

#: the estimators by name, as validation reports and scorers use them
ESTIMATORS = {"ips": ips_estimate, "snips": snips_estimate, "clipped_ips": clipped_ips_estimate,
              "dr": dr_estimate, "policy_aware": policy_aware_estimate}


# ----------------------------------------------------------------------------- what the estimators target


def true_values(log: ClickLog, scores_or_ranker, relevance, *, metric="dcg", **metric_params) -> dict:
    """What IPS and SNIPS estimate on ``log``, computed from the known click-relevance of every row.

    ``ips``: mean over the log's sessions of ``sum_y m(rank(y)) c(y)``;
    ``snips``: ``sum_sessions sum_y m(rank(y)) c(y) / sum_sessions sum_y c(y)``,
    where ``c`` is ``relevance`` (e.g. ``P(click | examined)``).

    Parameters
    ----------
    log : ClickLog
        The sessions whose queries are averaged over.
    scores_or_ranker : array of shape (n_docs,) or object with ``predict``
        Scores of every data-set row or a fitted ranker, as the estimators
        take them.
    relevance : array of shape (n_docs,)
        Known click-relevance of every data-set row.
    metric : str or callable, default "dcg"
        Metric; see :func:`~counterfactual_ltr.metrics.metric_weight`.
    **metric_params
        Parameters of the metric: ``k`` for ``"prec@k"``, ``p`` for ``"rbp"``.

    Returns
    -------
    dict
        ``{"ips": float, "snips": float}``: the full-information values that
        IPS (and clipped IPS, DR, policy-aware) and SNIPS estimate.

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=50, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0)
    >>> truth = true_values(log, data.X[:, 0], (data.y >= 1).astype(float))
    >>> sorted(truth), truth["ips"] > truth["snips"] > 0
    (['ips', 'snips'], True)
    """
    _need_features(log, "true_values")
    data = log.data
    c = np.asarray(relevance, dtype=np.float64)
    if c.shape != (data.n_docs,):
        raise ValueError(f"relevance has shape {c.shape}, expected ({data.n_docs},)")
    if not np.all(np.isfinite(c)):
        raise ValueError(f"relevance holds a non-finite value at row {np.flatnonzero(~np.isfinite(c))[0]}")
    scores = _scores_for_log(log, scores_or_ranker)
    ranks = rank_within_queries(scores, data.query_offsets)
    m = metric_weight(metric, **metric_params)(ranks)
    per_query_metric = np.bincount(data.query_index, m * c, minlength=data.n_queries)
    per_query_rel = np.bincount(data.query_index, c, minlength=data.n_queries)
    sessions = log.session_query
    return {"ips": float(per_query_metric[sessions].mean()),
            "snips": float(per_query_metric[sessions].sum() / max(per_query_rel[sessions].sum(), 1e-300))}
