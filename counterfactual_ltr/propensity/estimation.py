"""Propensities estimated from the click log itself, with bootstrap intervals.

:func:`estimate_propensities` turns a :class:`~counterfactual_ltr.logs.clicklog.ClickLog`
into a propensity model usable wherever ``propensity=`` is accepted. Every
method reduces the log to per-query sufficient statistics first (one pass of
``bincount`` over the shown items), and writes its estimate as a function of
per-query weights: weights of one give the estimate, multinomial weights over
queries give the bootstrap replicates (queries are resampled, since the
sessions of a query share its documents), all replicates at once.

Methods (``theta_r`` is the examination probability at position ``r``; the
position-only methods estimate ``theta_r / theta_1``):

``"swap"`` (Joachims et al., WSDM 2017, sec. 6)
    In sessions where position 1 was swapped with position ``k``, the top
    document ``A`` of the logger sits at ``k``; in sessions without
    intervention it sits at 1. With ``P(click) = theta_r c(A)``, per query
    ``E[click at k | swap k] / E[click at 1 | no swap] = theta_k / theta_1``;
    the estimate is ``sum_q (clicks at k in swap-k sessions of q) /
    sum_q (swap-k sessions of q) x (click rate at 1 of q without swap)``,
    so both sides average over the same queries.
``"harvest"`` (Agarwal et al., WSDM 2019, AllPairs)
    No randomisation: the same (query, document) is shown at different
    positions in different sessions (by several loggers, or rankings that
    drift; no logger column needed). For positions ``k != k'``, ``S_kk'`` is the set of
    (query, document) shown at both; ``c_k^kk' = sum_S w_d CTR(d at k)``, with
    ``w_d`` the harmonic mean of d's impressions at k and k' (the rates'
    precision), has expectation ``theta_k r_kk'``, ``r_kk' = sum_S w_d c(d)``
    shared by both positions. ``theta`` and ``r`` are fitted by closed-form
    Poisson estimating equations (AllPairs' model, alternating updates), with
    a weak prior (``prior_strength``) so no position is put at 0.
``"pbm"``: the position-based click model's ``theta`` (EM's fixed point, by Newton: ``_click_em``);
    ``monotone=True`` makes pbm or harvest non-increasing; ``"auto"`` picks by held-out perplexity.
``"em"`` (regression EM, Wang et al., WSDM 2018)
    ``P(click) = theta_k gamma(x)``, ``gamma`` a classifier on the
    documents' features. By default ``gamma`` is L2-penalised logistic
    regression (scikit-learn's ``LogisticRegression(C=1)`` objective with
    impression weights), and the fixed point that regression EM converges
    to is found directly: Newton's method on the joint penalised likelihood
    of ``theta`` and the logistic weights, over (document, position) counts,
    so a bootstrap replicate (warm-started at the estimate) costs a few
    Newton steps. With ``relevance_model`` (any scikit-learn classifier with
    ``sample_weight`` and ``predict_proba``) EM refits that model in every
    M-step, and every bootstrap replicate refits the whole EM: use a small
    ``n_bootstrap`` there. One logger suffices, but what identifies
    ``theta`` then matters: where a deterministic logger always shows a
    document at the same position, position and relevance are told apart
    only through the relevance model's form, and where that model cannot
    follow the click rates' dependence on the features, the misfit shows up
    in ``theta``. A logger whose rankings vary (a stochastic ranker, changes
    over time, several loggers) shows documents at several positions and
    needs no such luck.
``"trust_em"`` (Agarwal et al., WWW 2019)
    ``P(click | k, R) = theta_k eps+_k`` if ``R = 1`` else ``theta_k eps-_k``
    with ``R`` a latent binary relevance per (query, document), fixed across
    its sessions: a two-component mixture at each position, fitted by EM.
    Clicks identify only ``a_k = theta_k eps+_k`` and ``b_k = theta_k eps-_k``
    (hence the affine correction ``alpha = a - b``, ``beta = b``); the split
    assumes ``eps+`` independent of the position and ``max theta = 1``, or
    uses a known ``eps_plus`` option.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import linalg
from scipy.special import expit, log_expit
from sklearn.exceptions import ConvergenceWarning

from .._linalg import weighted_gram
from .._validation import check_int, check_probability, check_real
from ..logs.clicklog import ClickLog
from ..datasets import dense_features
from ._results import EstimatedPropensity, EstimatedTrustBias, IdentificationWarning

__all__ = ["estimate_propensities", "reestimate", "non_increasing", "EstimatedPropensity", "EstimatedTrustBias", "IdentificationWarning",
           "METHODS"]

METHODS = ("swap", "harvest", "em", "trust_em", "pbm")
#: Default pseudo-impressions of the Beta prior on every attractiveness of ``"pbm"`` (see ``click_models``).
PBM_PRIOR_STRENGTH = 5.0
#: Default pseudo-pairs of ``"harvest"``'s prior on every linked position pair (clicked at the pooled rate).
HARVEST_PRIOR_STRENGTH = 1.0
#: ``"pbm"`` and ``"harvest"`` warn (``IdentificationWarning``) at a position that fewer (query, document)
#: pairs, shown there and at another position, identify.
MIN_SUPPORT = 20


# ----------------------------------------------------------------------------- results


# ----------------------------------------------------------------------------- statistics of the log


class _Impressions:
    """Clicks and impressions per (document, position <= K) of the selected sessions, and per query."""

    def __init__(self, log: ClickLog, K: int, sessions: np.ndarray):
        item_session = log.item_session
        positions = log.positions
        keep = sessions[item_session] & (positions <= K)
        docs = log.docs[keep].astype(np.int64)
        k = positions[keep].astype(np.int64)
        key = docs * K + (k - 1)
        n = np.bincount(key, minlength=log.n_rows * K)
        c = np.bincount(key, weights=log.clicks[keep], minlength=log.n_rows * K)
        rows = np.flatnonzero(n)  # sorted by document, then position
        self.doc = rows // K
        self.k = rows % K + 1
        self.n = n[rows].astype(np.float64)
        self.c = c[rows]
        self.query = log.row_query[self.doc]
        self.K = K

    def check_positions(self, method: str, min_clicks: int, what: str):
        shown = np.bincount(self.k, weights=self.n, minlength=self.K + 1)[1:]
        clicks = np.bincount(self.k, weights=self.c, minlength=self.K + 1)[1:]
        _check_counts(method, shown, clicks, min_clicks, what)


def _check_counts(method, shown, clicks, min_clicks, what):
    never = np.flatnonzero(shown == 0)
    if never.size:
        raise ValueError(f"{method!r}: position {never[0] + 1} is never shown {what}; lower max_position or "
                         "give a log that shows every position up to it")
    few = np.flatnonzero(clicks < min_clicks)
    if few.size:
        raise ValueError(f"{method!r}: position {few[0] + 1} has only {int(clicks[few[0]])} clicks {what}; an "
                         f"estimate with an interval needs at least min_clicks={min_clicks} at every position "
                         "(log more sessions or lower max_position)")


# ----------------------------------------------------------------------------- swap


def _swap(log, K, options):
    codes = log.intervention
    swapped = (codes >= 2) & (codes <= K)
    if not swapped.any():
        raise ValueError("'swap' needs sessions with a swap intervention (position 1 swapped with k = 2..K; "
                         "see click_sim.SwapIntervention): the log has none")
    plain = codes == 0
    if not plain.any():
        raise ValueError("'swap' needs sessions without intervention (the top document at position 1) as the "
                         "baseline: every session of the log was intervened on")
    starts = log.session_offsets[:-1]
    Q = log.n_queries
    q = log.session_query
    k = np.where(swapped, codes, 1)
    # Click at position k of a swap-k session (the logger's top document, moved to k).
    moved = log.clicks[starts + k - 1] & swapped
    S = np.zeros((Q, K))
    N = np.zeros((Q, K))
    np.add.at(S, (q[swapped], k[swapped] - 1), moved[swapped])
    np.add.at(N, (q[swapped], k[swapped] - 1), 1.0)
    C0 = np.bincount(q[plain], weights=log.clicks[starts[plain]], minlength=Q)
    N0 = np.bincount(q[plain], minlength=Q).astype(np.float64)
    shown = N.sum(0)
    shown[0] = N0.sum()
    clicks = S.sum(0)
    clicks[0] = C0.sum()
    _check_counts("swap", shown, clicks, options["min_clicks"], "in the swap sessions")

    # Swaps with k need k shown documents, so short queries are over-represented among swap-k
    # sessions: the baseline click rate of each query is weighted by its number of swap-k sessions.
    has_base = N0 > 0
    S, N = S * has_base[:, None], N * has_base[:, None]
    base = N * np.where(has_base, C0 / np.maximum(N0, 1), 0.0)[:, None]

    def estimate(W):
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = (W @ S) / (W @ base)
        rel[:, 0] = 1.0
        return rel

    return estimate, int(swapped.sum() + plain.sum())


# ----------------------------------------------------------------------------- harvest


def _fit_pairwise(c, m, max_iter, tol):
    """Fit ``E[c[:, k, k']] = p_k r_kk' m_kk'`` (``r`` symmetric) by alternating closed-form updates.

    ``c``, ``m``: (B, K, K). Returns ``p / p_1`` (B, K) and whether every replicate converged.
    """
    B, K, _ = c.shape
    p = np.ones((B, K))
    both = c + np.swapaxes(c, 1, 2)
    has = m > 0
    for it in range(max_iter):
        denom = (p[:, :, None] + p[:, None, :]) * m
        r = np.where(has, both / np.where(has, np.maximum(denom, 1e-300), 1.0), 0.0)
        new = c.sum(2) / np.maximum((r * m).sum(2), 1e-300)
        new = new / new[:, :1]
        change = np.max(np.abs(new - p) / np.maximum(new, 1e-12))
        p = new
        if change < tol:
            return p, True
    return p, False


def _harvest(log, K, options):
    plain = log.intervention == 0
    imp = _Impressions(log, K, plain)
    # Pairs of impressions of the same (query, document) at two positions k != k'.
    from .._segments import within_query_pairs

    starts = np.flatnonzero(np.r_[True, imp.doc[1:] != imp.doc[:-1]])
    offsets = np.r_[starts, len(imp.doc)]
    a, b = within_query_pairs(offsets)
    ctr = imp.c / imp.n
    cell = (imp.k[a] - 1) * K + (imp.k[b] - 1)
    # Each (query, document) counts for a position pair by the harmonic mean of its impressions at the two
    # positions (1 for a pair shown once at each), the same weight on both sides, so E[C_kk'] = theta_k r_kk'
    # still holds; the weight tracks how precisely the pair's click rates are known (Var CTR_k ~ 1 / n_k),
    # so a document shown once at a position does not count as much as one shown there a thousand times.
    weight = 2.0 * imp.n[a] * imp.n[b] / (imp.n[a] + imp.n[b])
    # Only the queries with a pair enter the statistics (a real log's millions of one-off queries do not).
    paired, qa = np.unique(imp.query[a], return_inverse=True)
    C = np.zeros((paired.size, K * K))
    M = np.zeros((paired.size, K * K))
    np.add.at(C, (qa, cell), weight * ctr[a])
    np.add.at(M, (qa, cell), weight)
    clicks = np.bincount(imp.k[a] - 1, weights=imp.c[a], minlength=K)
    shown = np.bincount(imp.k[a] - 1, minlength=K)
    # A real log's natural variation is what it is: too few clicks at a position is a warning here (the
    # estimate and its interval show how little the log says), a position never linked an error.
    _check_counts("harvest", shown, np.full(K, np.inf), 1, "for a (query, document) that is also shown at "
                  "another position")
    few = np.flatnonzero(clicks < options["min_clicks"])
    if few.size:
        warnings.warn(f"'harvest': positions {', '.join(str(k + 1) for k in few)} have fewer than "
                      f"min_clicks={options['min_clicks']} clicks on (query, document) pairs also shown at another "
                      "position: their estimates rest on few clicks", IdentificationWarning, stacklevel=3)
    support = np.bincount(cell, minlength=K * K).reshape(K, K).astype(np.int64)
    options["pair_support"] = support
    options["support"] = _position_support(imp)
    _warn_if_weak("harvest", options["support"], options["min_support"])
    linked = support > 0
    reached = np.zeros(K, dtype=bool)
    reached[0] = True
    for _ in range(K):  # positions connected to position 1 through shared documents
        reached = reached | linked[reached].any(0)
    if not reached.all():
        raise ValueError(f"'harvest': position {np.flatnonzero(~reached)[0] + 1} is never linked to position 1 "
                         "through (query, document) pairs shown at both; the ratio is not identified")
    max_iter, tol, strength = options["max_iter"], options["tol"], options["prior_strength"]

    def estimate(W):
        B = W.shape[0]
        WC, WM = _products(W, paired, C, M)
        # The prior: every linked position pair gets ``strength`` pseudo-pairs clicked at the pooled rate of
        # the varied pairs (no position effect). It keeps a position with no clicks on its few pairs at a
        # small positive estimate instead of 0, and fades as the pairs grow in number.
        linked_w = WM > 0
        pooled = WC.sum(1, keepdims=True) / np.maximum(WM.sum(1, keepdims=True), 1e-300)
        WC, WM = WC + strength * pooled * linked_w, WM + strength * linked_w
        rel, ok = _fit_pairwise(WC.reshape(B, K, K), WM.reshape(B, K, K), max_iter, tol)
        if not ok:
            warnings.warn(f"'harvest': the pairwise fit did not converge in max_iter={max_iter} iterations",
                          ConvergenceWarning)
        return rel

    return estimate, int(plain.sum())


def _position_support(imp: "_Impressions", clicks: bool = False) -> np.ndarray:
    """Per position: how many (query, document) pairs shown there were also shown at another position.

    With ``clicks``: how many clicks those pairs got there.
    """
    positions_of_row = np.bincount(imp.doc, minlength=int(imp.doc.max()) + 1 if imp.doc.size else 0)
    varied = positions_of_row[imp.doc] > 1
    if clicks:
        return np.bincount(imp.k[varied] - 1, weights=imp.c[varied], minlength=imp.K)
    return np.bincount(imp.k[varied] - 1, minlength=imp.K).astype(np.int64)


def _warn_if_weak(method: str, support: np.ndarray, min_support: int) -> None:
    """``IdentificationWarning`` naming the positions that fewer than ``min_support`` varied pairs identify."""
    weak = np.flatnonzero(support < min_support)
    if weak.size:
        listed = ", ".join(f"{k + 1} ({support[k]})" for k in weak)
        warnings.warn(f"{method!r}: positions {listed} rest on fewer than min_support={min_support} (query, "
                      "document) pairs shown there and at another position (the count in brackets): their "
                      "estimates are weakly identified by this log; see support_ and the intervals",
                      IdentificationWarning, stacklevel=4)


# ----------------------------------------------------------------------------- position-based click model


def _pbm(log, K, options):
    from ._click_em import pbm_newton

    plain = log.intervention == 0
    imp = _Impressions(log, K, plain)
    imp.check_positions("pbm", options["min_clicks"], "in sessions without intervention")
    options["support"] = _position_support(imp)
    _warn_if_weak("pbm", options["support"], options["min_support"])
    varied_clicks = _position_support(imp, clicks=True)
    few = np.flatnonzero(varied_clicks < options["min_clicks"])
    if few.size:
        warnings.warn(f"'pbm': positions {', '.join(str(k + 1) for k in few)} have fewer than "
                      f"min_clicks={options['min_clicks']} clicks on (query, document) pairs also shown at another "
                      "position: theta there rests on the prior on attractiveness more than on the log",
                      IdentificationWarning, stacklevel=3)
    fits = []
    if options.get("start") is not None:   # reestimate(): warm start from the estimate being refitted
        fits.append(options["start"])

    def estimate(W):
        # Newton on EM's fixed point (``pbm_newton``): the full fit from EM's start, every replicate
        # warm-started at the full fit; a replicate Newton cannot bring to a regular fixed point is
        # reported (``converged`` False) and left out of the intervals, never used silently.
        out, ok = [], []
        for weights in W:
            fit = pbm_newton(imp.doc, imp.k, imp.n, imp.c, log.n_rows, K, weight=weights[imp.query],
                             prior_strength=options["prior_strength"], max_iter=options["max_iter"],
                             tol=options["tol"], start=fits[0] if fits else None)
            if not fits:
                fits.append(fit)
            ok.append(fit["converged"])
            out.append(fit["theta"] / fit["theta"][0])
        estimate.converged = np.array(ok, dtype=bool)
        estimate.full_fit = fits[0]
        return np.array(out)

    return estimate, int(plain.sum())
    return estimate, int(plain.sum())


# ----------------------------------------------------------------------------- regression EM


def _em_logistic_fit(Xd, doc_of_row, kidx, n, c, K, theta0, v0, max_iter, tol, factor=None):
    """Maximise the penalised likelihood of ``P(click) = theta_k sigmoid(x v)`` by Newton's method.

    This is the fixed point of regression EM with sklearn's ``LogisticRegression(C=1)``
    as the M-step (impression-weighted log-likelihood minus ``|w|^2 / 2``, intercept
    free), found directly, where EM needs tens of refits of the relevance model. Rows
    are (document, position) counts: ``n`` impressions with ``c`` clicks; ``Xd`` the
    documents' features with a trailing column of ones; ``theta_1 = 1``. ``factor``: a
    Cholesky factor of the information to start with in place of the exact one. A
    factor is reused while the steps shrink at least fourfold (each such step is a
    gradient and a triangular solve) and recomputed otherwise, so the iterates still
    converge to this sample's own optimum.
    Returns ``theta`` (K,), ``v``, converged, iterations and the factor last used.
    """
    n_docs, n_coef = Xd.shape
    misses = n - c
    penalty = np.ones(n_coef)
    penalty[-1] = 0.0

    def loglik(u, v):
        z = Xd @ v
        p = np.exp(u)[kidx] * expit(z)[doc_of_row]
        if np.any(p >= 1.0):
            return -np.inf
        return float(c @ (u[kidx] + log_expit(z)[doc_of_row]) + misses @ np.log1p(-p) - 0.5 * penalty @ (v * v))

    by_doc = np.zeros((n_docs, K))
    last, previous = factor, np.inf
    u, v = np.log(theta0), v0.copy()
    current = loglik(u, v)
    for iteration in range(1, max_iter + 1):
        s = expit(Xd @ v)[doc_of_row]
        p = np.exp(u)[kidx] * s
        q = 1.0 - p
        resid = (c - n * p) / q                         # d loglik / d log theta_k of each row
        grad_u = np.bincount(kidx, resid, minlength=K)
        grad_v = Xd.T @ np.bincount(doc_of_row, resid * (1.0 - s), minlength=n_docs) - penalty * v
        g = np.r_[grad_u[1:], grad_v]
        if factor is not None:
            step = linalg.cho_solve(factor, g)
        else:
            # Newton's step on the observed information; where that is not positive definite (far from the
            # optimum), Fisher scoring's expected information n / (p (1 - p)) J J', J = (p, p (1 - s) x).
            h_uu = misses * p / q ** 2
            h_zz = c * s * (1.0 - s) + misses * p * (1.0 - s) * ((1.0 - 2.0 * s) * q + p * (1.0 - s)) / q ** 2
            f = n * p / q
            for uu, uz, zz in ((h_uu, h_uu * (1.0 - s), h_zz), (f, f * (1.0 - s), f * (1.0 - s) ** 2)):
                by_doc[doc_of_row, kidx] = uz             # (document, position) is unique per row
                H_uv = by_doc.T @ Xd
                H_vv = weighted_gram(Xd, np.bincount(doc_of_row, zz, minlength=n_docs))
                H_vv[np.diag_indices(n_coef)] += penalty
                H = np.block([[np.diag(np.bincount(kidx, uu, minlength=K)[1:]), H_uv[1:]], [H_uv[1:].T, H_vv]])
                try:
                    factor = last = linalg.cho_factor(H)
                    step = linalg.cho_solve(last, g)
                    break
                except linalg.LinAlgError:
                    step = linalg.lstsq(H, g, cond=1e-12)[0]  # only if the expected information fails too
        t = 1.0
        while True:  # halve the step until the likelihood does not fall (and every p stays below 1)
            u_new = np.r_[0.0, u[1:] + t * step[:K - 1]]
            v_new = v + t * step[K - 1:]
            new = loglik(u_new, v_new)
            if new >= current - 1e-12 * abs(current) or t < 1e-10:
                break
            t *= 0.5
        if new < current - 1e-12 * abs(current):
            if factor is not None:   # the borrowed information does not give an ascent: exact Newton from here
                factor = None
                continue
            return np.exp(u), v, False, iteration, last
        change = float(np.max(np.abs(np.expm1(u_new - u))))
        u, v, current = u_new, v_new, new
        if change < tol:
            return np.exp(u), v, True, iteration, last
        # The information is kept while the steps shrink fast (a chord method: one factorisation
        # serves several steps near the optimum) and recomputed when they do not.
        if change > 0.25 * previous:
            factor = None
        previous = change
    return np.exp(u), v, False, max_iter, last


def _replicates(W, fit_one, max_iter):
    """``fit_one(query_weights) -> (theta, converged)`` for every bootstrap row of ``W``; one warning for the failures."""
    fits = [fit_one(weights) for weights in W]
    failed = sum(not ok for _, ok in fits)
    if failed:
        warnings.warn(f"'em' did not converge in max_iter={max_iter} iterations in {failed} of {W.shape[0]} fits",
                      ConvergenceWarning)
    return np.array([theta for theta, _ in fits])


# Below this share of impressions on documents seen at two positions or more, regression EM cannot
# tell position from relevance by the data (see IdentificationWarning).
_EM_MIN_VARIED_SHARE = 0.05


def _warn_if_unvaried(imp: "_Impressions") -> None:
    """Warn when (nearly) every document was shown at one position only, as a deterministic logger shows them."""
    positions_of_doc = np.bincount(imp.doc, minlength=int(imp.doc.max()) + 1 if imp.doc.size else 0)
    varied = positions_of_doc[imp.doc] > 1
    share = float(imp.n[varied].sum() / imp.n.sum()) if imp.n.sum() else 0.0
    if share < _EM_MIN_VARIED_SHARE:
        what = ("every document was shown at one position only" if share == 0 else
                f"only {100 * share:.1f} % of the impressions are of documents shown at more than one position")
        warnings.warn(f"'em': {what} (a deterministic logger): position and relevance are then told apart by the "
                      "form of the relevance model alone, not by the data, so the estimate carries the model's "
                      "misfit and its bootstrap intervals can exclude the true propensities at most positions "
                      "(more sessions do not help). Log with rankings that vary (a StochasticRanker, several "
                      "loggers) or use 'swap' or 'harvest'.", IdentificationWarning, stacklevel=4)


def _em(log, K, options):
    log._need_data("'em' (its relevance model reads the documents' features)")
    plain = log.intervention == 0
    imp = _Impressions(log, K, plain)
    imp.check_positions("em", options["min_clicks"], "in sessions without intervention")
    _warn_if_unvaried(imp)
    model = options.get("relevance_model")
    kidx = imp.k - 1
    mean_ctr = np.bincount(kidx, imp.c, minlength=K) / np.bincount(kidx, imp.n, minlength=K)
    # Start: click rates as if relevance did not depend on position.
    theta_start = np.clip(mean_ctr / mean_ctr[0], 1e-3, 1.0)
    max_iter, tol = options["max_iter"], options["tol"]
    if model is None:
        return _em_builtin(log, imp, K, theta_start, max_iter, tol), int(plain.sum())
    return _em_sklearn(log, imp, K, model, theta_start, max_iter, tol), int(plain.sum())


def _em_builtin(log, imp, K, theta_start, max_iter, tol):
    """The default relevance model (penalised logistic regression), fitted jointly with ``theta``."""
    docs, doc_of_row = np.unique(imp.doc, return_inverse=True)
    Xd = np.hstack([dense_features(log.data.X[docs]), np.ones((docs.size, 1))])
    kidx = imp.k - 1
    row_query = imp.query
    state = {}

    def fit_one(query_weights):
        w = query_weights[row_query]
        if "v" in state:   # replicates start from the full-sample fit, with its information
            theta0, v0, factor = state["theta"], state["v"], state["factor"]
        else:
            ctr = np.sum(w * imp.c) / np.sum(w * imp.n)
            theta0, v0 = theta_start, np.r_[np.zeros(Xd.shape[1] - 1), np.log(ctr / (1 - ctr))]
            factor = None
        theta, v, ok, _, last = _em_logistic_fit(Xd, doc_of_row, kidx, imp.n * w, imp.c * w, K, theta0, v0,
                                                 max_iter, tol, factor)
        if "v" not in state:
            state.update(theta=theta, v=v, factor=last)
        return theta, ok

    return lambda W: _replicates(W, fit_one, max_iter)


def _em_sklearn(log, imp, K, model, theta_start, max_iter, tol):
    """Regression EM with a user's scikit-learn classifier as the relevance model (refitted every M-step)."""
    from sklearn.base import clone

    X = dense_features(log.data.X[imp.doc])
    XX = np.vstack([X, X])
    y = np.r_[np.ones(len(X)), np.zeros(len(X))]
    kidx = imp.k - 1

    def fit_one(w):
        """EM with impression weights ``w`` (bootstrap multiplicities of the rows' queries)."""
        n, c = imp.n * w, imp.c * w
        theta = theta_start
        gamma = np.clip(imp.c / imp.n / theta[kidx], 0.01, 0.99)
        relevance = clone(model)
        for _ in range(max_iter):
            t = theta[kidx]
            miss = np.maximum(1.0 - t * gamma, 1e-12)
            seen_not_rel = t * (1.0 - gamma) / miss      # P(E=1, R=0 | no click)
            rel_not_seen = (1.0 - t) * gamma / miss      # P(E=0, R=1 | no click)
            new = np.bincount(kidx, c + (n - c) * seen_not_rel, minlength=K) / np.bincount(kidx, n, minlength=K)
            new = np.clip(new / new[0], 1e-6, None)
            # M-step of the relevance model: soft labels as weighted positive and negative copies.
            positive = c + (n - c) * rel_not_seen
            relevance.fit(XX, y, sample_weight=np.r_[positive, n - positive])
            gamma = np.clip(relevance.predict_proba(X)[:, 1], 1e-6, 1 - 1e-6)
            change = np.max(np.abs(new - theta) / new)
            theta = new
            if change < tol:
                return theta, True
        return theta, False

    return lambda W: _replicates(W, lambda query_weights: fit_one(query_weights[imp.query]), max_iter)


# ----------------------------------------------------------------------------- trust-bias EM


def _trust_em(log, K, options):
    plain = log.intervention == 0
    imp = _Impressions(log, K, plain)
    imp.check_positions("trust_em", options["min_clicks"], "in sessions without intervention")
    # Everything per (document, position): clicks and non-clicks as dense document x K matrices.
    docs, doc_of_row = np.unique(imp.doc, return_inverse=True)
    clicks = np.zeros((docs.size, K))
    misses = np.zeros((docs.size, K))
    clicks[doc_of_row, imp.k - 1] = imp.c
    misses[doc_of_row, imp.k - 1] = imp.n - imp.c
    shown = clicks + misses
    query = log.row_query[docs]
    # Home position of a document: where it was shown most (its relevance prior is that position's).
    home = np.argmax(shown, axis=1)
    home_onehot = np.zeros((docs.size, K))
    home_onehot[np.arange(docs.size), home] = 1.0
    ctr = clicks.sum(0) / shown.sum(0)
    doc_ctr = clicks[np.arange(docs.size), home] / shown[np.arange(docs.size), home]
    rho0 = (doc_ctr > ctr[home]).astype(np.float64)  # start: above-average click rate = relevant
    max_iter, tol = options["max_iter"], options["tol"]
    eps_plus = options.get("eps_plus")

    def estimate(W):
        w = W[:, query]                             # (B, docs): bootstrap multiplicity of each document
        rho = np.repeat(rho0[None, :], W.shape[0], 0)
        converged = False
        a = b = None
        for _ in range(max_iter):
            wr, wn = w * rho, w * (1 - rho)
            a_new = np.clip((wr @ clicks) / np.maximum(wr @ shown, 1e-12), 1e-6, 1 - 1e-6)
            b_new = np.clip((wn @ clicks) / np.maximum(wn @ shown, 1e-12), 1e-6, 1 - 1e-6)
            prior = np.clip((wr @ home_onehot) / np.maximum(w @ home_onehot, 1e-12), 1e-6, 1 - 1e-6)
            if a is not None and max(np.max(np.abs(a_new - a)), np.max(np.abs(b_new - b))) < tol:
                a, b = a_new, b_new
                converged = True
                break
            a, b = a_new, b_new
            # E-step: posterior relevance of every document from all its impressions.
            logit = ((np.log(a) - np.log(b)) @ clicks.T + (np.log1p(-a) - np.log1p(-b)) @ misses.T
                     + (np.log(prior) - np.log1p(-prior)) @ home_onehot.T)
            rho = 1.0 / (1.0 + np.exp(-np.clip(logit, -700, 700)))
        if not converged:
            warnings.warn(f"'trust_em' did not converge in max_iter={max_iter} iterations", ConvergenceWarning)
        if eps_plus is None:
            plus = a.max(1, keepdims=True) * np.ones_like(a)
        else:
            plus = np.broadcast_to(np.asarray(eps_plus, dtype=np.float64), a.shape)
        theta = np.minimum(a / plus, 1.0)
        return np.stack([theta, plus, b / theta, a, b])

    return estimate, int(plain.sum())


# ----------------------------------------------------------------------------- entry point


class _BootstrapWeights:
    """The queries' bootstrap multiplicities, ``(n_bootstrap, n_queries)``, drawn in blocks when used.

    Replicate ``b`` resamples the present queries with replacement (multinomial counts). As one
    dense matrix they would cost ``n_bootstrap x n_queries`` doubles (1.6 GB at 200 replicates of
    a log with a million queries); every method takes rows one at a time, columns of a subset or
    products, so blocks of about 2**23 entries suffice. Each pass draws the same numbers again from
    the saved generator state, the numbers a single draw of the whole matrix would give.
    """

    _BLOCK = 1 << 23

    def __init__(self, rng, n_bootstrap: int, n_queries: int, queries: np.ndarray):
        self.shape = (n_bootstrap, n_queries)
        self._state, self._kind = rng.bit_generator.state, type(rng.bit_generator)
        self._queries = queries

    def blocks(self):
        """Consecutive blocks of rows, as dense arrays."""
        bit_generator = self._kind()
        bit_generator.state = self._state
        rng = np.random.Generator(bit_generator)
        n, (B, Q) = self._queries.size, self.shape
        step = max(1, self._BLOCK // max(Q, 1))
        for start in range(0, B, step):
            block = np.zeros((min(step, B - start), Q))
            block[:, self._queries] = rng.multinomial(n, np.full(n, 1.0 / n), size=block.shape[0])
            yield block

    def __iter__(self):
        for block in self.blocks():
            yield from block

    def __getitem__(self, key):
        rows, columns = key
        if rows != slice(None):
            raise IndexError("bootstrap weights are taken by columns: W[:, columns]")
        return np.vstack([block[:, columns] for block in self.blocks()])

    def __matmul__(self, other):
        return np.vstack([block @ other for block in self.blocks()])


def _products(W, columns, *matrices) -> list:
    """``[W[:, columns] @ m for m in matrices]``, a block of rows of ``W`` at a time."""
    blocks = W.blocks() if isinstance(W, _BootstrapWeights) else [W]
    parts = [[block[:, columns] @ m for m in matrices] for block in blocks]
    return [np.vstack(column) for column in zip(*parts)]


def estimate_propensities(log: ClickLog, method: str, *, max_position: int = 10, n_bootstrap: int = 200,
                          random_state=None, **options):
    """Estimate the position bias (and trust bias) of a click log, with bootstrap intervals.

    Parameters
    ----------
    log : ClickLog
        The logged sessions (with interventions for ``"swap"``, several loggers for ``"harvest"``).
    method : {"swap", "harvest", "em", "trust_em", "pbm", "auto"}
        See the module docstring for what each needs ("auto": see ``_auto``; its options are
        ``n_folds`` and the shared ones): swap sessions and
        sessions without intervention; documents shown at several positions
        (several loggers, or rankings that drift); one logger and document
        features; impressions of documents over many sessions; "pbm" as
        "harvest" (no features: a log from ``ClickLog.from_events`` works).
    max_position : int >= 2
        Positions ``1..max_position`` are estimated.
    n_bootstrap : int >= 0
        Bootstrap replicates (queries resampled with replacement); 0 gives no interval.
    random_state : int, Generator or None
        Seeds the bootstrap.
    **options
        ``confidence`` (0.95), ``min_clicks`` (10: fewest clicks per position
        for an estimate with an interval), ``max_iter`` and ``tol`` of the
        iterative methods (``tol`` 1e-8, or 1e-4 for ``"em"`` with a
        ``relevance_model``), ``relevance_model`` ("em": a scikit-learn
        classifier with ``sample_weight`` and ``predict_proba`` in place of
        the built-in logistic regression),
        ``eps_plus`` ("trust_em": known eps+, scalar or per position),
        ``prior_strength`` ("pbm": pseudo-impressions of the prior on every
        attractiveness, default 5; "harvest": pseudo-pairs on every linked
        position pair, clicked at the pooled rate of the varied pairs,
        default 1, 0 for the maximum-likelihood fit), ``monotone`` ("pbm", "harvest": a
        non-increasing curve, default False), ``min_support`` ("pbm", "harvest": warn
        at a position that fewer (query, document) pairs shown there and at
        another position identify, default 20).

    Returns
    -------
    EstimatedPropensity, or EstimatedTrustBias for ``"trust_em"``

    Warns
    -----
    IdentificationWarning
        ``"pbm"``/``"harvest"`` at positions with fewer than ``min_support``
        identifying pairs, or fewer than ``min_clicks`` clicks on them.
        ``"em"`` on a log where (nearly) every document was shown at one position only,
        as a deterministic logger shows them: the estimate then rests on the relevance
        model's form and its intervals cannot be trusted.

    Examples
    --------
    >>> import numpy as np
    >>> from click_sim import PositionBasedClickModel, SwapIntervention, make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=200, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(eta=1.0), n_passes=200,
    ...                       random_state=0, intervention=SwapIntervention(0.5, max_position=4))
    >>> model = estimate_propensities(log, "swap", max_position=4, n_bootstrap=50, random_state=0)
    >>> np.round(model.relative_, 1).tolist()   # truth: 1, 1/2, 1/3, 1/4
    [1.0, 0.5, 0.3, 0.2]
    >>> bool(np.all(model.lower_ <= model.upper_))
    True
    """
    if not isinstance(log, ClickLog):
        raise TypeError(f"log must be a ClickLog, got {type(log).__name__}")
    if method == "auto":
        return _auto(log, max_position, n_bootstrap, random_state, options)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS + ('auto',)}, got {method!r}")
    K = check_int(max_position, "max_position", min_value=2)
    B = check_int(n_bootstrap, "n_bootstrap", min_value=0)
    opts = _check_options(method, K, options)
    longest = int(log.positions.max(initial=0))
    if K > longest:    # before the (document x position) tables are allocated
        raise ValueError(f"{method!r}: position {longest + 1} is never shown (the log's largest position is "
                         f"{longest}); lower max_position")
    if log.n_clicks == 0:
        raise ValueError("the click log has no clicks: no propensity can be estimated")
    estimate, n_sessions = {"swap": _swap, "harvest": _harvest, "em": _em, "trust_em": _trust_em, "pbm": _pbm}[method](
        log, K, opts)
    Q = log.n_queries
    present = np.bincount(log.session_query, minlength=Q) > 0
    if opts["monotone"]:
        estimate = _monotone(estimate)
    point = estimate(present[None, :].astype(np.float64))
    point_converged = getattr(estimate, "converged", np.ones(1, dtype=bool))
    if not point_converged.all():
        warnings.warn(f"{method!r}: the fit on the whole log did not converge in max_iter={opts['max_iter']} steps",
                      ConvergenceWarning, stacklevel=2)
    at_cap, boot, converged = _replicates_checked(method, estimate, opts, B, Q, present, random_state)
    if method == "trust_em":
        return _trust_bias_model(point, boot, opts["confidence"], n_sessions)
    model = _propensity_model(method, point, boot, opts["confidence"], n_sessions, converged)
    model.support_, model.pair_support_ = opts.get("support"), opts.get("pair_support")
    model.recipe_ = {"method": method, "max_position": K,
                     "options": {key: value for key, value in options.items() if key != "start"}}
    model.log_fingerprint_ = log_fingerprint(log)
    model._full_fit = getattr(estimate, "full_fit", None)
    model.at_cap_ = at_cap
    return model


def reestimate(estimate, log: ClickLog, query_weights) -> "EstimatedPropensity":
    """Refit an estimate's recipe on a query-weighted replicate of ``log`` (no interval).

    The method and options come from ``estimate.recipe_`` (what :func:`estimate_propensities`
    made it with); ``query_weights`` (n_queries,) are the multiplicities of ``log``'s queries in the
    replicate (a bootstrap draw, or 0/1 for a subset). ``"pbm"`` starts from the estimate's own fit
    (``estimate`` must then come from this ``log``), so a replicate costs a few Newton steps. The
    returned estimate's ``converged_`` says whether the refit converged.

    Parameters
    ----------
    estimate : EstimatedPropensity
        A result of :func:`estimate_propensities`.
    log : ClickLog
        The log it was estimated from.
    query_weights : array (log.n_queries,)
        Non-negative weights per query.

    Returns
    -------
    EstimatedPropensity

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import ClickLog
    >>> rng = np.random.default_rng(0)
    >>> docs = np.array([rng.permutation(4) for _ in range(400)]).ravel()
    >>> positions = np.tile(np.arange(1, 5), 400)
    >>> log = ClickLog.from_events({"query": np.repeat(rng.integers(0, 5, 400), 4), "doc": docs,
    ...                             "position": positions, "click": rng.random(1600) < 0.5 / positions})
    >>> est = estimate_propensities(log, "harvest", max_position=4, n_bootstrap=0, min_support=0)
    >>> same = reestimate(est, log, np.ones(log.n_queries))
    >>> bool(np.allclose(same.relative_, est.relative_))
    True
    """
    recipe = getattr(estimate, "recipe_", None)
    if recipe is None:
        raise ValueError("reestimate needs an estimate made by estimate_propensities (it has no recipe_)")
    if not isinstance(log, ClickLog):
        raise TypeError(f"log must be a ClickLog, got {type(log).__name__}")
    w = np.asarray(query_weights, dtype=np.float64)
    if w.shape != (log.n_queries,) or not np.all(np.isfinite(w) & (w >= 0)):
        raise ValueError(f"query_weights must be {log.n_queries} finite non-negative numbers (one per query of "
                         f"the log), got shape {w.shape}")
    method, K = recipe["method"], recipe["max_position"]
    if method == "trust_em":
        raise ValueError("reestimate: 'trust_em' estimates are not position-only; refit with estimate_propensities")
    opts = _check_options(method, K, dict(recipe["options"]))
    if method == "pbm" and getattr(estimate, "_full_fit", None) is not None:
        if estimate._full_fit["alpha"].shape != (log.n_rows,):
            raise ValueError("reestimate: the log is not the one the estimate was made from (its rows differ)")
        opts["start"] = estimate._full_fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentificationWarning)   # said when the estimate was made
        fit, n_sessions = {"swap": _swap, "harvest": _harvest, "em": _em, "pbm": _pbm}[method](log, K, opts)
    if opts["monotone"]:
        fit = _monotone(fit)
    values = fit(w[None, :])
    model = _propensity_model(method, values, None, opts["confidence"], n_sessions)
    model.recipe_ = recipe
    model.converged_ = bool(getattr(fit, "converged", np.ones(1, dtype=bool)).all())
    return model


def _replicates_checked(method, estimate, opts, B, Q, present, random_state):
    """The bootstrap replicates, with the warnings of their convergence and (pbm) of theta at its cap."""
    at_cap = None
    if method == "pbm":
        at_cap = estimate.full_fit["theta"] >= 1.0
        capped = np.flatnonzero(at_cap[1:]) + 2
        if capped.size:
            warnings.warn(f"'pbm': theta is at its cap 1 at positions {', '.join(map(str, capped))}: the prior on "
                          "attractiveness (by placement) carries the fall of the click rate there and pushes theta up "
                          "to the bound, so the estimate reads 1 and intervals can collapse to [1, 1]; that is the "
                          "bound, not certainty (see at_cap_, support_, and compare harvest)", IdentificationWarning,
                          stacklevel=2)
    boot = None
    converged = None
    if B:
        boot = estimate(_BootstrapWeights(np.random.default_rng(random_state), B, Q, np.flatnonzero(present)))
        converged = getattr(estimate, "converged", None)
        if converged is not None and not converged.all():
            warnings.warn(f"{method!r}: {int((~converged).sum())} of {B} bootstrap replicates did not converge (no "
                          f"regular fixed point reached in max_iter={opts['max_iter']} steps: Newton stalled where a "
                          "theta sits at its bound or the fixed point is not unique); they are left out of the "
                          "intervals (see bootstrap_converged_)", ConvergenceWarning, stacklevel=2)
    return at_cap, boot, converged


def _check_options(method, K, options) -> dict:
    """The checked ``**options`` of :func:`estimate_propensities`, with the defaults filled in."""
    known = {"confidence", "min_clicks", "max_iter", "tol", "relevance_model", "eps_plus", "prior_strength",
             "min_support", "start", "monotone"}
    unknown = set(options) - known
    if unknown:
        raise TypeError(f"estimate_propensities got unknown options {sorted(unknown)}; known: {sorted(known)}")
    if "relevance_model" in options and method != "em":
        raise TypeError("relevance_model is an option of method 'em' only")
    if "eps_plus" in options and method != "trust_em":
        raise TypeError("eps_plus is an option of method 'trust_em' only")
    if "prior_strength" in options and method not in ("pbm", "harvest"):
        raise TypeError("prior_strength is an option of methods 'pbm' and 'harvest' only")
    if options.get("monotone") and method not in ("pbm", "harvest"):
        raise TypeError("monotone is an option of methods 'pbm' and 'harvest' only")
    if "min_support" in options and method not in ("pbm", "harvest"):
        raise TypeError("min_support is an option of methods 'pbm' and 'harvest' only")
    opts = {
        "confidence": check_probability(options.get("confidence", 0.95), "confidence", include_zero=False,
                                        include_one=False),
        "min_clicks": check_int(options.get("min_clicks", 10), "min_clicks", min_value=1),
        "max_iter": check_int(options.get("max_iter", {"em": 100, "pbm": 100}.get(method, 500)), "max_iter",
                              min_value=1),
        # EM with a user's relevance model refits it every step: a looser default there. The
        # position-based model's tolerance is on the mean log-likelihood per impression.
        "tol": check_real(options.get("tol", 1e-4 if options.get("relevance_model") is not None
                                      else 1e-8), "tol", min_value=0, include_min=False),
        "prior_strength": check_real(options.get("prior_strength", HARVEST_PRIOR_STRENGTH if method == "harvest"
                                                 else PBM_PRIOR_STRENGTH), "prior_strength",
                                     min_value=0),
        "min_support": check_int(options.get("min_support", MIN_SUPPORT), "min_support", min_value=0),
    }
    opts["monotone"] = bool(options.get("monotone", False))
    for key in ("relevance_model", "eps_plus", "start"):
        if options.get(key) is not None:
            opts[key] = options[key]
    if "relevance_model" in opts:
        _check_relevance_model(opts["relevance_model"])
    if "eps_plus" in opts:
        plus = np.asarray(opts["eps_plus"], dtype=np.float64)
        if plus.ndim > 1 or (plus.ndim == 1 and plus.size != K) or not np.all((plus > 0) & (plus <= 1)):
            raise ValueError(f"eps_plus must be a number in (0, 1] or {K} of them (one per position)")
    return opts


def _check_relevance_model(model) -> None:
    """``TypeError`` unless ``model`` is a scikit-learn classifier with ``predict_proba`` and weighted ``fit``."""
    from sklearn.base import is_classifier
    from sklearn.utils.validation import has_fit_parameter

    name = type(model).__name__
    if not (hasattr(model, "fit") and hasattr(model, "get_params")):
        raise TypeError(f"relevance_model must be a scikit-learn classifier, got {name}")
    if not (is_classifier(model) and hasattr(model, "predict_proba")):
        raise TypeError(f"relevance_model must be a classifier with predict_proba (the probability of relevance), "
                        f"got {name}, which {'has no predict_proba' if is_classifier(model) else 'is not a classifier'}"
                        "; e.g. LogisticRegression()")
    if not has_fit_parameter(model, "sample_weight"):
        raise TypeError(f"relevance_model {name} does not take sample_weight in fit: EM fits it on soft labels "
                        "given as weights")


def _percentiles(values, confidence):
    """The two-sided percentile interval of bootstrap replicates (rows) at level ``confidence``."""
    return np.percentile(values, [50 * (1 - confidence), 50 * (1 + confidence)], axis=0)


def _trust_bias_model(point, boot, confidence, n_sessions) -> EstimatedTrustBias:
    """The ``"trust_em"`` estimate with the intervals of every part (and of relative, alpha, beta)."""
    theta, plus, minus, a, b = (v[0] for v in point)
    intervals, reps = {}, {}
    if boot is not None:
        for name, values in zip(("examination", "eps_plus", "eps_minus", "a", "b"), boot):
            intervals[name] = tuple(_percentiles(values, confidence))
            reps[name] = values
        extra = {"relative": boot[0] / boot[0][:, :1], "alpha": boot[3] - boot[4], "beta": boot[4]}
        for name, values in extra.items():
            intervals[name] = tuple(_percentiles(values, confidence))
            reps[name] = values
    return EstimatedTrustBias(theta, plus, np.minimum(minus, plus - 1e-9), intervals=intervals, bootstrap=reps,
                              confidence=confidence, n_sessions=n_sessions)


def _propensity_model(method, point, boot, confidence, n_sessions, converged=None) -> EstimatedPropensity:
    """A position-only estimate with its interval; ``ValueError`` where a position or a replicate had no data."""
    relative = point[0]
    bad = np.flatnonzero(~(np.isfinite(relative) & (relative > 0)))
    if bad.size:
        raise ValueError(f"{method!r}: the estimate at position {bad[0] + 1} is {relative[bad[0]]}: too few clicks "
                         "there (log more sessions or lower max_position)")
    lower = upper = None
    if boot is not None:
        if not np.all(np.isfinite(boot)):
            raise ValueError(f"{method!r}: some bootstrap replicates have no data at a position: too few sessions "
                             "for an interval (log more sessions, lower max_position or use n_bootstrap=0)")
        used = boot if converged is None or not converged.any() else boot[converged]
        lower, upper = _percentiles(used, confidence)
    model = EstimatedPropensity(relative, lower, upper, bootstrap=boot, method=method, confidence=confidence,
                                n_sessions=n_sessions)
    if boot is not None:
        model.bootstrap_converged_ = np.ones(len(boot), dtype=bool) if converged is None else converged
    return model


# ----------------------------------------------------------------------------- shape and choice


def non_increasing(values) -> np.ndarray:
    """The closest non-increasing curve to each row of ``values`` in least squares (isotonic regression).

    Pool adjacent violators (Barlow et al., Statistical Inference under Order Restrictions, 1972):
    a run of positions whose values rise is replaced by its mean until none rises. A curve that is
    already non-increasing is returned unchanged. The loop runs over positions (at most ``K``
    poolings), each step vectorised over the rows.

    Parameters
    ----------
    values : array (K,) or (B, K)
        A curve over positions ``1..K`` (or one per row: bootstrap replicates).

    Returns
    -------
    array of the same shape

    Examples
    --------
    >>> non_increasing([1.0, 0.5, 0.7, 0.2]).tolist()
    [1.0, 0.6, 0.6, 0.2]
    """
    v = np.array(values, dtype=np.float64, ndmin=1)
    flat = v.reshape(-1, v.shape[-1]) if v.ndim > 1 else v[None, :]
    out = np.empty_like(flat)
    for b, row in enumerate(flat):   # rows are replicates (tens to hundreds); positions are few
        means, sizes = [], []
        for x in row:
            means.append(x)
            sizes.append(1)
            while len(means) > 1 and means[-2] < means[-1]:
                m = (means[-2] * sizes[-2] + means[-1] * sizes[-1]) / (sizes[-2] + sizes[-1])
                sizes[-2] += sizes[-1]
                means[-2] = m
                means.pop()
                sizes.pop()
        out[b] = np.repeat(means, sizes)
    return out.reshape(v.shape) if v.ndim > 1 else out[0]


def _monotone(estimate):
    """``estimate`` (query weights -> curves) followed by :func:`non_increasing`, keeping its attributes."""

    def shaped(W):
        values = non_increasing(estimate(W))
        for name in ("converged", "full_fit"):
            if hasattr(estimate, name):
                setattr(shaped, name, getattr(estimate, name))
        return values / values[:, :1]

    return shaped


#: The candidates of ``"auto"``: (name, method, options); a tie goes to the earlier (monotone first).
AUTO_CANDIDATES = (("pbm monotone", "pbm", {"monotone": True}), ("pbm", "pbm", {}),
                   ("harvest monotone", "harvest", {"monotone": True}), ("harvest", "harvest", {}),
                   ("rank-only", "rank-only", {}))


def _rank_only(log, K) -> EstimatedPropensity:
    """The click rate by position as a curve (no document effect): the rank-only model's theta."""
    k = log.positions.astype(np.int64)
    keep = k <= K
    shown = np.bincount(k[keep] - 1, minlength=K)
    clicks = np.bincount(k[keep] - 1, weights=log.clicks[keep], minlength=K)
    ctr = (clicks + 1.0 * log.n_clicks / max(log.n_items, 1)) / (shown + 1.0)   # one pseudo-impression
    return EstimatedPropensity(ctr / ctr[0], method="rank-only", n_sessions=len(log))


def _auto(log, max_position, n_bootstrap, random_state, options) -> EstimatedPropensity:
    """``method="auto"``: the candidate whose theta best predicts held-out clicks, cross-validated over queries.

    Every candidate of ``AUTO_CANDIDATES`` is estimated on all sessions but one fold (``n_folds``,
    default 3; every query's sessions are dealt to the folds in random order, ``random_state``, so
    each fold holds a share of every query and its pairs are seen in training) and scored by the
    held-out click perplexity of the position-based click model with ``theta`` kept at that
    estimate and the attractiveness fitted on the same training sessions (the check of
    :mod:`~counterfactual_ltr.propensity.click_models`; lower is better). The candidate with the
    lowest mean over folds wins, monotone variants first on ties; it is refitted on the whole log
    with ``n_bootstrap`` replicates. ``auto_table_`` of the result holds every candidate's
    perplexity per fold (NaN where it could not be estimated).
    """
    from .click_models import PositionBasedModel

    if not isinstance(log, ClickLog):
        raise TypeError(f"log must be a ClickLog, got {type(log).__name__}")
    options = dict(options)
    n_folds = check_int(options.pop("n_folds", 3), "n_folds", min_value=2)
    unknown = set(options) - {"confidence", "min_clicks", "tol", "min_support"}
    if unknown:
        raise TypeError(f"method 'auto' takes the options confidence, min_clicks, tol, min_support and n_folds, "
                        f"got {sorted(unknown)}")
    K = check_int(max_position, "max_position", min_value=2)
    rng = np.random.default_rng(random_state)
    # Folds within queries: each query's sessions, in random order, dealt to the folds in turn. (With
    # whole queries held out every held-out pair is unseen, the prediction is theta_r times the
    # placement prior, and the score rewards the marginal click rate by position, rank-only, by
    # construction: it won on simulated position-based logs.)
    n = len(log)
    if n < n_folds:
        raise ValueError(f"method 'auto': the log has {n} sessions, fewer than n_folds={n_folds}")
    order = rng.permutation(n)
    order = order[np.argsort(log.session_query[order], kind="stable")]
    query_sorted = log.session_query[order]
    first = np.r_[0, np.flatnonzero(np.diff(query_sorted)) + 1]
    rank = np.arange(n) - np.repeat(first, np.diff(np.r_[first, n]))
    fold = np.empty(n, dtype=np.int64)
    fold[order] = (rank + rng.integers(0, n_folds, first.size).repeat(np.diff(np.r_[first, n]))) % n_folds
    table = np.full((len(AUTO_CANDIDATES), n_folds), np.nan)
    for f in range(n_folds):
        train, test = log[np.flatnonzero(fold != f)], log[np.flatnonzero(fold == f)]
        for i, (_, method, extra) in enumerate(AUTO_CANDIDATES):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    curve = _rank_only(train, K) if method == "rank-only" else estimate_propensities(
                        train, method, max_position=K, n_bootstrap=0, **extra, **options)
                    table[i, f] = PositionBasedModel(propensity=curve).fit(train).perplexity(test)
                except ValueError:
                    continue
    mean = np.where(np.isfinite(table).all(1), table.mean(1), np.inf)   # a candidate failing a fold is out
    if not np.isfinite(mean).any():
        raise ValueError("method 'auto': no candidate could be estimated on every fold")
    best = int(np.argmin(mean))
    name, method, extra = AUTO_CANDIDATES[best]
    if method == "rank-only":
        model = _rank_only(log, K)
    else:
        model = estimate_propensities(log, method, max_position=K, n_bootstrap=n_bootstrap,
                                      random_state=random_state, **extra, **options)
    model.auto_table_ = [{"candidate": c[0], "perplexity": float(m), "folds": table[i].tolist()}
                         for i, (c, m) in enumerate(zip(AUTO_CANDIDATES, mean))]
    model.auto_choice_ = name
    return model


# ----------------------------------------------------------------------------- replicates for other resamples


def log_fingerprint(log: ClickLog) -> str:
    """A digest of a log's sessions (their lengths, positions and clicks, in order).

    The same for a raw log and the log ``with_data`` joins from it (document codes differ, the
    sessions do not), so an estimate can tell whether a comparison runs on the log it came from.
    """
    import hashlib

    digest = hashlib.sha1()
    for array in (np.diff(log.session_offsets), log.positions, log.clicks):
        digest.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
    return digest.hexdigest()


def replicate_curves(model, log: ClickLog, query_weights: np.ndarray):
    """Replicates of an estimated propensity for resampled queries of ``log``: ``(curves, how)``.

    * ``model`` was estimated on ``log`` (same :func:`log_fingerprint`): re-estimated with the
      recipe it keeps on every row of ``query_weights`` (``(B, log.n_queries)``), the same
      resamples the comparison draws, so the two errors are paired (``how = "re-estimated"``);
    * estimated on another log: its own bootstrap replicates, independent of the comparison's
      resamples as the two logs are (``how = "replicates of its own log"``; cycled when fewer);
    * neither possible (a given model, or an estimate without recipe or replicates):
      ``(None, reason)``.

    ``curves`` is ``(B, K)``: each row a replicate's ``relative_`` at positions ``1..K``.
    """
    if getattr(model, "method_", "given") == "given" or not hasattr(model, "relative_"):
        return None, "a given propensity (nothing estimated)"
    B = query_weights.shape[0]
    if model.recipe_ is not None and model.log_fingerprint_ == log_fingerprint(log):
        recipe = model.recipe_
        K = recipe["max_position"]
        opts = _check_options(recipe["method"], K, recipe["options"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # the point estimate has said its warnings already
            estimate, _ = {"swap": _swap, "harvest": _harvest, "em": _em, "pbm": _pbm}[recipe["method"]](log, K, opts)
            curves = np.asarray(estimate(np.asarray(query_weights, dtype=np.float64)))
        return curves, "re-estimated"
    if model.bootstrap_.shape[0] == 0:
        return None, "an estimate from another log without bootstrap replicates"
    converged = getattr(model, "bootstrap_converged_", None)
    replicates = model.bootstrap_ if converged is None or not converged.any() else model.bootstrap_[converged]
    rows = np.arange(B) % replicates.shape[0]
    return replicates[rows], "replicates of its own log"
