"""Ranking metrics, rax-style: one signature, many queries at once.

Every metric has the signature::

    metric(scores, labels, query_offsets, *, k=None, reduce="mean", ...) -> float | ndarray
    metric(scores, labels, qid=qid, k=None, reduce="mean", ...)

``scores`` and ``labels`` are flat 1-D arrays of all documents and
``query_offsets`` delimits the queries (see ``docs/conventions.md``); or
``qid=`` gives the query id of every document instead (the rows of a query
contiguous, as in a LETOR file or ``RankingDataset.qid``).
``reduce="mean"`` / ``"sum"`` give a float, ``reduce=None`` one float64 value
per query. Everything is vectorised: the documents are sorted once and the
per-query sums are segment reductions (``np.bincount``).

Conventions
-----------
* **Ranking and ties.** Documents are sorted by decreasing score; tied scores
  keep row order inside the query (the earlier row ranks higher). Ranks are
  1-based. This is the one tie convention of the toolkit (:func:`ranks`).
* **Queries without relevant documents** (``no_relevant``). NDCG, AP and the
  mean relevant rank are undefined when a query has no relevant document. They
  then take the value ``no_relevant`` (a float; NDCG and AP default to 0.0 as
  the LETOR 4.0 evaluation script does), or, with ``no_relevant="skip"``, the
  query is left out of the mean / sum. With ``reduce=None`` and ``"skip"`` the
  skipped queries hold NaN in the per-query array (the only place a NaN can
  appear); the mean and sum never see it. If every query is skipped,
  ``ValueError``.
* **Binary relevance.** AP, Prec@k, RBP and the rank metrics use
  ``rel = labels >= threshold``.

Additive lambda-metrics
-----------------------
Table 1 of Agarwal et al. (2019), "A General Framework for Counterfactual
Learning-to-Rank", writes the metrics that are linear in the relevance as

.. math::  \\Delta(y) = \\sum_{d} \\lambda(\\mathrm{rank}(d)) \\, \\mathrm{rel}(d)

with a rank weight ``lambda`` in *risk* orientation (lower is better):

==========  ===========================  ========================
name        lambda(r)                    shape on real r >= 1
==========  ===========================  ========================
avg_rank    r                            affine (convex, concave)
dcg         -1 / log2(1 + r)             concave, increasing
prec@k      -1[r <= k] / k               step (not differentiable)
rbp         -(1 - p) p^(r - 1)           concave, increasing
==========  ===========================  ========================

The paper writes ``log`` without a base for DCG; base 2 only changes a
constant factor and matches :func:`dcg`. For RBP the paper prints
``-(1-p)/p^rank``, which grows without bound and is not RBP; the weight
consistent with ``RBP = (1-p) sum_i p^(i-1) rel_i`` (Moffat and Zobel, 2008)
is ``-(1-p) p^(r-1)``, used here.

:func:`get_lambda` returns a :class:`LambdaWeight` record (value, derivative,
convexity) used by the surrogates, the SVM / deep estimators and IPS evaluation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ._docs import fill_doc
from ._segments import (check_finite_1d, check_offsets, offsets_from_qid, order_within_queries, rank_within_queries,
                        segment_ids)
from ._validation import check_int, check_probability, check_real

__all__ = [
    "ranks",
    "dcg",
    "ndcg",
    "average_precision",
    "precision_at_k",
    "rbp",
    "avg_rank",
    "mean_relevant_rank",
    "additive_metric",
    "lambda_avg_rank",
    "lambda_avg_rank_derivative",
    "lambda_dcg",
    "lambda_dcg_derivative",
    "lambda_prec_at_k",
    "lambda_rbp",
    "lambda_rbp_derivative",
    "LambdaWeight",
    "LAMBDA_WEIGHTS",
    "get_lambda",
    "metric_weight",
    "LOWER_IS_BETTER",
]

_LN2 = math.log(2.0)

# Parameter and return text that many docstrings here share: a ``{name, ...}`` line is filled from it at import.
_DOCS = {
    "scores": "scores : array (n_docs,)\n    Scores of all documents (higher ranks first).",
    "labels": "labels : array (n_docs,)\n    Graded relevance labels >= 0.",
    "query_offsets": "query_offsets : array (n_queries + 1,), optional\n"
                     "    Query boundaries (see ``docs/conventions.md``); or give ``qid``.",
    "qid": "qid : array (n_docs,), optional\n"
           "    Query id of every document (a query's rows contiguous), instead of ``query_offsets``.",
    "k": "k : int >= 1, optional\n    Cutoff (default: the whole list).",
    "gain": 'gain : {"exp2", "linear"}, default "exp2"\n    Gain of a label ``y``: ``2**y - 1`` or ``y``.',
    "threshold": "threshold : float, default 1\n    ``rel = labels >= threshold``.",
    "no_relevant": 'no_relevant : float or "skip", default 0.0\n'
                   "    Value of a query without relevant documents, or leave it out.",
    "reduce": 'reduce : {"mean", "sum", None}, default "mean"\n'
              "    Mean or sum over the queries, or one value per query.",
    "returns": "Returns\n-------\nfloat, or array (n_queries,) with ``reduce=None``",
    "r_real": "r : array of ranks >= 1\n"
              "    Ranks (real numbers allowed: the surrogates evaluate them between integers).",
    "same_shape": "array, same shape as ``r``",
}
_DOCS["data"] = "\n".join(_DOCS[name] for name in ("scores", "labels", "query_offsets", "qid"))
# The rank weights ``lambda(r)``: their Parameters and Returns sections and the Examples heading.
_DOCS["r_sections"], _DOCS["r_p_sections"] = (
    f"Parameters\n----------\n{params}\n\nReturns\n-------\n{_DOCS['same_shape']}\n\nExamples\n--------"
    for params in ("r : array of ranks >= 1 (real-valued allowed)\n    Ranks, one weight each.",
                   _DOCS["r_real"] + "\np : float in (0, 1), default 0.8\n    Persistence of the RBP user model."))
_doc = fill_doc(_DOCS)


# ----------------------------------------------------------------------------- input handling


@dataclass(frozen=True)
class _Sorted:
    """The documents of all queries sorted once: query by query, best first."""

    offsets: np.ndarray  # validated query offsets
    seg: np.ndarray  # query of each sorted position (sorting keeps queries grouped)
    pos: np.ndarray  # 1-based rank of each sorted position
    labels: np.ndarray  # labels in sorted order

    @property
    def n_queries(self) -> int:
        return len(self.offsets) - 1

    def per_query(self, values) -> np.ndarray:
        """Sum of per-position ``values`` inside each query."""
        return np.bincount(self.seg, weights=values, minlength=self.n_queries)


def _query_offsets(query_offsets, qid, n_docs: int) -> np.ndarray:
    """Checked offsets from exactly one of ``query_offsets`` and ``qid`` (a query id per document)."""
    if (query_offsets is None) == (qid is None):
        raise ValueError("give either query_offsets (n_queries + 1 boundaries) or qid= (a query id per document)")
    if qid is not None:
        return offsets_from_qid(qid, n_docs)
    try:
        return check_offsets(query_offsets, n_docs)
    except ValueError as err:
        if np.ndim(query_offsets) == 1 and len(query_offsets) == n_docs:
            raise ValueError(f"{err}; this looks like a query id per document: pass it as qid=") from None
        raise


def _check_inputs(scores, labels, query_offsets, qid=None):
    s = check_finite_1d(scores, "scores")
    offsets = _query_offsets(query_offsets, qid, len(s))
    y = check_finite_1d(labels, "labels", len(s))
    bad = np.flatnonzero(y < 0)
    if bad.size:
        raise ValueError(f"labels must be >= 0; labels[{bad[0]}] = {y[bad[0]]}")
    return s, y, offsets


def _sort(scores, labels, query_offsets, qid=None) -> _Sorted:
    s, y, offsets = _check_inputs(scores, labels, query_offsets, qid)
    order = order_within_queries(s, offsets)
    seg = segment_ids(offsets)
    pos = np.arange(len(s)) - offsets[seg] + 1
    return _Sorted(offsets, seg, pos, y[order])


def _check_k(k, required: bool = False):
    if k is None:
        if required:
            raise ValueError("k must be a positive integer, got None")
        return None
    return check_int(k, "k", min_value=1)


def _cutoff(pos, k):
    """1 for ranks within the cutoff ``k`` (all ranks when ``k`` is None), else 0."""
    return np.ones(len(pos)) if k is None else (pos <= k).astype(np.float64)


def _relevant(labels, threshold) -> np.ndarray:
    threshold = check_real(threshold, "threshold")
    return (labels >= threshold).astype(np.float64)


def _check_p(p) -> float:
    return check_probability(p, "p", include_zero=False, include_one=False)


def _reduce(per_query, reduce, valid=None):
    """Apply ``reduce``; ``valid`` marks the queries that count (the others are skipped)."""
    per_query = np.asarray(per_query, dtype=np.float64)
    if reduce is None:
        if valid is None:
            return per_query
        return np.where(valid, per_query, np.nan)
    kept = per_query if valid is None else per_query[valid]
    if reduce == "mean":
        return float(kept.mean())
    if reduce == "sum":
        return float(kept.sum())
    raise ValueError(f"reduce must be 'mean', 'sum' or None, got {reduce!r}")


def _undefined(per_query, defined, no_relevant, reduce):
    """Apply the ``no_relevant`` convention to queries where ``defined`` is False, then reduce."""
    if isinstance(no_relevant, str):
        if no_relevant != "skip":
            raise ValueError(f"no_relevant must be a float or 'skip', got {no_relevant!r}")
        if reduce not in (None, "mean", "sum"):
            return _reduce(per_query, reduce)  # raises the reduce error
        if not defined.any():
            raise ValueError("no_relevant='skip' but no query has a relevant document: nothing to average")
        return _reduce(per_query, reduce, valid=defined)
    no_relevant = check_real(no_relevant, "no_relevant (a finite float or 'skip')")
    return _reduce(np.where(defined, per_query, no_relevant), reduce)


# ----------------------------------------------------------------------------- ranks


@_doc
def ranks(scores, query_offsets=None, *, qid=None) -> np.ndarray:
    """1-based rank of every document inside its query (int64, same order as ``scores``).

    Documents are sorted by decreasing score; ties keep row order (the earlier
    row ranks higher). This is the tie convention of every metric here.

    Parameters
    ----------
    {scores, query_offsets}
    qid : array (n_docs,), optional
        Query id of every document, instead of ``query_offsets``.

    Returns
    -------
    array (n_docs,) of int64

    Examples
    --------
    >>> ranks([0.5, 2.0, 0.5, 1.0, 3.0], [0, 3, 5]).tolist()
    [2, 1, 3, 2, 1]
    >>> ranks([0.5, 2.0, 0.5, 1.0, 3.0], qid=[7, 7, 7, 3, 3]).tolist()
    [2, 1, 3, 2, 1]
    """
    s = check_finite_1d(scores, "scores")
    offsets = _query_offsets(query_offsets, qid, len(s))
    return rank_within_queries(s, offsets)


# ----------------------------------------------------------------------------- graded metrics


def _gain(labels, gain):
    if gain == "exp2":
        return np.exp2(labels) - 1.0
    if gain == "linear":
        return labels
    raise ValueError(f"gain must be 'exp2' or 'linear', got {gain!r}")


def _dcg_per_query(srt: _Sorted, labels_sorted, k, gain):
    discount = _cutoff(srt.pos, k) / np.log2(srt.pos + 1.0)
    return srt.per_query(_gain(labels_sorted, gain) * discount)


@_doc
def dcg(scores, labels, query_offsets=None, *, qid=None, k=None, gain="exp2", reduce="mean"):
    """Discounted cumulative gain at ``k``.

    .. math::  DCG@k = \\sum_{i=1}^{\\min(k, m)} G(R_{\\pi(i)}) \\, D(i), \\quad D(i) = 1 / \\log_2(i + 1)

    with ``G(r) = 2^r - 1`` (``gain="exp2"``) or ``G(r) = r`` (``gain="linear"``),
    ``pi`` the ranking by decreasing score and ``k=None`` the whole list.

    Parameters
    ----------
    {data, k, gain, reduce, returns}

    Examples
    --------
    >>> # ranking: label 1, label 2, label 0 -> (2^1-1)/1 + (2^2-1)/log2(3)
    >>> round(dcg([3.0, 2.0, 1.0], [1, 2, 0], [0, 3]), 4)
    2.8928
    >>> dcg([3.0, 2.0, 1.0], [1, 2, 0], [0, 3], k=1, gain="linear")
    1.0
    """
    k = _check_k(k)
    srt = _sort(scores, labels, query_offsets, qid)
    return _reduce(_dcg_per_query(srt, srt.labels, k, gain), reduce)


@_doc
def ndcg(scores, labels, query_offsets=None, *, qid=None, k=None, gain="exp2", no_relevant=0.0, reduce="mean"):
    """Normalised DCG at ``k``: DCG@k divided by the DCG@k of the ideal ranking.

    .. math::  NDCG@k = DCG@k(s, R) / \\max_\\pi DCG@k(\\pi, R)

    The ideal ranking sorts the labels in decreasing order. A query whose
    labels are all 0 has no ideal gain: it gets ``no_relevant`` (default 0.0,
    as the LETOR 4.0 evaluation script), or is left out of the mean / sum with
    ``no_relevant="skip"`` (NaN in the per-query output of ``reduce=None``).

    Parameters
    ----------
    {data, k, gain, no_relevant, reduce, returns}

    Examples
    --------
    >>> s, y, off = [3.0, 2.0, 1.0, 0.5, 0.2], [0, 1, 0, 0, 0], [0, 3, 5]
    >>> ndcg(s, y, off, reduce=None).round(4).tolist()   # relevant doc at rank 2; all-zero query
    [0.6309, 0.0]
    >>> ndcg(s, y, off, no_relevant="skip", reduce=None).round(4).tolist()
    [0.6309, nan]
    >>> round(ndcg(s, y, off, no_relevant="skip"), 4)
    0.6309
    """
    k = _check_k(k)
    srt = _sort(scores, labels, query_offsets, qid)
    actual = _dcg_per_query(srt, srt.labels, k, gain)
    # Ideal ranking: labels sorted decreasingly inside each query (lexsort keeps queries grouped).
    ideal_labels = srt.labels[np.lexsort((-srt.labels, srt.seg))]
    ideal = _dcg_per_query(srt, ideal_labels, k, gain)
    defined = ideal > 0
    value = np.divide(actual, ideal, out=np.zeros_like(actual), where=defined)
    return _undefined(value, defined, no_relevant, reduce)


# ----------------------------------------------------------------------------- binary metrics


def _within_query_cumsum(srt: _Sorted, values):
    """Running sum of ``values`` (sorted order) that restarts at every query."""
    total = np.cumsum(values)
    before = np.concatenate(([0.0], total))[srt.offsets[:-1]]
    return total - before[srt.seg]


@_doc
def average_precision(scores, labels, query_offsets=None, *, qid=None, k=None, threshold=1, no_relevant=0.0,
                      reduce="mean"):
    """Average precision of the binary relevance ``rel = labels >= threshold``.

    .. math::  AP = \\frac{1}{|R|} \\sum_{j \\le k:\\ rel_{\\pi(j)} = 1} \\frac{\\sum_{i \\le j} rel_{\\pi(i)}}{j}

    with ``|R|`` the number of relevant documents of the query (also with a
    cutoff ``k``, as trec_eval's ``map_cut``). Queries without relevant
    documents follow ``no_relevant`` (see :func:`ndcg`).

    Parameters
    ----------
    {data, k, threshold, no_relevant, reduce, returns}

    Examples
    --------
    >>> # relevant documents at ranks 1 and 3: (1/1 + 2/3) / 2
    >>> round(average_precision([3.0, 2.0, 1.0], [2, 0, 1], [0, 3]), 4)
    0.8333
    >>> average_precision([3.0, 2.0, 1.0, 5.0], [2, 0, 1, 0], [0, 3, 4], reduce=None).round(4).tolist()
    [0.8333, 0.0]
    """
    k = _check_k(k)
    srt = _sort(scores, labels, query_offsets, qid)
    rel = _relevant(srt.labels, threshold)
    precision = _within_query_cumsum(srt, rel) / srt.pos
    hits = srt.per_query(rel * precision * _cutoff(srt.pos, k))
    n_rel = srt.per_query(rel)
    defined = n_rel > 0
    value = np.divide(hits, n_rel, out=np.zeros_like(hits), where=defined)
    return _undefined(value, defined, no_relevant, reduce)


@_doc
def precision_at_k(scores, labels, query_offsets=None, *, qid=None, k, threshold=1, reduce="mean"):
    """Precision at ``k``: the fraction of the top ``k`` positions holding a relevant document.

    .. math::  Prec@k = \\frac{1}{k} \\sum_{i=1}^{\\min(k, m)} rel_{\\pi(i)}

    The denominator is ``k`` even when the query has fewer than ``k``
    documents (the missing positions count as not relevant). Defined (0) for
    queries without relevant documents.

    Parameters
    ----------
    {data}
    k : int >= 1
        Cutoff (required).
    {threshold, reduce, returns}

    Examples
    --------
    >>> precision_at_k([3.0, 2.0, 1.0], [1, 0, 1], [0, 3], k=2)
    0.5
    """
    k = _check_k(k, required=True)
    srt = _sort(scores, labels, query_offsets, qid)
    rel = _relevant(srt.labels, threshold)
    return _reduce(srt.per_query(rel * _cutoff(srt.pos, k)) / k, reduce)


@_doc
def rbp(scores, labels, query_offsets=None, *, qid=None, p=0.8, k=None, threshold=1, reduce="mean"):
    """Rank-biased precision (Moffat and Zobel, 2008) with persistence ``p``.

    .. math::  RBP = (1 - p) \\sum_{i=1}^{\\min(k, m)} p^{i-1} \\, rel_{\\pi(i)}

    Parameters
    ----------
    {data}
    p : float in (0, 1), default 0.8
        Persistence.
    {k, threshold, reduce, returns}

    Examples
    --------
    >>> round(rbp([3.0, 2.0, 1.0], [1, 0, 1], [0, 3], p=0.5), 4)   # 0.5 * (1 + 0.25)
    0.625
    """
    k = _check_k(k)
    p = _check_p(p)
    srt = _sort(scores, labels, query_offsets, qid)
    rel = _relevant(srt.labels, threshold)
    weight = (1.0 - p) * p ** (srt.pos - 1.0) * _cutoff(srt.pos, k)
    return _reduce(srt.per_query(rel * weight), reduce)


@_doc
def avg_rank(scores, labels, query_offsets=None, *, qid=None, threshold=1, reduce="mean"):
    """Sum of the ranks of the relevant documents of each query (lower is better).

    .. math::  AvgRank = \\sum_{d:\\ rel_d = 1} \\mathrm{rank}(d)

    This is the paper's "AvgRank" (Joachims et al., 2017; Agarwal et al.,
    2019, lambda(r) = r): a *sum* per query, which reports normalise by the
    number of relevant documents (:func:`mean_relevant_rank`). It is 0 for a
    query without relevant documents.

    Parameters
    ----------
    {data, threshold, reduce, returns}

    Examples
    --------
    >>> avg_rank([3.0, 2.0, 1.0], [1, 0, 1], [0, 3])   # ranks 1 + 3
    4.0
    """
    srt = _sort(scores, labels, query_offsets, qid)
    rel = _relevant(srt.labels, threshold)
    return _reduce(srt.per_query(rel * srt.pos), reduce)


@_doc
def mean_relevant_rank(scores, labels, query_offsets=None, *, qid=None, threshold=1, no_relevant="skip",
                       reduce="mean"):
    """Mean rank of the relevant documents of each query: :func:`avg_rank` / number relevant.

    .. math::  \\frac{1}{|R|} \\sum_{d:\\ rel_d = 1} \\mathrm{rank}(d)

    Lower is better, so the default ``no_relevant="skip"`` leaves queries
    without relevant documents out (a float such as 0.0 would reward them with
    a perfect-looking value).

    Parameters
    ----------
    {data}
    {threshold}
    no_relevant : float or "skip", default "skip"
        Value of a query without relevant documents, or ``"skip"`` to leave it out.
    {reduce, returns}

    Examples
    --------
    >>> mean_relevant_rank([3.0, 2.0, 1.0, 1.0], [1, 0, 1, 0], [0, 3, 4], reduce=None).tolist()
    [2.0, nan]
    >>> mean_relevant_rank([3.0, 2.0, 1.0, 1.0], [1, 0, 1, 0], [0, 3, 4])
    2.0
    """
    srt = _sort(scores, labels, query_offsets, qid)
    rel = _relevant(srt.labels, threshold)
    total = srt.per_query(rel * srt.pos)
    n_rel = srt.per_query(rel)
    defined = n_rel > 0
    value = np.divide(total, n_rel, out=np.zeros_like(total), where=defined)
    return _undefined(value, defined, no_relevant, reduce)


# ----------------------------------------------------------------------------- additive lambda-metrics


@_doc
def lambda_avg_rank(r):
    """``lambda(r) = r``: the sum of relevant ranks (Table 1, AvgRank).

    {r_sections}
    >>> lambda_avg_rank([1, 2, 5]).tolist()
    [1.0, 2.0, 5.0]
    """
    return np.asarray(r, dtype=np.float64).copy()


@_doc
def lambda_avg_rank_derivative(r):
    """``lambda'(r) = 1``.

    {r_sections}
    >>> lambda_avg_rank_derivative([1, 4]).tolist()
    [1.0, 1.0]
    """
    return np.ones_like(np.asarray(r, dtype=np.float64))


@_doc
def lambda_dcg(r):
    """``lambda(r) = -1 / log2(1 + r)``: minus the DCG discount (Table 1, DCG).

    {r_sections}
    >>> lambda_dcg([1, 3]).tolist()
    [-1.0, -0.5]
    """
    return -1.0 / np.log2(1.0 + np.asarray(r, dtype=np.float64))


@_doc
def lambda_dcg_derivative(r):
    """``lambda'(r) = ln 2 / ((1 + r) ln(1 + r)^2)`` (positive and decreasing: lambda is concave).

    {r_sections}
    >>> round(float(lambda_dcg_derivative(1.0)), 4)   # 1 / (2 ln 2)
    0.7213
    """
    r = np.asarray(r, dtype=np.float64)
    return _LN2 / ((1.0 + r) * np.log1p(r) ** 2)


@_doc
def lambda_prec_at_k(r, k):
    """``lambda(r) = -1[r <= k] / k`` (Table 1, Prec@k). A step: no derivative.

    Parameters
    ----------
    {r_real}
    k : int >= 1
        The cutoff.

    Returns
    -------
    {same_shape}

    Examples
    --------
    >>> lambda_prec_at_k([1, 2, 3], k=2).tolist()
    [-0.5, -0.5, 0.0]
    """
    k = _check_k(k, required=True)
    return np.where(np.asarray(r, dtype=np.float64) <= k, -1.0 / k, 0.0)


@_doc
def lambda_rbp(r, p=0.8):
    """``lambda(r) = -(1 - p) p^(r - 1)`` (Table 1, RBP-p, corrected; see the module docstring).

    {r_p_sections}
    >>> lambda_rbp([1, 2, 3], p=0.5).tolist()
    [-0.5, -0.25, -0.125]
    """
    p = _check_p(p)
    return -(1.0 - p) * p ** (np.asarray(r, dtype=np.float64) - 1.0)


@_doc
def lambda_rbp_derivative(r, p=0.8):
    """``lambda'(r) = -(1 - p) ln(p) p^(r - 1)`` (positive and decreasing: lambda is concave).

    {r_p_sections}
    >>> round(float(lambda_rbp_derivative(1.0, p=0.5)), 4)   # -(1 - 0.5) ln(0.5)
    0.3466
    """
    p = _check_p(p)
    return -(1.0 - p) * math.log(p) * p ** (np.asarray(r, dtype=np.float64) - 1.0)


#: Registry of the rank weights of Table 1 (risk orientation, lower is better).
LAMBDA_WEIGHTS = {
    "avg_rank": lambda_avg_rank,
    "dcg": lambda_dcg,
    "prec@k": lambda_prec_at_k,
    "rbp": lambda_rbp,
}


@dataclass(frozen=True)
class LambdaWeight:
    """A rank weight ``lambda`` with what the optimisers need to know about it.

    ``value(r)`` and ``derivative(r)`` are vectorised over real ranks
    ``r >= 1``; ``derivative`` is None when ``lambda`` is not differentiable.
    ``convex`` / ``concave`` describe ``lambda`` on ``r >= 1`` (both True for
    an affine weight, None when unknown): SVM PropRank needs a convex weight,
    the convex-concave procedure of SVM PropDCG a concave one.

    Parameters
    ----------
    name : str
        Name of the weight (``"dcg"``, ... or a callable's name).
    value : callable ``r -> lambda(r)``
        The weight, vectorised over real ranks.
    derivative : callable or None
        ``r -> lambda'(r)``, or None when ``lambda`` is not differentiable.
    convex, concave : bool or None
        Shape of ``lambda`` on ``r >= 1`` (None: unknown).

    Examples
    --------
    >>> w = LambdaWeight("linear", lambda r: r, convex=True, concave=True)
    >>> w([1.0, 2.0])
    [1.0, 2.0]
    """

    name: str
    value: Callable[[np.ndarray], np.ndarray]
    derivative: Optional[Callable[[np.ndarray], np.ndarray]] = None
    convex: Optional[bool] = None
    concave: Optional[bool] = None

    def __call__(self, r):
        return self.value(r)


def _no_params(name, params):
    if params:
        raise ValueError(f"rank weight {name!r} takes no parameters, got {sorted(params)}")


def get_lambda(name_or_callable, **params) -> LambdaWeight:
    """The :class:`LambdaWeight` of a name of :data:`LAMBDA_WEIGHTS`, a callable or a LambdaWeight.

    Parameters: ``k`` for ``"prec@k"`` (required), ``p`` for ``"rbp"``
    (default 0.8). A plain callable ``r -> lambda(r)`` may come with
    ``derivative=``, ``convex=`` and ``concave=`` keywords.

    Parameters
    ----------
    name_or_callable : str, callable or LambdaWeight
        A name of :data:`LAMBDA_WEIGHTS`, a function ``r -> lambda(r)``, or a
        :class:`LambdaWeight` (returned as is).
    **params
        ``k`` (prec@k), ``p`` (rbp), or ``derivative``/``convex``/``concave`` for a callable.

    Returns
    -------
    LambdaWeight

    Examples
    --------
    >>> lam = get_lambda("dcg")
    >>> lam.value([1.0, 3.0]).tolist(), lam.concave, lam.convex
    ([-1.0, -0.5], True, False)
    >>> get_lambda("rbp", p=0.5).value([2]).tolist()
    [-0.25]
    """
    if isinstance(name_or_callable, LambdaWeight):
        _no_params(name_or_callable.name, params)
        return name_or_callable
    if callable(name_or_callable):
        extra = set(params) - {"derivative", "convex", "concave"}
        if extra:
            raise ValueError(f"a callable rank weight takes only derivative/convex/concave, got {sorted(extra)}")
        name = getattr(name_or_callable, "__name__", "custom")
        return LambdaWeight(name, name_or_callable, **params)
    name = name_or_callable
    if name == "avg_rank":
        _no_params(name, params)
        return LambdaWeight(name, lambda_avg_rank, lambda_avg_rank_derivative, convex=True, concave=True)
    if name == "dcg":
        _no_params(name, params)
        return LambdaWeight(name, lambda_dcg, lambda_dcg_derivative, convex=False, concave=True)
    if name == "prec@k":
        if set(params) != {"k"}:
            raise ValueError(f"rank weight 'prec@k' needs exactly the parameter k, got {sorted(params)}")
        k = _check_k(params["k"], required=True)
        return LambdaWeight(name, lambda r: lambda_prec_at_k(r, k), None, convex=False, concave=False)
    if name == "rbp":
        extra = set(params) - {"p"}
        if extra:
            raise ValueError(f"rank weight 'rbp' takes only the parameter p, got {sorted(extra)}")
        p = _check_p(params.get("p", 0.8))
        return LambdaWeight(name, lambda r: lambda_rbp(r, p), lambda r: lambda_rbp_derivative(r, p),
                            convex=False, concave=True)
    raise ValueError(f"unknown rank weight {name!r}; expected one of {sorted(LAMBDA_WEIGHTS)} or a callable")


#: metrics whose value is better when lower (in their natural orientation; scorers negate them)
LOWER_IS_BETTER = {"avg_rank"}


def metric_weight(metric="dcg", **params):
    """Rank weight ``m(r)`` of a metric in its natural orientation: minus its ``lambda``, except for average rank.

    ``m`` is what an evaluated ranker earns for a relevant document at rank
    ``r``: ``1 / log2(1 + r)`` for DCG, ``1[r <= k] / k`` for Prec@k,
    ``(1 - p) p^(r - 1)`` for RBP, i.e. minus the risk weights ``lambda`` of
    :data:`LAMBDA_WEIGHTS`; and ``r`` itself for average rank, where lower is
    better (:data:`LOWER_IS_BETTER`). The off-policy estimators of
    :mod:`counterfactual_ltr.evaluation` and the click aggregates weigh clicks
    with it.

    Parameters
    ----------
    metric : str or callable, default "dcg"
        Name of the metric (``"dcg"``: ``1 / log2(1 + r)``; ``"avg_rank"``:
        ``r``; ``"prec@k"``: ``1[r <= k] / k``; ``"rbp"``:
        ``(1 - p) p^(r - 1)``), or a callable ``m(ranks) -> weights``, which
        is returned as is.
    **params
        Parameters of the named metric, passed to :func:`get_lambda`: ``k``
        for ``"prec@k"`` (required), ``p`` for ``"rbp"`` (default 0.8).

    Returns
    -------
    callable
        ``m(ranks) -> weights``: the float array of weights of an array of
        1-based ranks.

    Examples
    --------
    >>> import numpy as np
    >>> metric_weight("dcg")(np.array([1, 3])).round(3).tolist()
    [1.0, 0.5]
    >>> metric_weight("rbp", p=0.5)(np.array([1, 2, 3])).tolist()
    [0.5, 0.25, 0.125]
    """
    if callable(metric):
        return metric
    lam = get_lambda(metric, **params)
    sign = 1.0 if metric in LOWER_IS_BETTER else -1.0
    return lambda r: sign * lam.value(np.asarray(r, dtype=np.float64))


@_doc
def additive_metric(scores, labels, query_offsets=None, *, qid=None, weight, threshold=1, reduce="mean",
                    **weight_params):
    """Additive lambda-metric of Table 1 (risk orientation, lower is better).

    .. math::  \\Delta = \\sum_{d} \\lambda(\\mathrm{rank}(d)) \\, rel_d, \\quad rel_d = 1[label_d \\ge threshold]

    ``weight`` is anything :func:`get_lambda` accepts (``"dcg"``,
    ``"avg_rank"``, ``"prec@k"`` with ``k=``, ``"rbp"`` with ``p=``, a
    callable); ``threshold=None`` uses the labels themselves as ``rel``.

    Parameters
    ----------
    {data}
    weight : str, callable or LambdaWeight
        The rank weight (see :func:`get_lambda`).
    threshold : float or None, default 1
        ``rel = labels >= threshold``; None uses the labels themselves.
    {reduce}
    **weight_params
        ``k`` for prec@k, ``p`` for rbp.

    {returns}

    Examples
    --------
    >>> additive_metric([3.0, 2.0, 1.0], [1, 0, 1], [0, 3], weight="dcg")   # -(1 + 1/2)
    -1.5
    >>> additive_metric([3.0, 2.0, 1.0], [1, 0, 1], [0, 3], weight="prec@k", k=2)
    -0.5
    """
    lam = get_lambda(weight, **weight_params)
    srt = _sort(scores, labels, query_offsets, qid)
    rel = srt.labels if threshold is None else _relevant(srt.labels, threshold)
    return _reduce(srt.per_query(rel * lam.value(srt.pos.astype(np.float64))), reduce)
