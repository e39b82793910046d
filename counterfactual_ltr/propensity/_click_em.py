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
