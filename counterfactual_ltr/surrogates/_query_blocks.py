"""Anchor-against-document pairs as dense per-query blocks: the softplus pair sums without pair index arrays.

An anchor ``k`` (a row with a non-zero click weight) of a query with the rows ``y`` has one pair
per other row: ``u_ky = alpha_k + beta_y`` (``alpha_k = (margin - s_k) / t``, ``beta_y = s_y / t``;
LambdaRank's logistic is ``margin = 0``, ``t = 1 / sigma``). Queries are grouped into buckets of
similar list length and padded to the bucket's width; each bucket's anchors form a matrix of
``u`` (one row per anchor, one column per position in its query), processed in chunks of rows
small enough to stay in the processor's cache. The anchor's own column and the padding get
``u = -inf``, where every pair function below is exactly 0, so the pairs summed are exactly those
of :meth:`~counterfactual_ltr.surrogates.implicit_pairs.ClickPairs.explicit_owners`.

Per pair, with ``Q = exp(-u)``, ``E = exp(-|u|) = min(Q, 1/Q)`` and ``F = 1 + E``:

* softplus ``log(1 + e^u) = max(u, 0) + log F``, summed over a row as ``sum max(u, 0) + log prod F``
  (``F`` in ``(1, 2]``: the product of up to 1000 factors cannot overflow), so no logarithm per pair;
* slope ``sigma(u) = min(1, 1/Q) / F`` and curvature ``sigma(u) sigma(-u) = E / F^2`` (two
  divisions per pair), both accurate to a few units in the last place even where they are tiny;
* ``Q`` itself, the only exponential, is separable: ``exp(-alpha_k) exp(-beta_y)``, with the
  scores centred per query so that neither factor overflows (a bucket whose scores spread over
  more than ``_SPREAD`` temperatures takes ``exp(-u)`` per pair instead).

The row sums (per anchor) are matrix-vector products; the column sums over a query's anchors
(per document) are ``np.add.reduceat`` over the anchors' contiguous rows.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# Per precision: widths of one row product of F <= 2 (2^1000 < 1.8e308, 2^120 < 3.4e38), and |exponent| of
# each separable factor at most this (their product stays within e^+-700, e^+-80: finite and, in float32,
# above the subnormal numbers, which are slow).
_PRODUCT_RUN = {np.dtype(np.float64): 1000, np.dtype(np.float32): 120}
_SPREAD = {np.dtype(np.float64): 350.0, np.dtype(np.float32): 40.0}
# Bytes of a chunk's buffer: large enough that the few dozen NumPy calls per chunk cost little beside the
# arithmetic, small enough that a chunk's few buffers stay near a core's cache.
_CHUNK = 32768 * 8
# Bucket cost model (seconds): per padded pair, and per bucket (a few dozen NumPy calls).
_PER_PAIR, _PER_BUCKET = 4e-9, 1e-4
# Chunks of at most this many queries sum their columns by a (block-diagonal) matrix product.
_BLOCK_QUERIES = 8


def length_buckets(lengths, anchors_per_query):
    """Bucket upper bounds over the sorted distinct list lengths minimising padded pairs plus a per-bucket cost.

    Dynamic programming over the distinct lengths: bucket ``(i, j]`` costs
    ``_PER_PAIR * width_j * (anchors in it) + _PER_BUCKET``. Returns the widths, ascending.
    """
    values, inverse = np.unique(lengths, return_inverse=True)
    anchors = np.bincount(inverse, anchors_per_query, minlength=values.size)
    cum = np.concatenate(([0.0], np.cumsum(anchors)))
    best = np.full(values.size + 1, np.inf)
    best[0] = 0.0
    cut = np.zeros(values.size + 1, dtype=np.int64)
    for j in range(1, values.size + 1):            # O(m^2) over m distinct lengths, once per fit
        costs = best[:j] + _PER_PAIR * values[j - 1] * (cum[j] - cum[:j]) + _PER_BUCKET
        cut[j] = int(np.argmin(costs))
        best[j] = costs[cut[j]]
    widths, j = [], values.size
    while j > 0:
        widths.append(int(values[j - 1]))
        j = cut[j]
    return np.array(widths[::-1], dtype=np.int64)


class _Chunk(NamedTuple):
    """Queries ``q0:q1`` of a bucket and their anchors ``k0:k1`` (``counts`` per query); ``own``: flat own-pair indices."""

    q0: int
    q1: int
    k0: int
    k1: int
    counts: np.ndarray
    starts: np.ndarray
    own: np.ndarray
    block: np.ndarray | None


def column_sums(S, c, chunk):
    """Per query of the chunk, ``sum_k c_k S[:, k]`` over its anchors' columns, one row per query.

    Overwrites ``S`` on the ``reduceat`` path (chunks of many queries).
    """
    if chunk.block is not None:
        return (S @ c)[None, :] if chunk.q1 - chunk.q0 == 1 else (S @ (chunk.block * c[:, None])).T
    S *= c
    return np.add.reduceat(S, chunk.starts, axis=1).T


def _runs(local, limit):
    """``(k0, k1)`` runs of the anchors (grouped by query ``local``): whole queries up to ``limit`` anchors, and
    a query of more than ``limit`` anchors in runs of ``limit``."""
    starts = np.flatnonzero(np.diff(local, prepend=-1))
    ends = np.append(starts[1:], local.size)
    runs, k0 = [], 0
    for start, end in zip(starts, ends):           # once per fit
        if end - k0 > limit and start > k0:         # close the run before this query
            runs.append((k0, int(start)))
            k0 = int(start)
        while end - k0 > limit:                     # a query longer than a run
            runs.append((k0, k0 + limit))
            k0 += limit
    if k0 < local.size:
        runs.append((k0, local.size))
    return runs


class _Bucket:
    """The queries of one bucket: their rows padded to ``width`` (``rows``; padding points at row ``n``) and chunks."""

    def __init__(self, offsets, n, queries, width, anchor_slice, anchors, anchor_query, chunk, dtype):
        lengths = np.diff(offsets)[queries]
        cols = np.arange(width)
        self.rows = np.where(cols < lengths[:, None], offsets[queries][:, None] + cols, n)
        self.rows_t = np.ascontiguousarray(self.rows.T)                # (width, queries): a query per column
        self.queries, self.width = queries, int(width)
        self.anchor_slice = anchor_slice
        local = np.searchsorted(queries, anchor_query)                # each anchor's row of ``rows``
        self.own = anchors - offsets[anchor_query]                     # its own column
        self.local = local
        self.chunks = []
        for k0, k1 in _runs(local, max(1, chunk // self.width)):
            q0, q1 = int(local[k0]), int(local[k1 - 1]) + 1
            loc = local[k0:k1] - q0
            starts = np.flatnonzero(np.diff(loc, prepend=-1))          # every query of the run has an anchor in it
            block = None
            if q1 - q0 <= _BLOCK_QUERIES:                             # column sums as one matrix product
                block = (loc[:, None] == np.arange(q1 - q0)).astype(dtype)
            counts = np.diff(np.append(starts, k1 - k0))
            self.chunks.append(_Chunk(q0, q1, k0, k1, counts, starts, self.own[k0:k1] * (k1 - k0)
                                      + np.arange(k1 - k0), block))
        self.pad_t = self.rows_t == n


class QueryBlocks:
    """The anchors of each query against its rows, as dense blocks (see the module docstring).

    Parameters
    ----------
    offsets : array (n_queries + 1,)
        Checked query boundaries.
    anchors : array (n_anchors,)
        The anchor rows, ascending.
    dtype : float64 or float32
        Precision of the pair arithmetic (the sums are returned in float64). float32 halves the bytes
        each pass over the pairs moves, for callers that need no more (LightGBM keeps its gradients
        in float32).
    """

    def __init__(self, offsets, anchors, dtype=np.float64):
        self.dtype = np.dtype(dtype)
        if self.dtype not in _SPREAD:
            raise ValueError(f"dtype must be float64 or float32, got {self.dtype}")
        chunk = _CHUNK // self.dtype.itemsize
        self.n = int(offsets[-1])
        anchor_query = np.searchsorted(offsets, anchors, side="right") - 1
        queries, per_query = np.unique(anchor_query, return_counts=True)
        lengths = np.diff(offsets)[queries]
        widths = length_buckets(lengths, per_query)
        which = np.searchsorted(widths, lengths)                       # each query's bucket
        self.buckets = []
        for b, width in enumerate(widths):                             # a handful of buckets
            qs = queries[which == b]
            idx = np.flatnonzero(np.isin(anchor_query, qs))            # anchors ascending: grouped by query
            self.buckets.append(_Bucket(offsets, self.n, qs, width, idx, anchors[idx], anchor_query[idx], chunk,
                                        self.dtype))
        self.anchors = anchors
        self.chunk_size = max((b.width * (c[3] - c[2]) for b in self.buckets for c in b.chunks), default=0)

    def _buffers(self, count):
        return [np.empty(self.chunk_size, self.dtype) for _ in range(count)]

    def pairs(self, scores, margin, scale, buffers):
        """Per chunk: ``(bucket, chunk, U, Q)`` with ``U = u`` and ``Q = exp(-u)``, ``u = -inf`` off the pairs."""
        s_ext = np.append(scores, -np.inf)
        U_buf, Q_buf = buffers[0], buffers[1]
        for b in self.buckets:
            beta = s_ext[b.rows_t] * scale
            alpha = (margin - scores[self.anchors[b.anchor_slice]]) * scale
            centre = beta[0]                                          # every query has a first row
            shifted = np.where(b.pad_t, 0.0, beta - centre)
            a_shift = alpha + centre[b.local]
            separable = max(np.abs(shifted).max(), np.abs(a_shift).max()) <= _SPREAD[self.dtype]
            if separable:
                exp_beta = np.exp(-shifted).astype(self.dtype, copy=False)
                exp_beta[b.pad_t] = np.inf
                exp_alpha = np.exp(-a_shift).astype(self.dtype, copy=False)
            alpha, beta = alpha.astype(self.dtype, copy=False), beta.astype(self.dtype, copy=False)
            for chunk in b.chunks:
                q0, q1, k0, k1, _, _, own, _ = chunk
                U = U_buf[:(k1 - k0) * b.width].reshape(b.width, k1 - k0)
                _outer(np.add, alpha[k0:k1], beta, chunk, U)
                U.reshape(-1)[own] = -np.inf
                Q = Q_buf[:U.size].reshape(U.shape)
                if separable:
                    _outer(np.multiply, exp_alpha[k0:k1], exp_beta, chunk, Q)
                    Q.reshape(-1)[own] = np.inf
                else:
                    with np.errstate(over="ignore"):
                        np.negative(U, out=Q)
                        np.exp(Q, out=Q)
                yield b, chunk, U, Q

    def softplus_sums(self, scores, margin, temperature, weights_of, hessian):
        """Per anchor ``sum_y t softplus(u)``; per row the ``c``-weighted slope and curvature sums.

        ``weights_of(anchor_index, H)`` gives, from the anchors' sums ``H`` (``t log(1 + e^u)`` summed),
        their gradient and curvature weights ``(c, c_plus)``. Returns ``(H, grad, hess)``: ``grad_d =
        sum_(k, y = d) c_k sigma(u) - [d anchor] c_d sum_y sigma(u)``, ``hess_d`` the same with
        ``c_plus`` and ``sigma'(u) / t`` added at both ends (``None`` without ``hessian``).
        """
        H = np.zeros(self.anchors.size)
        grad, hess = np.zeros(self.n + 1), (np.zeros(self.n + 1) if hessian else None)
        buffers = self._buffers(3)
        with np.errstate(divide="ignore", over="ignore"):          # 1/Q of Q = 0 or subnormal: e^u = inf
            for b, chunk, U, Q in self.pairs(scores, margin, 1.0 / temperature, buffers):
                q0, q1, k0, k1 = chunk[:4]
                ones = np.ones(b.width, self.dtype)
                V = buffers[2][:U.size].reshape(U.shape)
                np.maximum(U, 0.0, out=U)
                positive = ones @ U
                A = U                                                 # U's buffer, free from here
                np.reciprocal(Q, out=A)                               # e^u
                np.minimum(Q, A, out=Q)                               # E = exp(-|u|)
                np.minimum(A, 1.0, out=A)
                np.add(Q, 1.0, out=V)                                 # F = 1 + E
                h = (positive + _log_row_products(V)).astype(np.float64)
                h *= temperature
                idx = b.anchor_slice[k0:k1]
                H[idx] = h
                c, c_plus = (w.astype(self.dtype, copy=False) for w in weights_of(idx, h))
                np.reciprocal(V, out=V)
                A *= V                                                # sigma(u) = min(1, e^u) / F
                grad[self.anchors[idx]] -= c * (ones @ A)
                grad[b.rows[q0:q1]] += column_sums(A, c, chunk)
                if hessian:
                    Q *= V
                    Q *= V                                            # sigma(u) sigma(-u) = E / F^2
                    c_plus = c_plus / temperature
                    hess[self.anchors[idx]] += c_plus * (ones @ Q)
                    hess[b.rows[q0:q1]] += column_sums(Q, c_plus, chunk)
        return H, grad[:self.n], (hess[:self.n] if hessian else None)

    def lambdarank_sums(self, scores, sigma, lam_r, weights, hessian):
        """Per anchor ``sum_y D log(1 + e^u)``; per row the weighted slope and curvature sums (``u = sigma (s_y - s_k)``).

        ``D_ky = |lam_r[k] - lam_r[y]|``; the gradient weights are ``sigma W_k``, the curvature's
        ``sigma^2 max(W_k, 0)``. Returns ``(loss per anchor before W, grad, hess)`` as :meth:`softplus_sums`.
        """
        loss = np.zeros(self.anchors.size)
        grad, hess = np.zeros(self.n + 1), (np.zeros(self.n + 1) if hessian else None)
        lam_ext = np.append(lam_r, 0.0)
        buffers = self._buffers(6)
        c_all = (sigma * weights).astype(self.dtype)
        c_plus_all = (sigma * sigma * np.maximum(weights, 0.0)).astype(self.dtype)
        with np.errstate(divide="ignore", over="ignore"):          # 1/Q of Q = 0 or subnormal: e^u = inf
            for b, chunk, U, Q in self.pairs(scores, 0.0, sigma, buffers):
                q0, q1, k0, k1 = chunk[:4]
                ones = np.ones(b.width, self.dtype)
                D, T, V, X = (buf[:U.size].reshape(U.shape) for buf in buffers[2:])
                idx = b.anchor_slice[k0:k1]
                _outer(np.subtract, lam_r[self.anchors[idx]], lam_ext[b.rows_t], chunk, D)
                np.abs(D, out=D)
                _lambdarank_chunk(U, Q, D, T, V, X)
                loss[idx] = ones @ U
                c = c_all[idx]
                grad[self.anchors[idx]] -= c * (ones @ Q)
                grad[b.rows[q0:q1]] += column_sums(Q, c, chunk)
                if hessian:
                    c_plus = c_plus_all[idx]
                    hess[self.anchors[idx]] += c_plus * (ones @ T)
                    hess[b.rows[q0:q1]] += column_sums(T, c_plus, chunk)
        return loss, grad[:self.n], (hess[:self.n] if hessian else None)


def _log_row_products(F):
    """``sum_y log F_yk`` per anchor (column) from products of at most ``_PRODUCT_RUN`` factors in ``[1, 2]``."""
    run = _PRODUCT_RUN[F.dtype]
    if F.shape[0] <= run:
        return np.log(np.multiply.reduce(F, axis=0))
    runs = np.multiply.reduceat(F, np.arange(0, F.shape[0], run), axis=0)
    return np.log(runs).sum(axis=0)


def _outer(op, per_anchor, per_query, chunk, out):
    """``out[y, k] = op(per_query[y, query of k], per_anchor[k])`` over the chunk's anchors ``k``."""
    if chunk.q1 - chunk.q0 == 1:
        op(per_query[:, chunk.q0:chunk.q1], per_anchor, out=out)
    else:
        op(np.repeat(per_query[:, chunk.q0:chunk.q1], chunk.counts, axis=1), per_anchor, out=out)


def _lambdarank_chunk(U, Q, D, T, V, X):
    """In place, for one chunk: ``U`` <- ``D`` softplus(u), ``Q`` <- ``D`` sigma(u), ``T`` <- ``D`` sigma(u) sigma(-u)."""
    np.maximum(U, 0.0, out=U)
    np.reciprocal(Q, out=T)
    np.minimum(Q, T, out=T)                                           # E = exp(-|u|)
    np.add(T, 1.0, out=V)                                             # F = 1 + E
    # log F per pair (the loss is D-weighted, so no product trick); log rather than log1p, which NumPy
    # does not vectorise: rounding 1 + E costs at most half a unit in the last place of 1 per pair, in
    # the loss value only (the slope and curvature do not use it).
    np.log(V, out=X)
    U += X
    U *= D
    np.add(Q, 1.0, out=Q)
    np.reciprocal(Q, out=Q)
    Q *= D
    np.reciprocal(V, out=V)
    T *= V
    T *= V
    T *= D
