"""Input checks and the ``reduce`` convention shared by every surrogate of the package."""

from __future__ import annotations

import numpy as np

from .._segments import check_finite_1d, check_offsets

REDUCE_OPTIONS = ("sum", "mean", None)


def prepare(scores, labels, query_offsets):
    """Checked ``(offsets, scores, labels)``: finite float64 arrays matching the offsets."""
    offsets = check_offsets(query_offsets)
    n = int(offsets[-1])
    return offsets, check_finite_1d(scores, "scores", n), check_finite_1d(labels, "labels", n)


def check_reduce(reduce) -> None:
    if reduce not in REDUCE_OPTIONS:
        raise ValueError(f"reduce must be 'sum', 'mean' or None, got {reduce!r}")


def reduce_losses(per_query, grad, reduce, n_queries: int):
    """``(loss, grad)``: sum or mean over queries, or the per-query losses (``reduce=None``).

    ``grad`` is the gradient of the sum, divided by ``n_queries`` for the mean.
    """
    check_reduce(reduce)
    if reduce == "sum":
        return float(np.sum(per_query)), grad
    if reduce == "mean":
        return float(np.sum(per_query)) / n_queries, grad / n_queries
    return np.asarray(per_query, dtype=np.float64).reshape(n_queries), grad
