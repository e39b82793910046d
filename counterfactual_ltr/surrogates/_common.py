"""Input checks, the ``reduce`` convention and the parameter text shared by every surrogate of the package."""

from __future__ import annotations

import numpy as np

from .._docs import fill_doc
from .._segments import check_finite_1d, check_offsets

REDUCE_OPTIONS = ("sum", "mean", None)

# Parameter and return text the surrogates' docstrings share: a ``{name, ...}`` line is filled from it at import.
DOCS = {
    "scores": "scores : array (n_docs,)\n    Scores of all documents, queries back to back.",
    "labels": "labels : array (n_docs,)\n    Graded relevance labels >= 0.",
    "query_offsets": "query_offsets : array (n_queries + 1,)\n    Query boundaries (see ``docs/conventions.md``).",
    "reduce": 'reduce : {"sum", "mean", None}, default "sum"\n'
              "    Sum or mean over queries, or one loss per query (``grad`` is then the gradient of their sum).",
    "metric_params": '**metric_params\n    E.g. ``p`` for ``"rbp"``.',
    "returns": "Returns\n-------\nloss : float, or array (n_queries,) with ``reduce=None``\ngrad : array (n_docs,)\n"
               "    The (sub)gradient of the (summed) loss with respect to ``scores``.",
    "click_weights": "click_weights : array (n_docs,)\n    ``W_j`` per document.",
    "offsets": "query_offsets : array (n_queries + 1,)\n    Query boundaries.",
    # the per-query pieces of the pair sets (scores of their rows, and what a round returns)
    "row_scores": "scores : array (n_docs,)\n    Scores of the rows.",
    "lam": "lam : LambdaWeight\n    The rank weight (differentiable).",
    "margin": "margin : float\n    The hinges' margin.",
    "hessian": "hessian : bool\n    Whether to compute the curvature.",
    # the implicit pair sets' hinge sums
    "pair_scores": "scores : array (n_rows,)\n    Scores of the rows the pairs index.",
    "hinge_margin": "margin : float, default 1.0\n    The hinge's margin.",
    "round_returns": "Returns\n-------\nper_query : array (n_queries,)\ngrad : array (n_docs,)\n"
                     "hess : array (n_docs,) or None",
}
doc = fill_doc(DOCS)


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
