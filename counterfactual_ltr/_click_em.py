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
        Most EM iterations.
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
    skips = wn - wc
    shown_k = np.bincount(k - 1, weights=wn, minlength=K)
    shown_r = np.bincount(row, weights=wn, minlength=n_rows)
    total = max(wn.sum(), _EPS)
    # Each row's prior mean is the pooled attractiveness of the rows shown around the same place:
    # the logger's placement says how attractive a document tends to be, and a global prior mean
    # would pull the rarely seen documents ranked low up, and theta at low positions down with them.
    home = prior_group(row, k, wn, n_rows)
    home_shown = np.bincount(home, weights=shown_r, minlength=K)
    s = float(prior_strength)
    if start is None:
        ctr = np.bincount(k - 1, weights=wc, minlength=K) / np.maximum(shown_k, _EPS)
        theta = np.clip(ctr / max(ctr.max(), _EPS), 0.01, 1.0)
        alpha = np.full(n_rows, min(max(wc.sum() / total, 1e-3), 0.5))
    else:
        theta, alpha = start["theta"].copy(), start["alpha"].copy()
    previous = -np.inf
    converged = False
    mu = np.zeros(K)
    for it in range(1, max_iter + 1):   # the first pass always updates (previous = -inf), so mu is set
        t, a = theta[k - 1], alpha[row]
        p = np.clip(t * a, _EPS, 1 - _EPS)
        loglik = float((wc * np.log(p) + skips * np.log1p(-p)).sum() / total)
        if abs(loglik - previous) < tol:
            converged = True
            break
        previous = loglik
        e_skip = t * (1 - a) / (1 - p)
        a_skip = a * (1 - t) / (1 - p)
        if not fix_theta:
            theta = np.clip(np.bincount(k - 1, weights=wc + skips * e_skip, minlength=K)
                            / np.maximum(shown_k, _EPS), _EPS, 1.0)
        attracted = np.bincount(row, weights=wc + skips * a_skip, minlength=n_rows)
        mu = np.clip(np.bincount(home, weights=attracted, minlength=K) / np.maximum(home_shown, _EPS), _EPS, 1 - _EPS)
        alpha = np.clip((attracted + s * mu[home]) / np.maximum(shown_r + s, _EPS), _EPS, 1.0)
    return {"theta": theta, "alpha": alpha, "mu": mu, "n_iter": it, "converged": converged, "loglik": loglik}


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
