"""A feature table from a raw log's impressions alone, for a log that comes without features.

A real log often arrives as ids only (query, document, position, click). What a search engine knew
of each shown (query, document) before any click is how it was shown: how high the logger placed
it on average, how often, and on what share of the query's pages. :func:`impression_features`
turns one or more raw frames into that table, keyed by the ids, for
:meth:`~counterfactual_ltr.logs.clicklog.ClickLog.with_data`. It reads positions and pages, never
clicks, so a ranker fitted on it learns from the clicks without seeing them in its features.
"""

from __future__ import annotations

import numpy as np

__all__ = ["impression_features"]


def impression_features(*frames, query="query", doc="doc", position="position", page="page"):
    """Per (query, document) shown in ``frames``: ``log_shown``, ``page_share`` and ``neg_position``.

    * ``log_shown``: ``log(1 + n)``, ``n`` the times it was shown;
    * ``page_share``: the share of its query's pages that show it;
    * ``neg_position``: minus its mean position (higher: the logger placed it higher).

    Pages are told apart per frame, so several files (train, test, ...) pool their impressions
    without their page ids colliding.

    Parameters
    ----------
    *frames : pandas DataFrame
        Raw logs, one row per shown result, with the columns named below (``click`` is not read).
    query, doc, position, page : str
        The columns of the query id, document id, position (1 = top) and page (session) id.

    Returns
    -------
    pandas DataFrame
        Columns ``query``, ``doc`` (as named), ``log_shown``, ``page_share``, ``neg_position``.

    Raises
    ------
    ValueError
        Without frames, or when a frame lacks one of the columns.

    Examples
    --------
    >>> import pandas as pd
    >>> log = pd.DataFrame({"page": [1, 1, 2, 2], "query": ["q", "q", "q", "q"], "doc": ["a", "b", "b", "a"],
    ...                     "position": [1, 2, 1, 2], "click": [1, 0, 0, 0]})
    >>> impression_features(log).round(3).to_dict("list")        # doctest: +NORMALIZE_WHITESPACE
    {'query': ['q', 'q'], 'doc': ['a', 'b'], 'log_shown': [1.099, 1.099], 'page_share': [1.0, 1.0],
     'neg_position': [-1.5, -1.5]}
    """
    import pandas as pd

    if not frames:
        raise ValueError("impression_features needs at least one raw log frame")
    columns = [page, query, doc, position]
    for i, frame in enumerate(frames):
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ValueError(f"impression_features: frame {i} lacks the columns {missing} (it has "
                             f"{list(frame.columns)}); name them with query=, doc=, position=, page=")
    rows = pd.concat([f[columns].assign(_part=i) for i, f in enumerate(frames)], ignore_index=True)
    rows["_page"] = rows["_part"].astype(str) + ":" + rows[page].astype(str)
    pages = rows.groupby(query)["_page"].nunique()
    table = rows.groupby([query, doc]).agg(mean_position=(position, "mean"), shown=(position, "size"),
                                           pages=("_page", "nunique")).reset_index()
    table["log_shown"] = np.log1p(table.pop("shown"))
    table["page_share"] = table.pop("pages") / table[query].map(pages).to_numpy()
    table["neg_position"] = -table.pop("mean_position")
    return table
