"""Cascade-family click models over a session x rank grid: conditional probabilities, likelihood and EM.

Every function works on the pages of a log laid out as a dense grid (:func:`grid`): ``S`` pages by
``L`` ranks (``L`` the longest page), rank ``j`` the ``j``-th shown result of a page (columns past a
page's end are masked). The chain of a cascade model runs over the shown results in order; a
parameter that depends on position (UBM's ``gamma``, DCM's ``lambda``) is read at the result's
recorded position. All arithmetic is vectorised over pages; loops run over EM iterations and over
the ``L`` ranks only.

Notation (Chuklin, Markov and de Rijke, Click Models for Web Search, 2015, ch. 3): ``E_j``
examination, ``A_j`` attractiveness (``P(A_j = 1) = alpha_qd``), ``C_j = E_j A_j`` the click,
``S_j`` satisfaction after a click (``P = sigma_qd``). Parameters per cell of the grid are looked up
from the model's tables before the functions here are called (``A``, ``Sg``: (S, L) arrays).
"""

from __future__ import annotations

import numpy as np

__all__ = ["grid", "conditional", "marginal", "cm_fit", "ubm_em", "dcm_counts", "dcm_em", "sdbn_counts", "sdbn_em",
           "dbn_em", "session_loglik"]

_EPS = 1e-10


def grid(offsets, positions, values=None):
    """The pages as an (S, L) grid: where each item goes, the mask of shown cells, and positions.

    Returns
    -------
    dict
        ``at`` (tuple of row and column index of every item, for fancy indexing), ``mask`` (S, L)
        bool, ``pos`` (S, L) int (recorded position, 1 in masked cells), ``length`` (S,).
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    length = np.diff(offsets)
    S, L = len(length), int(length.max()) if len(length) else 0
    page = np.repeat(np.arange(S), length)
    col = np.arange(offsets[-1]) - offsets[:-1][page]
    mask = np.zeros((S, L), dtype=bool)
    mask[page, col] = True
    pos = np.ones((S, L), dtype=np.int64)
    pos[page, col] = positions
    return {"at": (page, col), "mask": mask, "pos": pos, "length": length}


def _spread(g, item_values, fill=0.0, dtype=np.float64):
    out = np.full(g["mask"].shape, fill, dtype=dtype)
    out[g["at"]] = item_values
    return out


def _last_click(C, mask):
    """Column of each page's last click (-1 without a click)."""
    L = C.shape[1]
    clicked = (C > 0) & mask
    last = L - 1 - np.argmax(clicked[:, ::-1], axis=1)
    return np.where(clicked.any(axis=1), last, -1)


def conditional(model, A, C, mask, pos, *, Sg=None, gamma=None, lam=None):
    """``P(E_j = 1 | C_<j)`` and ``P(C_j = 1 | C_<j)`` of every cell, by the forward recursion of the model.

    The recursions (Chuklin et al. 2015, sec. 3.3-3.8; the click probability is always
    ``P(C_j = 1 | C_<j) = e_j alpha_j`` with ``e_j = P(E_j = 1 | C_<j)``):

    * CM (sec. 3.3): ``e_1 = 1``, ``e_{j+1} = e_j (1 - C_j)`` (no examination after the first click);
    * DCM (sec. 3.5): ``e_{j+1} = lambda_{r_j}`` after a click, ``e_j (1 - alpha_j) / (1 - e_j alpha_j)``
      after a skip (Bayes' rule: a skip makes examination less likely);
    * DBN (sec. 3.8; SDBN with ``gamma = 1``): ``e_{j+1} = gamma (1 - sigma_j)`` after a click,
      ``gamma e_j (1 - alpha_j) / (1 - e_j alpha_j)`` after a skip;
    * UBM (sec. 3.4): ``e_j = gamma[r_j, r']`` with ``r'`` the position of the last click above
      (0 without one): examination is known given the clicks above.

    ``gamma`` is a float for DBN and a (K, K + 1) table for UBM; ``lam`` a (K,) table for DCM;
    positions beyond the tables take their last row.
    """
    S, L = A.shape
    E = np.zeros((S, L))
    if model == "ubm":
        K = gamma.shape[0]
        last = np.zeros(S, dtype=np.int64)     # position of the last click above (0: none)
        for j in range(L):
            r = np.minimum(pos[:, j], K)
            E[:, j] = gamma[r - 1, np.minimum(last, K)]
            last = np.where((C[:, j] > 0) & mask[:, j], pos[:, j], last)
        return E, E * A
    e = np.ones(S)
    for j in range(L):
        E[:, j] = e
        clicked = C[:, j] > 0
        skipped = e * (1 - A[:, j]) / np.maximum(1 - e * A[:, j], _EPS)
        if model == "cm":
            e = np.where(clicked, 0.0, e)
        elif model == "dcm":
            e = np.where(clicked, lam[np.minimum(pos[:, j], len(lam)) - 1], skipped)
        else:   # dbn / sdbn
            e = gamma * np.where(clicked, 1 - Sg[:, j], skipped)
        e = np.where(mask[:, j], e, E[:, j])
    return E, E * A


def marginal(model, A, mask, pos, *, Sg=None, gamma=None, lam=None):
    """``P(C_j = 1)`` of every cell, not conditioned on any click (what perplexity scores; sec. 5.3).

    CM: ``u_{j+1} = u_j (1 - alpha_j)``; DCM: ``u_{j+1} = u_j (1 - alpha_j + alpha_j lambda_j)``;
    DBN: ``u_{j+1} = gamma u_j (1 - alpha_j sigma_j)``; ``P(C_j = 1) = u_j alpha_j``. UBM sums over
    the position of the last click above, carried as a distribution ``D`` over earlier columns
    (``D_0``: no click yet): ``P(C_j = 1) = alpha_j sum_i D_i gamma[r_j, r_i]``, then
    ``D_i <- D_i (1 - alpha_j gamma[r_j, r_i])`` and ``D_{j+1} <- P(C_j = 1)``.
    """
    S, L = A.shape
    P = np.zeros((S, L))
    if model == "ubm":
        K = gamma.shape[0]
        D = np.zeros((S, L + 1))
        D[:, 0] = 1.0
        prev = np.zeros((S, L + 1), dtype=np.int64)   # position of the click that column i stands for
        prev[:, 1:] = np.minimum(pos, K)
        for j in range(L):
            r = np.minimum(pos[:, j], K)
            g = gamma[r[:, None] - 1, prev[:, :j + 1]]            # (S, j+1)
            pj = A[:, j] * (D[:, :j + 1] * g).sum(axis=1)
            P[:, j] = pj
            shown = mask[:, j]
            D[:, :j + 1] = np.where(shown[:, None], D[:, :j + 1] * (1 - A[:, j, None] * g), D[:, :j + 1])
            D[:, j + 1] = np.where(shown, pj, 0.0)
        return P * mask
    u = np.ones(S)
    for j in range(L):
        P[:, j] = u * A[:, j]
        if model == "cm":
            step = 1 - A[:, j]
        elif model == "dcm":
            step = 1 - A[:, j] + A[:, j] * lam[np.minimum(pos[:, j], len(lam)) - 1]
        else:
            step = gamma * (1 - A[:, j] * Sg[:, j])
        u = np.where(mask[:, j], u * step, u)
    return P * mask


def session_loglik(model, A, C, mask, pos, **params):
    """Natural-log probability of every page's clicks (S,): the chain rule over the conditionals."""
    _, p = conditional(model, A, C, mask, pos, **params)
    p = np.clip(p, _EPS, 1 - _EPS)
    return np.where(mask, np.where(C > 0, np.log(p), np.log1p(-p)), 0.0).sum(axis=1)


def _map(num, den, s):
    """Beta-prior MAP of per-row rates: ``(num + s mu) / (den + s)``, ``mu = sum num / sum den``."""
    mu = float(num.sum() / max(den.sum(), _EPS))
    mu = min(max(mu, _EPS), 1 - _EPS)
    return np.clip((num + s * mu) / np.maximum(den + s, _EPS), _EPS, 1 - _EPS), mu


def cm_fit(R, C, mask, n_rows, s):
    """The cascade model's attractiveness by counting (sec. 4.2): every result up to the first click.

    ``alpha_qd = (clicks + s mu) / (impressions up to and including a page's first click + s)``, the
    closed-form maximum (a posteriori, with ``s`` pseudo-impressions at the pooled rate ``mu``) of the
    CM likelihood; results below the first click say nothing under CM and are left out.
    """
    clicked = (C > 0) & mask
    before = np.cumsum(clicked, axis=1) - clicked    # clicks strictly above
    use = mask & (before == 0)
    num = np.bincount(R[use], weights=C[use], minlength=n_rows)
    den = np.bincount(R[use], minlength=n_rows).astype(np.float64)
    return _map(num, den, s)


def _loop(step, x, max_iter, tol):
    """Run EM steps ``x, loglik = step(x)`` until the mean log-likelihood changes by less than ``tol``."""
    previous, converged, it, loglik = -np.inf, False, 0, -np.inf
    history = []
    while it < max_iter:
        x, loglik = step(x)
        it += 1
        history.append(loglik)
        if abs(loglik - previous) < tol:
            converged = True
            break
        previous = loglik
    return x, it, converged, history


def ubm_em(R, C, mask, pos, n_rows, K, s, max_iter, tol):
    """UBM by EM (sec. 4.3): ``P(C_j = 1 | C_<j) = gamma[r_j, r'] alpha_qd``.

    Examination is fixed by the clicks above, so each cell is a PBM-like cell with ``gamma`` indexed
    by (position, position of the last click above). E-step of a skip (sec. 4.3.2):
    ``P(A = 1 | C = 0) = alpha (1 - gamma) / (1 - gamma alpha)`` and
    ``P(E = 1 | C = 0) = gamma (1 - alpha) / (1 - gamma alpha)``; M-step: their means per row (with
    the Beta prior of ``_map``) and per (position, last click position).
    """
    clicked = (C > 0) & mask
    r = np.minimum(pos, K)
    last = np.zeros_like(pos)
    for j in range(1, pos.shape[1]):
        last[:, j] = np.where(clicked[:, j - 1], r[:, j - 1], last[:, j - 1])
    gidx = ((r - 1) * (K + 1) + last)[mask]
    row, c = R[mask], C[mask]
    n_items = max(c.size, 1)
    den_g = np.bincount(gidx, minlength=K * (K + 1)).astype(np.float64)
    den_r = np.bincount(row, minlength=n_rows).astype(np.float64)
    start = (np.full(n_rows, 0.2), np.full(K * (K + 1), 0.5))

    def step(x):
        alpha, gamma = x
        a, g = alpha[row], gamma[gidx]
        p = np.clip(a * g, _EPS, 1 - _EPS)
        loglik = float(np.where(c > 0, np.log(p), np.log1p(-p)).sum() / n_items)
        post_a = np.where(c > 0, 1.0, a * (1 - g) / (1 - p))
        post_e = np.where(c > 0, 1.0, g * (1 - a) / (1 - p))
        alpha, mu = _map(np.bincount(row, weights=post_a, minlength=n_rows), den_r, s)
        step.mu = mu
        new_g = np.bincount(gidx, weights=post_e, minlength=K * (K + 1))
        gamma = np.where(den_g > 0, np.clip(new_g / np.maximum(den_g, _EPS), _EPS, 1.0), gamma)
        return (alpha, gamma), loglik

    (alpha, gamma), it, converged, history = _loop(step, start, max_iter, tol)
    gamma = gamma.reshape(K, K + 1)
    return {"alpha": alpha, "gamma": gamma, "mu": step.mu, "n_iter": it, "converged": converged,
            "history": history}


def _last_click_counts(R, C, mask, pos, n_rows, K):
    """What a page's clicks fix for DCM and SDBN, and what stays hidden below its last click.

    Every result at or above a page's last click ``l`` was examined, and every result of a page
    without clicks too (a skip passes examination on; SDBN's ``gamma = 1``): their clicks and skips
    are plain Bernoulli counts of ``alpha_qd`` (``clicks_row``, ``skips_row``). Every click but a
    page's last was followed by examination of the next result (``sure_go`` per position,
    ``sure_go_row`` per document). What is hidden is whether the user went on after the last click:
    the results below it (``page_b``, ``row_b``: index among the pages with a click, and row) were
    then examined and skipped, or never examined. ``last_r`` and ``last_row`` are the position
    (``<= K``) and row of each clicked page's last click.
    """
    clicked = (C > 0) & mask
    last = _last_click(C, mask)
    has = last >= 0
    cols = np.arange(C.shape[1])[None, :]
    fixed = mask & ((cols <= last[:, None]) | ~has[:, None])
    below = mask & (cols > last[:, None]) & has[:, None]
    is_last = clicked & (cols == last[:, None])
    r = np.minimum(pos, K)
    rank_of_page = np.cumsum(has) - 1              # index of each clicked page among the clicked pages
    page_b = rank_of_page[np.nonzero(below)[0]]
    on_last = np.flatnonzero(has), last[has]
    return {"clicks_row": np.bincount(R[clicked], minlength=n_rows).astype(np.float64),
            "skips_row": np.bincount(R[fixed & ~clicked], minlength=n_rows).astype(np.float64),
            "den_r": np.bincount(R[mask], minlength=n_rows).astype(np.float64),
            "clicks_at": np.bincount(r[clicked] - 1, minlength=K).astype(np.float64),
            "sure_go": np.bincount(r[clicked & ~is_last] - 1, minlength=K).astype(np.float64),
            "sure_go_row": np.bincount(R[clicked & ~is_last], minlength=n_rows).astype(np.float64),
            "last_r": r[on_last], "last_row": R[on_last], "page_b": page_b, "row_b": R[below],
            "n_pages": int(has.sum()), "n_items": max(int(mask.sum()), 1)}


def dcm_counts(R, C, mask, pos, n_rows, K, s):
    """DCM in closed form by counting (Guo, Liu and Wang 2009; Chuklin et al. 2015, sec. 4.2, DCM).

    Assume, with the original paper and PyClick, that the user examined every result down to the
    last click ``l`` and stopped there (nothing below ``l`` examined). The likelihood then becomes
    ``prod_{j <= l} alpha_j^C_j (1 - alpha_j)^(1 - C_j) prod_{j < l, C_j = 1} lambda_{r_j}
    (1 - lambda_{r_l})``, a lower bound of the DCM likelihood of sec. 3.5 (its last factor,
    ``1 - lambda + lambda prod_{j > l} (1 - alpha_j)``, is at least ``1 - lambda``), maximised in
    closed form by

    * ``alpha_qd = (clicks + s mu) / (impressions at or above the last click + s)`` (every result of
      a page without clicks counts; ``mu`` the pooled rate, ``s`` the Beta prior's strength);
    * ``lambda_r = (clicks at r that are not a page's last) / (clicks at r)`` (0.5 without clicks at r).

    Returns the same dict as :func:`dcm_em` (``n_iter`` 1).
    """
    k = _last_click_counts(R, C, mask, pos, n_rows, K)
    alpha, mu = _map(k["clicks_row"], k["clicks_row"] + k["skips_row"], s)
    lam = np.where(k["clicks_at"] > 0, np.clip(k["sure_go"] / np.maximum(k["clicks_at"], 1), _EPS, 1 - _EPS), 0.5)
    return {"alpha": alpha, "lam": lam, "mu": mu, "n_iter": 1, "converged": True, "history": []}


def sdbn_counts(R, C, mask, pos, n_rows, K, s):
    """SDBN in closed form by counting (Chapelle and Zhang 2009; Chuklin et al. 2015, sec. 4.2, SDBN).

    With ``gamma = 1`` and the user assumed to stop at the last click (satisfied there, nothing below
    examined) every hidden variable is known, and the maximum (a posteriori, Beta prior of ``s``
    pseudo-observations at the pooled rates) is

    * ``alpha_qd = (clicks + s mu) / (impressions at or above the last click + s)`` (all of a page
      without clicks);
    * ``sigma_qd = (last clicks of a page on the pair + s mu_s) / (clicks on the pair + s)``.

    It maximises ``prod_{j <= l} alpha_j^C_j (1 - alpha_j)^(1 - C_j) prod_{j < l, C_j = 1} (1 - sigma_j)
    sigma_l``, a lower bound of the SDBN likelihood (whose last factor is
    ``sigma_l + (1 - sigma_l) prod_{j > l} (1 - alpha_j)``). Returns the dict of :func:`sdbn_em`.
    """
    k = _last_click_counts(R, C, mask, pos, n_rows, K)
    alpha, mu = _map(k["clicks_row"], k["clicks_row"] + k["skips_row"], s)
    sigma, mu_s = _map(k["clicks_row"] - k["sure_go_row"], k["clicks_row"], s)
    return {"alpha": alpha, "sigma": sigma, "gamma": 1.0, "mu": mu, "mu_sigma": mu_s, "n_iter": 1,
            "converged": True, "history": []}


class _Rates:
    """Beta-prior MAP rates (``_map``) of which only the ``active`` rows' numerators change between EM steps.

    Every other row's rate depends on the step only through the pooled mean ``mu``; those rows are
    kept as the distinct (numerator, denominator) pairs with their multiplicities, so that a step
    costs the active rows and a few dozen pairs, not every row of the log. ``ones``/``zeros`` weigh
    ``log rate`` and ``log(1 - rate)`` in the log-likelihood (the rest rows: ``num`` and ``den - num``).
    """

    def __init__(self, num, den, ones, zeros, active, s):
        self.num, self.den, self.active, self.s = num, den, active, s
        self.num_a, self.den_a, self.ones_a, self.zeros_a = num[active], den[active], ones[active], zeros[active]
        rest = np.ones(num.size, dtype=bool)
        rest[active] = False
        width = int(den.max(initial=0)) + 1
        key, first, count = np.unique(num[rest].astype(np.int64) * width + den[rest].astype(np.int64),
                                      return_index=True, return_counts=True)
        self.g_num, self.g_den, self.g_w = (key // width).astype(np.float64), (key % width).astype(np.float64), count
        self.g_rep = np.flatnonzero(rest)[first]        # one row of each pair
        self.num_total, self.den_total = float(num.sum()), max(float(den.sum()), _EPS)

    def split(self, full):
        """Rates of every row (equal within a pair) as (active rows', pairs')."""
        return full[self.active], full[self.g_rep]

    def _rate(self, num, den, mu):
        return np.clip((num + self.s * mu) / np.maximum(den + self.s, _EPS), _EPS, 1 - _EPS)

    def update(self, extra):
        """The active rows' rates, the rest pairs' rates and ``mu``, the numerators of the active rows raised by ``extra``."""
        mu = min(max((self.num_total + float(extra.sum())) / self.den_total, _EPS), 1 - _EPS)
        return self._rate(self.num_a + extra, self.den_a, mu), self._rate(self.g_num, self.g_den, mu), mu

    def loglik(self, a, g):
        return float((self.ones_a * np.log(a) + self.zeros_a * np.log1p(-a)).sum()
                     + (self.g_w * (self.g_num * np.log(g) + (self.g_den - self.g_num) * np.log1p(-g))).sum())

    def full(self, a, mu):
        """The rates of every row (the rest at ``mu``)."""
        out = self._rate(self.num, self.den, mu)
        out[self.active] = a
        return out


def _squarem(step, x, max_iter, tol):
    """EM steps ``x, loglik = step(x)`` accelerated by SQUAREM until the log-likelihood changes by less than ``tol``.

    Varadhan and Roland (2008), as in ``_click_em.pbm_em``: from ``x`` two EM steps ``x1``, ``x2``,
    ``r = x1 - x``, ``v = x2 - 2 x1 + x``, the extrapolated point ``x' = x - 2 a r + a^2 v`` with
    ``a = -|r| / |v|`` (kept inside (0, 1)) and one EM step from it, kept when ``x'`` is no worse
    than ``x1``; otherwise the cycle ends at ``x2``. So the log-likelihood at the start of every
    cycle (``history``) never falls. ``x`` is a tuple; its arrays are extrapolated, its floats (the
    pooled means, outputs of a step) are not. ``max_iter`` counts EM steps; the answer is the
    EM step from the last point whose log-likelihood met ``tol``.
    """
    history, it = [], 0
    while it < max_iter:
        x1, loglik = step(x)
        it += 1
        history.append(loglik)
        if len(history) > 1 and abs(loglik - history[-2]) < tol:
            return x1, it, True, history
        if it >= max_iter:
            return x1, it, False, history
        x2, loglik1 = step(x1)
        it += 1
        arrays = [i for i, e in enumerate(x) if isinstance(e, np.ndarray)]
        r = [x1[i] - x[i] for i in arrays]
        v = [x2[i] - 2 * x1[i] + x[i] for i in arrays]
        a = -np.sqrt(sum(float(np.square(e).sum()) for e in r) / max(sum(float(np.square(e).sum()) for e in v), 1e-300))
        far = list(x2)
        for i, ri, vi in zip(arrays, r, v):
            far[i] = np.clip(x[i] - 2 * a * ri + a * a * vi, _EPS, 1 - _EPS)
        x = x2
        if a < -1 and it < max_iter:
            x3, loglik_far = step(tuple(far))
            it += 1
            if loglik_far >= loglik1:
                x = x3
    return x, it, False, history


def _continuation_em(k, cont, s, max_iter, tol):
    """EM over the one hidden event of DCM and SDBN: did the user go on after the last click?

    ``cont`` gives the probability ``c`` of going on after each clicked page's last click
    (``cont.at(params)``), its M-step from the posteriors ``q`` (``cont.m_step``) and the
    log-probability of the continuations that are sure (``cont.loglik``). With
    ``T = prod_{j > l} (1 - alpha_j)`` the page's factor below the last click ``l`` is
    ``Z = 1 - c + c T`` and the posterior of having gone on ``q = c T / Z``; E-step of a result below
    ``l``: ``P(A = 1 | clicks) = (1 - q) alpha``. A step visits only the pages with a click, the
    results below their last click and the rows shown there (``_Rates``); every other count is fixed
    (:func:`_last_click_counts`). Accelerated by :func:`_squarem`.
    """
    active, row_b = np.unique(k["row_b"], return_inverse=True)
    rates = _Rates(k["clicks_row"], k["den_r"], k["clicks_row"], k["skips_row"], active, s)
    page_b, n_pages, n_items = k["page_b"], k["n_pages"], k["n_items"]

    def step(x):
        alpha, rest, _, params = x[0], x[1], x[2], x[3:]
        a_b = alpha[row_b]
        T = np.exp(np.bincount(page_b, weights=np.log1p(-a_b), minlength=n_pages))
        c = cont.at(params)
        Z = np.maximum(1 - c + c * T, _EPS)
        q = c * T / Z
        loglik = (rates.loglik(alpha, rest) + cont.loglik(params) + float(np.log(Z).sum())) / n_items
        new = rates.update(np.bincount(row_b, weights=(1 - q[page_b]) * a_b, minlength=active.size))
        return (*new, *cont.m_step(params, q)), loglik

    # EM starts from the counts, with at least one pseudo-observation (no alpha at 0 or 1).
    start, mu = _map(k["clicks_row"], k["clicks_row"] + k["skips_row"], max(s, 1.0))
    x, it, converged, history = _squarem(step, (*rates.split(start), mu, *cont.start()), max_iter, tol)
    return rates.full(x[0], x[2]), x[3:], x[2], it, converged, history


class _Lambda:
    """DCM's continuation ``lambda_r`` after a click at position ``r`` (M-step: expected goings-on / clicks)."""

    def __init__(self, k, K):
        self.clicks_at, self.sure_go, self.idx, self.K = k["clicks_at"], k["sure_go"], k["last_r"] - 1, K

    def start(self):
        return (np.where(self.clicks_at > 0, np.clip(self.sure_go / np.maximum(self.clicks_at, 1), 0.05, 0.95), 0.5),)

    def at(self, params):
        return params[0][self.idx]

    def loglik(self, params):
        return float((self.sure_go * np.log(params[0])).sum())

    def m_step(self, params, q):
        go = self.sure_go + np.bincount(self.idx, weights=q, minlength=self.K)
        return (np.where(self.clicks_at > 0, np.clip(go / np.maximum(self.clicks_at, _EPS), _EPS, 1 - _EPS),
                         params[0]),)


class _Satisfaction:
    """SDBN's satisfaction ``sigma_qd`` of the last clicked pair (M-step: mean ``P(S = 1 | clicks)`` over its clicks).

    Its parameters: the satisfaction of the last-clicked rows, of the other rows' (clicks,
    non-last clicks) pairs (``_Rates``), and the pooled mean.
    """

    def __init__(self, k, s):
        clicks, sure = k["clicks_row"], k["sure_go_row"]
        active, self.idx = np.unique(k["last_row"], return_inverse=True)
        self.rates = _Rates(np.zeros_like(clicks), clicks, np.zeros_like(clicks), sure, active, s)
        self.start_value = _map(clicks - sure, clicks, max(s, 1.0))
        self.n_active = active.size

    def start(self):
        full, mu = self.start_value
        return (*self.rates.split(full), mu)

    def at(self, params):
        return 1 - params[0][self.idx]

    def loglik(self, params):
        return self.rates.loglik(*params[:2])

    def m_step(self, params, q):
        return self.rates.update(np.bincount(self.idx, weights=1 - q, minlength=self.n_active))

    def full(self, params):
        return self.rates.full(params[0], params[2]), params[2]


def dcm_em(R, C, mask, pos, n_rows, K, s, max_iter, tol):
    """DCM by EM (sec. 4.3): attractiveness ``alpha_qd`` and continuation after a click ``lambda_r``.

    Up to a page's last click ``l`` every result was examined; below it the only hidden event is
    whether the user went on after that click (probability ``lambda_{r_l}``), and then examined and
    skipped everything below. Its posterior is
    ``q = lambda T / (1 - lambda + lambda T)`` with ``T = prod_{j > l} (1 - alpha_j)``. E-step:
    ``P(A_j = 1 | clicks) = C_j`` for ``j <= l`` (every result of a page without clicks) and
    ``(1 - q) alpha_j`` below; M-step: ``alpha`` their mean per row (Beta prior as in ``_map``),
    ``lambda_r`` = (clicks at ``r`` that are not a page's last + ``q`` of last clicks at ``r``) / clicks
    at ``r``. The session likelihood is ``prod_{j <= l} alpha^C (1 - alpha)^(1 - C) prod_{j < l, C_j = 1}
    lambda_{r_j} (1 - lambda_{r_l} + lambda_{r_l} T)`` (sec. 3.5). EM starts from :func:`dcm_counts`
    (``alpha`` with at least one pseudo-observation, ``lambda`` clipped to [0.05, 0.95]).
    """
    k = _last_click_counts(R, C, mask, pos, n_rows, K)
    alpha, (lam,), mu, it, converged, history = _continuation_em(k, _Lambda(k, K), s, max_iter, tol)
    return {"alpha": alpha, "lam": lam, "mu": mu, "n_iter": it, "converged": converged, "history": history}


def sdbn_em(R, C, mask, pos, n_rows, K, s, max_iter, tol):
    """SDBN by EM (sec. 4.3): the DBN with ``gamma = 1``, so that a user goes on after a click unless satisfied.

    The same hidden event as in :func:`dcm_em`, with ``1 - sigma_qd`` of the last clicked pair in
    place of ``lambda``: below the last click ``l`` either the user was satisfied there (probability
    ``sigma_l``) or examined and skipped every result down to the page's end. ``P(S_l = 1 | clicks) =
    sigma_l / (sigma_l + (1 - sigma_l) T)``; every other click left the user unsatisfied. M-step:
    ``alpha`` as in the DCM, ``sigma_qd`` the mean of ``P(S = 1 | clicks)`` over the pair's clicks
    (Beta prior as in ``_map``). The fixed point is :func:`dbn_em`'s with ``fix_gamma=1`` (the DBN's
    forward-backward pass reduces to this one factor when ``gamma = 1``); EM starts from
    :func:`sdbn_counts`.
    """
    k = _last_click_counts(R, C, mask, pos, n_rows, K)
    sat = _Satisfaction(k, s)
    alpha, params, mu, it, converged, history = _continuation_em(k, sat, s, max_iter, tol)
    sigma, mu_s = sat.full(params)
    return {"alpha": alpha, "sigma": sigma, "gamma": 1.0, "mu": mu, "mu_sigma": mu_s, "n_iter": it,
            "converged": converged, "history": history}


def dbn_em(R, C, mask, n_rows, s, max_iter, tol, *, fix_gamma=None):
    """DBN by EM (sec. 4.3; SDBN: ``fix_gamma=1``): ``alpha_qd``, satisfaction ``sigma_qd``, continuation ``gamma``.

    Up to the last click ``l`` every result was examined and every click but the last left the user
    unsatisfied. Below ``l`` a forward-backward pass over the skipped results gives the posterior of
    examination: with ``N_j = P(no click at j.. | E_j = 1) = (1 - alpha_j) (1 - gamma + gamma N_{j+1})``
    (``N`` past the page's end is 1), the prior of examining ``l + 1``, ``e0 = gamma (1 - sigma_l)``
    (1 on a page without clicks, from the first result), ``Z = 1 - e0 + e0 N_{l+1}`` (``N_1`` without
    clicks) and the forward ``f_{l+1} = e0``, ``f_{j+1} = f_j (1 - alpha_j) gamma``:
    ``P(E_j = 1 | clicks) = f_j N_j / Z`` and ``P(S_l = 1 | clicks) = sigma_l / Z``. M-step:
    ``alpha`` the mean of ``P(A_j = 1 | clicks)`` (``C_j`` above ``l``, ``(1 - P(E_j = 1)) alpha_j`` below),
    ``sigma`` the mean of ``P(S = 1)`` over clicks, ``gamma`` expected transitions
    ``sum P(E_{j+1} = 1) / sum P(E_j = 1, S_j = 0)`` over consecutive shown results. The session
    likelihood is ``prod_{j <= l} alpha^C (1 - alpha)^(1 - C) gamma^l prod_{j < l, C_j = 1} (1 - sigma_j) Z``.
    """
    S, L = C.shape
    clicked = (C > 0) & mask
    last = _last_click(C, mask)
    has = last >= 0
    cols = np.arange(L)[None, :]
    above = mask & (cols <= last[:, None])
    below = mask & (cols > last[:, None])
    is_last = clicked & (cols == last[:, None])
    den_r = np.bincount(R[mask], minlength=n_rows).astype(np.float64)
    den_s = np.bincount(R[clicked], minlength=n_rows).astype(np.float64)
    n_items = max(int(mask.sum()), 1)
    nxt = np.zeros_like(mask)
    nxt[:, :-1] = mask[:, 1:]                # a shown result follows
    idx = np.arange(S)
    start = (np.full(n_rows, 0.2), np.full(n_rows, 0.5), 0.9 if fix_gamma is None else float(fix_gamma))

    def step(x):
        alpha, sigma, g = x
        A = np.where(mask, alpha[R], 0.0)
        Sg = np.where(mask, sigma[R], 0.0)
        N = np.ones((S, L + 1))
        for j in range(L - 1, -1, -1):
            N[:, j] = np.where(mask[:, j], (1 - A[:, j]) * (1 - g + g * N[:, j + 1]), 1.0)
        sig_l = Sg[idx, np.maximum(last, 0)]
        e0 = np.where(has, g * (1 - sig_l), 1.0)
        Z = np.where(has, 1 - e0 + e0 * N[idx, last + 1], N[idx, 0])
        f = np.zeros((S, L))
        cur = e0.copy()
        for j in range(L):
            at = below[:, j]
            f[:, j] = np.where(at, cur, 0.0)
            cur = np.where(at, cur * (1 - A[:, j]) * g, cur)
        ex = np.where(above, 1.0, np.where(below, f * N[:, :L] / np.maximum(Z, _EPS)[:, None], 0.0))
        sat = np.where(is_last, (sig_l / np.maximum(Z, _EPS))[:, None], 0.0)
        ll_above = np.where(above, np.where(C > 0, np.log(np.maximum(A, _EPS)), np.log(np.maximum(1 - A, _EPS))), 0.0)
        ll_sat = np.where(clicked & ~is_last, np.log(np.maximum(1 - Sg, _EPS)), 0.0)
        loglik = (ll_above.sum(axis=1) + ll_sat.sum(axis=1) + np.maximum(last, 0) * np.log(max(g, _EPS))
                  + np.log(np.maximum(Z, _EPS)))
        loglik = float(loglik.sum() / n_items)
        post_a = np.where(above, C, np.where(below, (1 - ex) * A, 0.0))
        alpha, mu_a = _map(np.bincount(R[mask], weights=post_a[mask], minlength=n_rows), den_r, s)
        sigma, mu_s = _map(np.bincount(R[clicked], weights=sat[clicked], minlength=n_rows), den_s, s)
        step.mu = (mu_a, mu_s)
        if fix_gamma is None:
            ex_next = np.zeros((S, L))
            ex_next[:, :-1] = ex[:, 1:]
            num = float(np.where(nxt, ex_next, 0.0).sum())
            den = float(np.where(nxt, ex - sat, 0.0).sum())
            g = min(max(num / max(den, _EPS), _EPS), 1.0)
        return (alpha, sigma, g), loglik

    (alpha, sigma, g), it, converged, history = _loop(step, start, max_iter, tol)
    return {"alpha": alpha, "sigma": sigma, "gamma": g, "mu": step.mu[0], "mu_sigma": step.mu[1], "n_iter": it,
            "converged": converged, "history": history}
