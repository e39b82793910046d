"""Clicks of cascade users: the cascade model, UBM, DCM, DBN and SDBN, with known parameters.

:func:`cascade_clicks` draws the clicks of a grid of pages from one of the models of
``counterfactual_ltr.click_models`` (Chuklin, Markov and de Rijke, Click Models for Web Search, 2015,
ch. 3), vectorised over pages with a loop over the ranks; :func:`simulate_cascade_events` wraps it
in the raw-log simulation of :mod:`click_sim.raw` (the same pages, drifting rankings and real-log
ids as :func:`click_sim.raw.simulate_raw_events`), so a log where the position-based assumption is
wrong comes with its ground truth.
"""

from __future__ import annotations

import numpy as np

from .raw import _events, _pages

__all__ = ["CASCADE_MODELS", "cascade_clicks", "simulate_cascade_events", "true_parameters"]

CASCADE_MODELS = ("cm", "ubm", "dcm", "dbn", "sdbn")


def _probabilities(value, name: str, shape=None) -> np.ndarray:
    value = np.asarray(value, dtype=np.float64)
    if shape is not None and value.shape != shape:
        raise ValueError(f"{name} has shape {value.shape}, expected {shape}")
    if not np.all(np.isfinite(value)) or np.any((value < 0) | (value > 1)):
        raise ValueError(f"{name} must hold probabilities in [0, 1]")
    return value


def cascade_clicks(model: str, alpha, *, sigma=None, gamma=None, lam=None, random_state=None) -> np.ndarray:
    """Clicks (S, L) of pages whose results have attractiveness ``alpha`` (S, L), top result first.

    * ``"cm"``: examine down until the first attractive result, click it, stop;
    * ``"dcm"``: after a click at rank ``r`` go on with probability ``lam[r - 1]`` (L,);
    * ``"dbn"``: after a click be satisfied with probability ``sigma`` (S, L) and stop; otherwise
      (and after a skip) go on with probability ``gamma`` (a float); ``"sdbn"``: ``gamma = 1``;
    * ``"ubm"``: examine rank ``r`` with probability ``gamma[r - 1, r']`` (L, L + 1), ``r'`` the rank
      of the last click above (0: none).

    Parameters
    ----------
    model : {"cm", "ubm", "dcm", "dbn", "sdbn"}
        The click model that draws the clicks.
    alpha : array (S, L)
        Attractiveness of every shown result, top result first.
    sigma : array (S, L), for ``"dbn"``/``"sdbn"``
        Satisfaction after a click on each result.
    gamma : float for ``"dbn"``; array (L, L + 1) for ``"ubm"``
        Perseverance (DBN), or examination by rank and last click above (UBM).
    lam : array (L,), for ``"dcm"``
        Probability of going on after a click at each rank.
    random_state : int, Generator or None
        Seeds every draw.

    Returns
    -------
    ndarray (S, L) bool

    Examples
    --------
    >>> import numpy as np
    >>> clicks = cascade_clicks("cm", np.full((1000, 3), 0.5), random_state=0)
    >>> int(clicks.sum(axis=1).max())
    1
    """
    if model not in CASCADE_MODELS:
        raise ValueError(f"model must be one of {CASCADE_MODELS}, got {model!r}")
    alpha = _probabilities(alpha, "alpha")
    if alpha.ndim != 2:
        raise ValueError(f"alpha must be 2-D (pages, ranks), got shape {alpha.shape}")
    S, L = alpha.shape
    rng = np.random.default_rng(random_state)
    if model in ("dbn", "sdbn"):
        if sigma is None:
            raise ValueError(f"model {model!r} needs sigma (satisfaction per page and rank)")
        sigma = _probabilities(sigma, "sigma", (S, L))
        if model == "sdbn":
            gamma = 1.0
        elif gamma is None or np.ndim(gamma) != 0:
            raise ValueError("model 'dbn' needs gamma, one probability")
        gamma = float(_probabilities(gamma, "gamma"))
    if model == "dcm":
        if lam is None:
            raise ValueError("model 'dcm' needs lam (continuation after a click, per rank)")
        lam = _probabilities(lam, "lam", (L,))
    if model == "ubm":
        if gamma is None:
            raise ValueError("model 'ubm' needs gamma (examination per rank and last clicked rank)")
        gamma = _probabilities(gamma, "gamma", (L, L + 1))
    attracted = rng.random((S, L)) < alpha
    go_on = rng.random((S, L))
    clicks = np.zeros((S, L), dtype=bool)
    examining = np.ones(S, dtype=bool)
    last = np.zeros(S, dtype=np.int64)
    for j in range(L):
        if model == "ubm":
            examining = go_on[:, j] < gamma[j, last]
        c = examining & attracted[:, j]
        clicks[:, j] = c
        if model == "ubm":
            last = np.where(c, j + 1, last)
        elif model == "cm":
            examining = examining & ~c
        elif model == "dcm":
            examining = np.where(c, go_on[:, j] < lam[j], examining)
        else:
            satisfied = c & (go_on[:, j] < sigma[:, j])
            examining = examining & ~satisfied & (rng.random(S) < gamma)
    return clicks


def simulate_cascade_events(n_sessions: int, model: str = "dbn", *, n_queries: int = 1000, n_shown: int = 10,
                            gamma=None, lam=None, drift: float = 1.0, session_ids: bool = True,
                            shuffle: bool = False, random_state=None, n_candidates: int | None = None):
    """A raw log of ``n_sessions`` pages with clicks from a cascade model, and its parameters.

    Pages as in :func:`click_sim.raw.simulate_raw_events` (``alpha ~ Beta(1, 3)`` per query and
    candidate, Zipf-like query frequencies, rankings by ``log alpha`` plus ``drift`` Gumbel noise);
    satisfaction ``sigma ~ Beta(2, 2)`` per query and candidate (DBN, SDBN). Defaults:
    DBN ``gamma = 0.9``; DCM ``lam_r = 0.9 - 0.05 (r - 1)`` clipped to [0.1, 1]; UBM
    ``gamma[r, r'] = 1 / (r - r')`` for ``r' >= 1`` and ``1 / r`` without a click above.

    Parameters
    ----------
    n_sessions : int
        Result pages.
    model : {"cm", "ubm", "dcm", "dbn", "sdbn"}, default "dbn"
        The click model of the users.
    n_queries, n_shown, drift, session_ids, shuffle, n_candidates
        As in :func:`click_sim.raw.simulate_raw_events`.
    gamma, lam : optional
        The model's position parameters (see :func:`cascade_clicks`).
    random_state : int, Generator or None
        Seeds every draw: the same seed gives the same log.

    Returns
    -------
    frame : pandas DataFrame
        ``[session,] query, doc, position, click``.
    truth : dict
        ``model``, ``alpha`` and ``sigma`` (per query x candidate), ``gamma``/``lam`` as used,
        ``query_ids``, ``doc_ids`` (per query x candidate).

    Examples
    --------
    >>> frame, truth = simulate_cascade_events(200, "cm", n_queries=5, n_shown=4, random_state=0)
    >>> int(frame.groupby("session")["click"].sum().max())
    1
    """
    if model not in CASCADE_MODELS:
        raise ValueError(f"model must be one of {CASCADE_MODELS}, got {model!r}")
    if shuffle and not session_ids:
        raise ValueError("shuffle=True needs session_ids=True: without a page column, pages are runs of rows")
    rng = np.random.default_rng(random_state)
    L = int(n_shown)
    M = L if n_candidates is None else int(n_candidates)
    if M < L:
        raise ValueError(f"n_candidates ({M}) must be at least n_shown ({L})")
    alpha, query, shown = _pages(rng, n_sessions, n_queries, L, M, drift)
    sigma = rng.beta(2.0, 2.0, size=(n_queries, M))
    r = np.arange(1, L + 1)
    if model == "dbn" and gamma is None:
        gamma = 0.9
    if model == "dcm" and lam is None:
        lam = np.clip(0.9 - 0.05 * (r - 1), 0.1, 1.0)
    if model == "ubm" and gamma is None:
        prev = np.arange(L + 1)[None, :]
        gamma = np.where(prev == 0, 1.0 / r[:, None], 1.0 / np.maximum(r[:, None] - prev, 1))
        gamma = np.where(prev < r[:, None], gamma, 0.0)      # entries with r' >= r never arise
    page_alpha = np.take_along_axis(alpha[query], shown, axis=1)
    page_sigma = np.take_along_axis(sigma[query], shown, axis=1)
    clicks = cascade_clicks(model, page_alpha, sigma=page_sigma, gamma=gamma, lam=lam, random_state=rng)
    frame, doc_ids, tags = _events(rng, query, shown, clicks, n_queries, M, session_ids, shuffle)
    return frame, {"model": model, "alpha": alpha, "sigma": sigma, "gamma": gamma, "lam": lam,
                   "query_ids": tags, "doc_ids": doc_ids}


def true_parameters(log, truth) -> dict:
    """The simulated ``alpha`` and ``sigma`` of every (query, document) row of a log read from the frame.

    Parameters
    ----------
    log : ClickLog
        A log built from :func:`simulate_cascade_events`'s frame (or a part of it) by
        ``ClickLog.from_events``: its rows are matched to the simulation by their ids.
    truth : dict
        The simulation's ``truth``.

    Returns
    -------
    dict
        ``alpha``, ``sigma``: arrays (n_rows,), in the order of ``log.row_keys()``.

    Examples
    --------
    >>> from counterfactual_ltr import ClickLog
    >>> frame, truth = simulate_cascade_events(50, "dbn", n_queries=4, n_shown=3, random_state=0)
    >>> log = ClickLog.from_events(frame, session="session")
    >>> true_parameters(log, truth)["alpha"].shape == (log.n_rows,)
    True
    """
    q, d = log.row_keys()
    where = {t: i for i, t in enumerate(truth["query_ids"])}
    try:
        qi = np.array([where[x] for x in q], dtype=np.int64)
    except KeyError as err:
        raise ValueError(f"query id {err.args[0]!r} of the log is not one of the simulation's") from None
    hit = truth["doc_ids"][qi] == np.asarray(d, dtype=np.uint64)[:, None]
    if not hit.any(axis=1).all():
        raise ValueError("a document id of the log is not one of its query's candidates in the simulation")
    cand = np.argmax(hit, axis=1)
    return {"alpha": truth["alpha"][qi, cand], "sigma": truth["sigma"][qi, cand]}
