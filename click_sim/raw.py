"""Raw click logs as a search engine records them, simulated with known position bias.

:func:`simulate_raw_events` draws result pages of queries whose rankings drift between sessions
(each page ranks the query's documents by a fixed score plus fresh noise, so a document appears
at several positions), clicks from the position-based model ``P(click) = theta_rank alpha_qd``,
and writes them the way real logs come: string query ids, 64-bit document ids beyond ``2**32``,
no logger column, no features. It is the ground truth for tests and benchmarks of
``ClickLog.from_events``, ``estimate_propensities(log, "pbm" / "harvest")`` and the click models.
"""

from __future__ import annotations

import numpy as np

__all__ = ["simulate_raw_events"]


def simulate_raw_events(n_sessions: int, *, n_queries: int = 1000, n_shown: int = 10, theta=None,
                        drift: float = 1.0, session_ids: bool = True, shuffle: bool = False, random_state=None,
                        n_candidates: int | None = None):
    """A raw log of ``n_sessions`` result pages (one row per shown result) with known ``theta``.

    Every query has ``n_candidates`` documents (default ``n_shown``), each with an attractiveness
    ``alpha ~ Beta(1, 3)`` and a ranking score ``log alpha``; a page shows the top ``n_shown`` of
    them sorted by score plus ``drift`` times standard Gumbel noise (``drift = 0``: the same ranking
    every time, and candidates below ``n_shown`` are never shown). Queries are drawn with Zipf-like
    frequencies ``1 / (rank + 10)``, so many are rare, as in a real log.

    Parameters
    ----------
    n_sessions : int
        Result pages.
    n_queries : int, default 1000
        Distinct queries.
    n_shown : int, default 10
        Results per page.
    theta : array (n_shown,), optional
        Examination probability per position (default ``1 / r``).
    drift : float, default 1.0
        Scale of the ranking noise between sessions.
    session_ids : bool, default True
        Include a ``session`` column (page ids as strings); without it pages are consecutive rows.
    shuffle : bool, default False
        Shuffle the rows (needs ``session_ids``).
    random_state : int, Generator or None
        Seeds every draw.
    n_candidates : int, optional
        Documents per query, ``>= n_shown`` (default ``n_shown``: every page shows them all).

    Returns
    -------
    frame : pandas DataFrame
        ``[session,] query, doc, position, click``: query ids like ``"q17_ab"`` (str), document
        ids uint64 beyond ``2**32``.
    truth : dict
        ``theta``, ``alpha`` (per query x candidate), and the ids: ``query_ids`` (per query) and
        ``doc_ids`` (per query x candidate).

    Examples
    --------
    >>> frame, truth = simulate_raw_events(3, n_queries=2, n_shown=3, random_state=0)
    >>> list(frame.columns), len(frame), truth["theta"].round(2).tolist()
    (['session', 'query', 'doc', 'position', 'click'], 9, [1.0, 0.5, 0.33])
    """
    if shuffle and not session_ids:
        raise ValueError("shuffle=True needs session_ids=True: without a page column, pages are runs of rows")
    rng = np.random.default_rng(random_state)
    L = int(n_shown)
    theta = 1.0 / np.arange(1, L + 1) if theta is None else np.asarray(theta, dtype=np.float64)
    if theta.shape != (L,) or not np.all((theta > 0) & (theta <= 1)):
        raise ValueError(f"theta must hold {L} probabilities in (0, 1]")
    M = L if n_candidates is None else int(n_candidates)
    if M < L:
        raise ValueError(f"n_candidates ({M}) must be at least n_shown ({L})")
    alpha, query, shown = _pages(rng, n_sessions, n_queries, L, M, drift)
    clicks = rng.random((n_sessions, L)) < theta[None, :] * np.take_along_axis(alpha[query], shown, axis=1)
    frame, doc_ids, tags = _events(rng, query, shown, clicks, n_queries, M, session_ids, shuffle)
    return frame, {"theta": theta, "alpha": alpha, "query_ids": tags, "doc_ids": doc_ids}


def _pages(rng, n_sessions: int, n_queries: int, L: int, M: int, drift: float):
    """Attractiveness ``alpha ~ Beta(1, 3)`` per (query, candidate), each page's query and shown candidates.

    Queries come with Zipf-like frequencies ``1 / (rank + 10)``; a page shows the top ``L`` of the
    query's ``M`` candidates by ``log alpha`` plus ``drift`` times standard Gumbel noise.
    """
    alpha = rng.beta(1.0, 3.0, size=(n_queries, M))
    popularity = 1.0 / (np.arange(n_queries) + 10.0)
    query = rng.choice(n_queries, size=n_sessions, p=popularity / popularity.sum())
    noisy = np.log(alpha[query]) + drift * rng.gumbel(size=(n_sessions, M))
    shown = np.argsort(-noisy, axis=1)[:, :L]                 # candidate (0..M-1) at each position
    return alpha, query, shown


def _events(rng, query, shown, clicks, n_queries: int, M: int, session_ids: bool, shuffle: bool):
    """The pages as a raw event frame with real-log ids (string queries, document ids beyond ``2**32``)."""
    import pandas as pd

    n_sessions, L = shown.shape
    doc_ids = rng.integers(2**32, 2**63, size=(n_queries, M), dtype=np.int64).astype(np.uint64) + np.uint64(2**62)
    tags = np.array([f"q{q}_{rng.integers(1 << 16):x}" for q in range(n_queries)], dtype=object)
    columns = {"query": np.repeat(tags[query], L), "doc": doc_ids[query[:, None], shown].ravel(),
               "position": np.tile(np.arange(1, L + 1), n_sessions), "click": clicks.ravel().astype(np.int8)}
    if session_ids:
        columns = {"session": np.repeat(np.char.add("s", np.arange(n_sessions).astype(str)).astype(object), L),
                   **columns}
    frame = pd.DataFrame(columns)
    if shuffle:
        frame = frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)
    return frame, doc_ids, tags
