"""EM for the position-based click model over (row, position) cells, with a Beta prior on attractiveness.

``P(click at position k on row r) = theta_k alpha_r`` (Chuklin, Markov and de Rijke, Click Models
for Web Search, 2015, sec. 4.2): a click means the result was examined and attractive; a skip
leaves both latent. Over cells of impressions ``n`` and clicks ``c`` per (row, position), the
E-step's posteriors of a skip are

``P(E=1 | C=0) = theta (1 - alpha) / (1 - theta alpha)`` and
``P(A=1 | C=0) = alpha (1 - theta) / (1 - theta alpha)``,

and the M-step averages them (bincounts over the cells: no loop over rows or sessions).

EM run to convergence overfits the attractiveness of rarely shown rows (a row shown once and
clicked gets ``alpha = 1``, one shown once and skipped ``alpha`` near 0), which makes held-out
clicks on them improbable. The regularisation is a Beta prior: ``prior_strength`` pseudo-
impressions at a prior mean ``mu_g``, ``alpha_r = (sum_r E[A] + s mu_g) / (n_r + s)`` (a MAP step
of a Beta(s mu, s (1 - mu)) prior plus one in each parameter). The prior mean is empirical Bayes
by placement: ``g`` is the row's mean position (rounded), ``mu_g`` the pooled attractiveness of
the rows with that mean position, re-estimated every iteration. One global prior mean would bias
``theta``: the logger ranks unattractive documents low, a global mean pulls their rarely seen
``alpha`` up and ``theta`` at low positions down (measured in ``docs/real-logs-notes.md``). A row
never seen gets ``mu_g`` of the position it is shown at.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pbm_em", "prior_group"]

_EPS = 1e-10


def pbm_em(row, k, n, c, n_rows: int, K: int, *, weight=None, prior_strength: float = 1.0, max_iter: int = 200,
           tol: float = 1e-7, start=None, fix_theta: bool = False) -> dict:
    """Fit ``theta`` (K,) and ``alpha`` (n_rows,) to the cells; see the module docstring.

    Parameters
    ----------
    row, k : int arrays (n_cells,)
        Row (0 .. n_rows - 1) and position (1 .. K) of every cell.
    n, c : float arrays (n_cells,)
        Impressions and clicks of every cell.
    n_rows, K : int
        Numbers of rows and positions.
    weight : float array (n_cells,), optional
        A multiplicity per cell (bootstrap weights); default 1.
    prior_strength : float >= 0
        Pseudo-impressions of the Beta prior on every ``alpha``.
    max_iter : int
        Most EM steps (an accelerated cycle counts its steps).
    tol : float
        Stop when the mean log-likelihood per impression changes by less than this.
    start : dict, optional
        ``theta``, ``alpha`` to start from (a warm start).
    fix_theta : bool, default False
        Keep ``start["theta"]`` and fit ``alpha`` only.

    Returns
    -------
    dict
        ``theta``, ``alpha``, ``mu`` (K,: the prior mean of the rows whose mean position rounds
        to ``1..K``; unseen rows' attractiveness at that position), ``n_iter``,
        ``converged``, ``loglik`` (mean log-likelihood per weighted impression).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> theta, alpha = np.array([1.0, 0.5]), rng.uniform(0.2, 0.8, 300)
    >>> row, k = np.repeat(np.arange(300), 2), np.tile([1, 2], 300)
    >>> n = np.full(600, 200.0)
    >>> c = rng.binomial(200, theta[k - 1] * alpha[row]).astype(float)
    >>> fit = pbm_em(row, k, n, c, 300, 2, prior_strength=0.0)
    >>> round(float(fit["theta"][1] / fit["theta"][0]), 2)
    0.5
    """
    w = np.ones(len(n)) if weight is None else np.asarray(weight, dtype=np.float64)
    wn, wc = w * n, w * c
    shown_r = np.bincount(row, weights=wn, minlength=n_rows)
    # Each row's prior mean is the pooled attractiveness of the rows shown around the same place:
    # the logger's placement says how attractive a document tends to be, and a global prior mean
    # would pull the rarely seen documents ranked low up, and theta at low positions down with them.
    home = prior_group(row, k, wn, n_rows)
    step = _EMStep(row, k, wn, wc, n_rows, K, home, shown_r, float(prior_strength), fix_theta)
    if start is None:
        ctr = np.bincount(k - 1, weights=wc, minlength=K) / np.maximum(step.shown_k, _EPS)
        theta = np.clip(ctr / max(ctr.max(), _EPS), 0.01, 1.0)
        alpha = np.full(n_rows, min(max(wc.sum() / step.total, 1e-3), 0.5))
    else:
        theta, alpha = start["theta"].copy(), start["alpha"].copy()
    x = np.concatenate([theta, alpha])
    previous = -np.inf
    converged = False
    it = 0
    while it < max_iter:
        # SQUAREM (Varadhan and Roland, 2008): two EM steps, an extrapolation along them, one EM step
        # from there; kept only if it is no worse than the two plain steps (EM's slow ridge otherwise
        # takes thousands of steps on a sparse log).
        x1, loglik = step(x)
        x2, _ = step(x1)
        it += 2
        r, v = x1 - x, x2 - 2 * x1 + x
        length = -np.sqrt(float(np.square(r).sum()) / max(float(np.square(v).sum()), 1e-300))
        if length < -1:
            x3, ll3 = step(np.clip(x - 2 * length * r + length ** 2 * v, _EPS, 1.0))
            x4, ll4 = step(x2)
            it += 2
            x = x3 if ll3 >= ll4 else x4
        else:
            x = x2
        if abs(loglik - previous) < tol:
            converged = True
            break
        previous = loglik
    theta, alpha = x[:K], x[K:]
    return {"theta": theta, "alpha": alpha, "mu": step.prior_mean(x), "n_iter": it, "converged": converged,
            "loglik": loglik}


class _EMStep:
    """One EM step of the position-based model as a map of ``x = (theta, alpha)``; also its log-likelihood."""

    def __init__(self, row, k, wn, wc, n_rows, K, home, shown_r, s, fix_theta):
        self.row, self.k, self.wc, self.skips = row, k, wc, wn - wc
        self.n_rows, self.K, self.home, self.shown_r, self.s, self.fix_theta = n_rows, K, home, shown_r, s, fix_theta
        self.shown_k = np.bincount(k - 1, weights=wn, minlength=K)
        self.home_shown = np.bincount(home, weights=shown_r, minlength=K)
        self.total = max(wn.sum(), _EPS)

    def _attracted(self, x):
        t, a = x[:self.K][self.k - 1], x[self.K:][self.row]
        p = np.clip(t * a, _EPS, 1 - _EPS)
        loglik = float((self.wc * np.log(p) + self.skips * np.log1p(-p)).sum() / self.total)
        e_skip, a_skip = t * (1 - a) / (1 - p), a * (1 - t) / (1 - p)
        return e_skip, np.bincount(self.row, weights=self.wc + self.skips * a_skip, minlength=self.n_rows), loglik

    def _mu(self, attracted):
        return np.clip(np.bincount(self.home, weights=attracted, minlength=self.K)
                       / np.maximum(self.home_shown, _EPS), _EPS, 1 - _EPS)

    def __call__(self, x):
        """``(F(x), log-likelihood at x)``."""
        e_skip, attracted, loglik = self._attracted(x)
        theta = x[:self.K] if self.fix_theta else np.clip(
            np.bincount(self.k - 1, weights=self.wc + self.skips * e_skip, minlength=self.K)
            / np.maximum(self.shown_k, _EPS), _EPS, 1.0)
        mu = self._mu(attracted)
        alpha = np.clip((attracted + self.s * mu[self.home]) / np.maximum(self.shown_r + self.s, _EPS), _EPS, 1.0)
        return np.concatenate([theta, alpha]), loglik

    def prior_mean(self, x):
        return self._mu(self._attracted(x)[1])


def prior_group(row, k, n, n_rows: int) -> np.ndarray:
    """The prior group of every row: its impression-weighted mean position, rounded (0-based).

    Parameters
    ----------
    row, k : int arrays (n_cells,)
        Row and position (1-based) of every cell.
    n : float array (n_cells,)
        Impressions of every cell.
    n_rows : int
        Number of rows (a row without impressions gets group 0).

    Returns
    -------
    int64 array (n_rows,)

    Examples
    --------
    >>> import numpy as np
    >>> prior_group(np.array([0, 0, 1]), np.array([1, 4, 3]), np.array([1.0, 1.0, 2.0]), 3).tolist()
    [1, 2, 0]
    """
    shown = np.bincount(row, weights=n, minlength=n_rows)
    mean = np.bincount(row, weights=n * k, minlength=n_rows) / np.maximum(shown, _EPS)
    return np.maximum(np.rint(mean).astype(np.int64) - 1, 0)


# ----------------------------------------------------------------------------- Newton on the fixed point


def _alpha_given(theta, mu, row, k, wn, wc, n_rows, s, multi, multi_cells, alpha0=None):
    """The attractiveness that maximises each row's posterior for given ``theta`` and prior means.

    Row ``r``'s part of the log-posterior is concave in ``alpha``:
    ``f_r(a) = sum_cells [c log a + (n - c) log(1 - theta_k a)] + s mu log a + s (1 - mu) log(1 - a)``.
    With one cell (most rows of a real log), ``f_r'(a) = 0`` is the quadratic
    ``theta (A + B + D) a^2 - (A (1 + theta) + B theta + D) a + A = 0`` (``A = c + s mu``,
    ``B = n - c``, ``D = s (1 - mu)``), whose smaller root is the maximiser (written ``2A / (b + sqrt(b^2 - 4aA))``,
    exact at ``A = 0``). Rows with several cells: bracketed Newton on ``a f_r'(a)`` (decreasing, concave), vectorised.
    ``mu`` is per row (its group's prior mean). Returns alpha (n_rows,) and ``f_r''`` (n_rows,).
    """
    t = theta[k - 1]
    skips = wn - wc
    A = np.bincount(row, weights=wc, minlength=n_rows) + s * mu
    D = s * (1.0 - mu)
    # closed form with the row's impression-weighted theta (exact for one cell, a start for several)
    shown = np.bincount(row, weights=wn, minlength=n_rows)
    B = shown - (A - s * mu)
    t_row = np.bincount(row, weights=wn * t, minlength=n_rows) / np.maximum(shown, 1e-300)
    t_row = np.where(shown > 0, t_row, 1.0)
    qa = t_row * (A + B + D)
    qb = A * (1 + t_row) + B * t_row + D
    alpha = 2 * A / np.maximum(qb + np.sqrt(np.maximum(qb * qb - 4 * qa * A, 0.0)), 1e-300)
    alpha = np.where(qb > 0, alpha, 0.0)
    if multi.size:
        r, kk = row[multi_cells], t[multi_cells]
        sk = skips[multi_cells]
        index = np.searchsorted(multi, r)
        a = alpha[multi] if alpha0 is None else alpha0[multi]
        lo, hi = np.zeros(multi.size), np.ones(multi.size)
        for _ in range(50):
            a = np.clip(a, 1e-300, 1 - 1e-16)
            # Newton on a f'(a) = A - sum sk theta a / (1 - theta a) - D a / (1 - a): decreasing and concave,
            # so from the right of the root Newton's steps fall monotonically onto it (a few steps)
            ta = kk * a[index]
            g = A[multi] - np.bincount(index, weights=sk * ta / (1 - ta), minlength=multi.size) - D[multi] * a / (1 - a)
            h = -np.bincount(index, weights=sk * kk / (1 - ta) ** 2, minlength=multi.size) - D[multi] / (1 - a) ** 2
            lo, hi = np.where(g > 0, a, lo), np.where(g > 0, hi, a)
            step = -g / h
            # a step below the tolerance is taken as it is: the bracket tests below would read its
            # rounding as leaving the bracket and bisect away from a root already reached
            tiny = np.abs(step) <= 1e-12 * np.maximum(a, 1e-300)
            new = a + step
            # past the bracket's right end: continue from there (Newton from the right is monotone)
            new = np.where(new >= hi, np.where(hi < 1, hi, 0.5 * (lo + hi)), new)
            new = np.where(new <= lo, 0.5 * (lo + hi), new)
            done = tiny | (hi - lo <= 1e-12 * np.maximum(a, 1e-300))
            a = np.where(tiny, a + step, new)
            if done.all():
                break
        alpha[multi] = np.where(A[multi] > 0, a, 0.0)
    alpha = np.clip(alpha, 0.0, 1.0)
    a = np.clip(alpha, 1e-300, 1 - 1e-16)
    with np.errstate(divide="ignore", invalid="ignore"):   # alpha at a bound (no prior): h unused there
        h = -A / a ** 2 - np.bincount(row, weights=skips * t ** 2 / (1 - t * a[row]) ** 2, minlength=n_rows) \
            - D / (1 - a) ** 2
    return alpha, np.where(np.isfinite(h), h, 0.0)


class _Fixed:
    """The position-based model's stationarity conditions in ``(theta, mu)``, ``alpha`` profiled out."""

    def __init__(self, row, k, wn, wc, n_rows, K, home, s, mult):
        self.row, self.k, self.wn, self.wc, self.n_rows, self.K, self.home, self.s = row, k, wn, wc, n_rows, K, home, s
        self.mult, self.mc = mult, mult[row]      # rows standing for ``mult`` identical rows (see pbm_newton)
        self.skips = wn - wc
        self.shown_r = np.bincount(row, weights=wn, minlength=n_rows)
        self.shown_k = np.bincount(k - 1, weights=wn * self.mc, minlength=K)
        self.clicks_k = np.bincount(k - 1, weights=wc * self.mc, minlength=K)
        rows_per_group = np.bincount(home, weights=mult, minlength=K)
        self.denominator = np.bincount(home, weights=self.shown_r * mult, minlength=K) + s * rows_per_group
        cells_per_row = np.bincount(row, minlength=n_rows)
        self.multi = np.flatnonzero(cells_per_row > 1)
        self.multi_cells = np.flatnonzero(cells_per_row[row] > 1)
        # pairs of cells of one row (only rows shown at several positions have them): theta_k, theta_j cross terms
        mc = self.multi_cells[np.argsort(row[self.multi_cells], kind="stable")]
        starts = np.flatnonzero(np.r_[True, row[mc][1:] != row[mc][:-1]]) if mc.size else np.zeros(0, np.int64)
        from .._segments import within_query_pairs
        i, j = within_query_pairs(np.r_[starts, mc.size]) if mc.size else (np.zeros(0, np.int64),) * 2
        self.pair_a, self.pair_b = mc[i], mc[j]
        self.alpha = None

    def evaluate(self, theta, mu, jacobian=True):
        """Residuals ``(g_theta, r_mu)`` (scaled) and, with ``jacobian``, their derivatives (2K x 2K)."""
        K, s, row, k = self.K, self.s, self.row, self.k
        alpha, h = _alpha_given(theta, mu[self.home], row, k, self.wn, self.wc, self.n_rows, s, self.multi,
                                self.multi_cells, self.alpha)
        self.alpha = alpha
        t, a = theta[k - 1], alpha[row]
        one = np.maximum(1 - t * a, 1e-300)
        # d log-posterior / d theta_k; EM's step on theta is theta (1 - theta) grad / n_k
        grad = self.clicks_k / np.maximum(theta, 1e-300) - np.bincount(k - 1, weights=self.mc * self.skips * a / one,
                                                                        minlength=K)
        # the prior means' condition: mu_g (n_g + s m_g) = sum_{r in g} alpha_r (n_r + s)
        resid_mu = mu * self.denominator - np.bincount(self.home, weights=self.mult * alpha * (self.shown_r + s),
                                                      minlength=K)
        if not jacobian:
            return alpha, grad, resid_mu, None
        free_row = (alpha > 0) & (alpha < 1) & (h < 0)
        inv_h = np.where(free_row, 1.0 / np.where(h < 0, h, -1.0), 0.0)
        q = -self.skips / one ** 2                           # d^2 f_r / d alpha d theta_k of each cell
        da_dmu = -np.where(free_row, s / np.maximum(alpha * (1 - alpha), 1e-300), 0.0) * inv_h   # d alpha_r / d mu
        J = np.zeros((2 * K, 2 * K))
        cr = self.mc * (-self.wc / np.maximum(t, 1e-300) ** 2 - self.skips * a ** 2 / one ** 2)
        J[:K, :K] = np.diag(np.bincount(k - 1, weights=cr, minlength=K))
        # through alpha: - sum_r q_rk q_rj / f_r''
        J[:K, :K] -= np.diag(np.bincount(k - 1, weights=self.mc * q * q * inv_h[row], minlength=K))
        if self.pair_a.size:
            pa, pb = self.pair_a, self.pair_b
            J[:K, :K] -= np.bincount((k[pa] - 1) * K + k[pb] - 1, weights=q[pa] * q[pb] * inv_h[row[pa]],
                                     minlength=K * K).reshape(K, K)
        g = self.home[row]
        J[:K, K:] = np.bincount((k - 1) * K + g, weights=self.mc * q * da_dmu[row], minlength=K * K).reshape(K, K)
        J[K:, :K] = np.bincount(g * K + k - 1, weights=self.mc * (self.shown_r[row] + s) * q * inv_h[row],
                                minlength=K * K).reshape(K, K)
        J[K:, K:] = np.diag(self.denominator - np.bincount(self.home, weights=self.mult * (self.shown_r + s) * da_dmu,
                                                           minlength=K))
        return alpha, grad, resid_mu, J


def _merge_rows(row, k, wn, wc, home, n_rows):
    """Rows shown at one position only with the same (position, group, impressions, clicks), merged.

    Such rows are exchangeable: one alpha serves them all. On a real log most rows are such (shown
    once or twice), so they become classes with a multiplicity, and a Newton step costs hundreds of
    classes instead of tens of thousands of rows. Returns the reduced cells (row, position,
    impressions, clicks), each reduced row's group and multiplicity, and the reduced row of every
    original row (-1: never shown; such rows take their group's prior mean).
    """
    # Rows shown at one position only with the same (position, group, impressions, clicks) are
    # exchangeable: one alpha serves them all. On a real log most rows are such (shown once or twice),
    # so they are merged into classes with a multiplicity, and a step costs tens of classes instead of
    # tens of thousands of rows. Rows without a cell (never shown) take their group's prior mean.
    cells_per_row = np.bincount(row, minlength=n_rows)
    single = cells_per_row[row] == 1
    multi_rows = np.unique(row[~single])
    columns = (wc[single], wn[single], home[row[single]], k[single])
    order = np.lexsort(columns)
    sorted_columns = [col[order] for col in columns]
    first = np.r_[True, np.any([np.diff(col) != 0 for col in sorted_columns], axis=0)] if order.size else \
        np.zeros(0, dtype=bool)
    inverse = np.empty(order.size, dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    classes = np.stack([col[first] for col in sorted_columns[::-1]], axis=1) if order.size else np.zeros((0, 4))
    counts = np.bincount(inverse, minlength=classes.shape[0])
    n_single = classes.shape[0]
    reduced_of_row = np.full(n_rows, -1, dtype=np.int64)
    reduced_of_row[row[single]] = inverse
    reduced_of_row[multi_rows] = n_single + np.arange(multi_rows.size)
    r_row = np.r_[np.arange(n_single), reduced_of_row[row[~single]]]
    r_k = np.r_[classes[:, 0].astype(np.int64), k[~single]]
    r_wn, r_wc = np.r_[classes[:, 2], wn[~single]], np.r_[classes[:, 3], wc[~single]]
    r_home = np.r_[classes[:, 1].astype(np.int64), home[multi_rows]]
    mult = np.r_[counts.astype(np.float64), np.ones(multi_rows.size)]
    return r_row, r_k, r_wn, r_wc, r_home, mult, reduced_of_row


def _projected_step(J, grad, rmu, theta, fixed_theta, has_group, K):
    """Projected Newton step: a theta whose step would leave [0, 1] is set to the bound, joins the fixed
    set, and the others are solved again given it (at most K rounds)."""
    step = np.zeros(2 * K)
    for _ in range(K + 1):
        free = np.r_[~fixed_theta, has_group]
        rhs = -(np.r_[grad, rmu] + J[:, ~free] @ step[~free])
        step[free] = 0.0
        if free.any():
            sub = J[np.ix_(free, free)]
            try:
                step[free] = np.linalg.solve(sub, rhs[free])
            except np.linalg.LinAlgError:
                step[free] = np.linalg.lstsq(sub, rhs[free], rcond=1e-12)[0]
            if not np.all(np.isfinite(step)):
                step[free] = np.linalg.lstsq(sub, rhs[free], rcond=1e-12)[0]
        target = theta + step[:K]
        out_of_box = ~fixed_theta & ((target > 1.0) | (target < _EPS))
        if not out_of_box.any():
            break
        step[:K][out_of_box] = np.clip(target, _EPS, 1.0)[out_of_box] - theta[out_of_box]
        fixed_theta = fixed_theta | out_of_box
    return step


def pbm_newton(row, k, n, c, n_rows: int, K: int, *, weight=None, prior_strength: float = 1.0, max_iter: int = 100,
               tol: float = 1e-10, start=None, fix_theta: bool = False) -> dict:
    """The fixed point of :func:`pbm_em`, found by Newton's method on ``(theta, mu)`` with ``alpha`` profiled out.

    EM's fixed point solves ``d log-posterior / d theta_k = 0`` (or ``theta_k`` at a bound with the
    gradient pointing out), ``alpha_r`` = the maximiser of row ``r``'s posterior (one concave
    variable: closed form for a row shown at one position, see ``_alpha_given``) and the prior means'
    condition ``mu_g (n_g + s m_g) = sum_{r in g} alpha_r (n_r + s)`` (``n_g``: impressions of the rows
    of group ``g``, ``m_g`` their number). With ``alpha`` a function of ``(theta, mu)``, that is
    ``2K`` equations in ``2K`` unknowns; their Jacobian follows by implicit differentiation
    (``d alpha_r / d theta_k = -(d^2 f_r / d alpha d theta_k) / f_r''``, bincounts over the cells
    and over the pairs of cells of one row). A projected Newton step (positions at ``theta = 1``
    whose gradient points up, or at 0 pointing down, stay there) with step halving on the norm of
    the natural residual ``theta - clip(theta + theta grad / n_k, 0, 1)``, ``(mu - M(mu)) / (n_g + s m_g)``
    converges in a few steps where EM creeps along the ridge ``theta_k mu_k = const`` for thousands
    (EM's step on ``theta`` is ``theta (1 - theta) grad / n_k``: it vanishes at the bound, so EM
    also stops at ``theta = 1`` even where the gradient points down; this solver does not).

    Without a prior (``prior_strength = 0``) ``theta`` has a free scale; the largest start value
    is held at 1 (the likelihood is the same along the scale).

    Parameters and returns as :func:`pbm_em`; ``tol`` bounds the largest natural residual,
    ``max_iter`` the Newton steps. ``n_iter`` counts Newton steps. Left unsplit past 100 lines: the
    loop's state (point, residual, Jacobian, active set, step length, EM fallback, stall history) is
    shared by every part of a step; what stands alone is split out (``_merge_rows``,
    ``_projected_step``, ``_alpha_given``, ``_Fixed``).
    """
    w = np.ones(len(n)) if weight is None else np.asarray(weight, dtype=np.float64)
    wn, wc = w * n, w * c
    s = float(prior_strength)
    home = prior_group(row, k, wn, n_rows)
    r_row, r_k, r_wn, r_wc, r_home, mult, reduced_of_row = _merge_rows(row, k, wn, wc, home, n_rows)
    n_reduced = mult.size
    shown = reduced_of_row >= 0
    problem = _Fixed(r_row, r_k, r_wn, r_wc, n_reduced, K, r_home, s, mult)

    def expand(alpha_reduced, mu):
        return np.where(shown, alpha_reduced[np.maximum(reduced_of_row, 0)], mu[home])

    def reduce(alpha_full):
        out = np.zeros(n_reduced)
        out[reduced_of_row[shown]] = alpha_full[shown]
        return out

    warm_started = start is not None
    if start is None:
        warm = pbm_em(row, k, n, c, n_rows, K, weight=weight, prior_strength=s, max_iter=20, tol=0.0)
        theta, mu = warm["theta"].copy(), warm["mu"].copy()
    else:
        theta = np.asarray(start["theta"], dtype=np.float64).copy()
        mu = np.asarray(start["mu"], dtype=np.float64).copy() if "mu" in start else None
        if mu is None:
            shown_r = np.bincount(row, weights=wn, minlength=n_rows)
            denominator = np.bincount(home, weights=shown_r, minlength=K) + s * np.bincount(home, minlength=K)
            mu = np.clip(np.bincount(home, weights=np.asarray(start["alpha"]) * (shown_r + s), minlength=K)
                         / np.maximum(denominator, 1e-300), _EPS, 1 - _EPS)
        problem.alpha = reduce(np.asarray(start["alpha"], dtype=np.float64)) if "alpha" in start else None
    has_group = problem.denominator > 0
    pinned = np.zeros(K, dtype=bool)
    if fix_theta:
        pinned[:] = True
    elif s == 0:
        pinned[int(np.argmax(theta))] = True
        theta = theta / theta.max()
    if s == 0:
        has_group[:] = False          # the prior means do not enter alpha
    shown_k = np.maximum(problem.shown_k, 1e-300)

    def residual(theta, mu, jacobian):
        alpha, grad, rmu, J = problem.evaluate(theta, mu, jacobian)
        step_theta = theta * grad / shown_k
        nat = theta - np.clip(theta + step_theta, 0.0, 1.0)
        nat[pinned | (problem.shown_k == 0)] = 0.0
        rm = np.where(has_group, rmu / np.maximum(problem.denominator, 1e-300), 0.0)
        return alpha, grad, rmu, J, nat, rm

    alpha, grad, rmu, J, nat, rm = residual(theta, mu, True)
    merit = float(nat @ nat + rm @ rm)
    converged, it, stalls, max_stalls = False, 0, 0, 1 if warm_started else 5
    history = [merit]
    while it < max_iter:
        if max(np.max(np.abs(nat)), np.max(np.abs(rm))) <= tol:
            converged = True
            break
        it += 1
        # active set: theta at a bound with the gradient pointing out of the box, pinned, or never shown
        at_top = (theta >= 1.0) & (grad >= 0)
        at_bottom = (theta <= _EPS) & (grad <= 0)
        fixed_theta = pinned | at_top | at_bottom | (problem.shown_k == 0)
        step = _projected_step(J, grad, rmu, theta, fixed_theta, has_group, K)
        t = 1.0
        accepted = False
        for _ in range(12):
            theta_new = np.clip(theta + t * step[:K], _EPS, 1.0)
            mu_new = np.clip(mu + t * step[K:], _EPS, 1 - _EPS)
            out = residual(theta_new, mu_new, True)
            new_merit = float(out[4] @ out[4] + out[5] @ out[5])
            if new_merit < merit or new_merit == 0.0:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            stalls += 1
            if stalls > max_stalls:
                break
            # no Newton descent from here (far from the fixed point): EM steps, which always make progress
            inside = np.where((theta >= 1.0) & (grad < 0) & ~pinned, 1.0 - 1e-3, theta)
            fit = pbm_em(row, k, n, c, n_rows, K, weight=weight, prior_strength=s, max_iter=20, tol=0.0,
                         start={"theta": inside, "alpha": expand(alpha, mu)}, fix_theta=fix_theta)
            theta_new, mu_new = fit["theta"], fit["mu"]
            problem.alpha = reduce(fit["alpha"])
            if s == 0 and not fix_theta:
                theta_new = theta_new / theta_new[pinned][0]
            out = residual(theta_new, mu_new, True)
            new_merit = float(out[4] @ out[4] + out[5] @ out[5])
        theta, mu = theta_new, mu_new
        alpha, grad, rmu, J, nat, rm = out
        merit = new_merit
        # Newton converges in a handful of steps where the fixed point is regular; where the merit
        # falls by less than half over ten steps the fixed point is degenerate (a theta at its
        # bound with a vanishing gradient, several fixed points): stop and report it not converged.
        history.append(merit)
        if warm_started and len(history) > 10 and history[-1] > 0.5 * history[-11] and \
                max(np.max(np.abs(nat)), np.max(np.abs(rm))) > tol:
            break
    alpha = np.clip(expand(alpha, mu), _EPS, 1.0)
    p = np.clip(theta[k - 1] * alpha[row], _EPS, 1 - _EPS)
    loglik = float((wc * np.log(p) + (wn - wc) * np.log1p(-p)).sum() / max(wn.sum(), _EPS))
    return {"theta": theta, "alpha": alpha, "mu": mu, "n_iter": it, "converged": converged, "loglik": loglik}
