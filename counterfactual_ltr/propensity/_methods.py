"""The estimation methods behind :func:`~counterfactual_ltr.propensity.estimation.estimate_propensities`.

One function per method (``_swap``, ``_harvest``, ``_pbm``, ``_em``, ``_trust_em``): each takes the
log, the number of positions and the checked options, and returns ``(estimate, n_sessions)``
where ``estimate(W)`` fits the method once per row of query weights ``W`` (the whole log, or
bootstrap replicates drawn as :class:`_BootstrapWeights`). The formulas and the choice among the
methods are in the estimation module's docstring; the public entry points (options, intervals,
``reestimate``, "auto") stay there.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import linalg
from scipy.special import expit, log_expit
from sklearn.exceptions import ConvergenceWarning

from .._linalg import weighted_gram
from ..logs.clicklog import ClickLog
from ..datasets import dense_features
from ._results import IdentificationWarning


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
        with np.errstate(divide="ignore", invalid="ignore"):   # a replicate without clicks at 1: NaN, refused later
            new = new / new[:, :1]
            change = np.nanmax(np.abs(new - p) / np.maximum(new, 1e-12), initial=0.0)
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
    if clicks[0] == 0:
        raise ValueError("'harvest': no click at position 1 on a (query, document) also shown at another position, so "
                         "theta_r / theta_1 is not identified at any position (every ratio would divide by 0); log "
                         "more sessions, or use 'smooth', which borrows from a power law where the log is silent")
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


# ----------------------------------------------------------------------------- bootstrap weights



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
