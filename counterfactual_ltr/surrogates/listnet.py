"""ListNet's cross-entropy surrogate with top-one probabilities (Cao et al., 2007).

Pure function of per-query scores with the shared signature (see ``docs/conventions.md``).
The online baseline of Chaudhuri & Tewari (OGD on this loss) uses it every round, so one
query (``query_offsets = [0, m]``) takes a path without segment reductions.
"""

from __future__ import annotations

import numpy as np

from .._segments import segment_ids
from ._common import check_reduce, doc, prepare, reduce_losses

__all__ = ["listnet_loss", "LISTNET_TARGETS"]

#: Target distributions accepted by :func:`listnet_loss`.
LISTNET_TARGETS = ("softmax", "gain")


def _target_core(y, offsets, seg, target):
    """Target top-one distribution per query; ``valid`` marks queries where it exists."""
    single = offsets.shape[0] == 2
    if target == "softmax":
        if single:
            e = np.exp(y - y.max())
            return e / e.sum(), None
        ymax = np.maximum.reduceat(y, offsets[:-1])
        e = np.exp(y - ymax[seg])
        return e / np.add.reduceat(e, offsets[:-1])[seg], None
    g = np.exp2(y) - 1.0
    if single:
        tot = g.sum()
        return (g / tot if tot > 0 else g), np.array([tot > 0])
    tot = np.add.reduceat(g, offsets[:-1])
    return np.divide(g, tot[seg], out=np.zeros_like(g), where=tot[seg] > 0), tot > 0


def _listnet_core(s, y, offsets, target):
    """Per-query losses and gradient of their sum (unvalidated inputs)."""
    if offsets.shape[0] == 2:
        z = s - s.max()
        e = np.exp(z)
        tot = e.sum()
        p, valid = _target_core(y, offsets, None, target)
        loss = float(np.log(tot) * p.sum() - p @ z)
        grad = e / tot * p.sum() - p          # p.sum() is 1, or 0 for an invalid "gain" target
        return np.array([loss]), grad
    seg = segment_ids(offsets)
    starts = offsets[:-1]
    z = s - np.maximum.reduceat(s, starts)[seg]
    e = np.exp(z)
    tot = np.add.reduceat(e, starts)
    p, valid = _target_core(y, offsets, seg, target)
    psum = np.add.reduceat(p, starts)                    # 1 per query (0 where the target is undefined)
    per_query = np.log(tot) * psum - np.add.reduceat(p * z, starts)
    grad = e / tot[seg] * psum[seg] - p
    return per_query, grad


@doc
def listnet_loss(scores, labels, query_offsets, *, target="softmax", reduce="sum"):
    """ListNet (top-one) cross entropy, per query:

    .. math::

        \\phi_{LN}(s, R) = -\\sum_i P_i(R) \\log \\frac{e^{s_i}}{\\sum_j e^{s_j}},
        \\qquad \\nabla_s \\phi_{LN} = \\mathrm{softmax}(s) - P(R).

    The target top-one distribution ``P(R)``:

    * ``"softmax"`` (default): ``P_i = exp(R_i) / sum_j exp(R_j)`` -- Cao et al. (2007) apply
      the same ``phi = exp`` to the relevance judgments as to the scores, and this is the
      definition Chaudhuri & Tewari use for their ListNet baseline (``P_j(v) =
      exp(v_j)/sum exp(v)`` applied to both ``s`` and ``R``). Defined for every query;
      a single-grade query has the uniform target.
    * ``"gain"``: ``P_i = (2^R_i - 1) / sum_j (2^R_j - 1)``, the DCG gains normalised
      (a common variant); undefined when the query has no relevant document -- such
      queries then contribute 0 loss and 0 gradient.

    Convex in ``s``; computed stably (per-query max subtracted). Returns ``(loss, grad)``.

    Parameters
    ----------
    {scores, labels, query_offsets}
    target : {"softmax", "gain"}, default "softmax"
        The target top-one distribution (see above).
    {reduce, returns}

    Examples
    --------
    >>> loss, grad = listnet_loss([0.0, 0.0], [1, 1], [0, 2])
    >>> round(loss, 6), grad.tolist()       # uniform target, uniform scores: log 2, no gradient
    (0.693147, [0.0, 0.0])
    >>> loss, grad = listnet_loss([0.0, 0.0], [1, 0], [0, 2], target="gain")
    >>> round(loss, 6), grad.tolist()       # target (1, 0): -log(1/2)
    (0.693147, [-0.5, 0.5])
    """
    offsets, s, y = prepare(scores, labels, query_offsets)
    if target not in LISTNET_TARGETS:
        raise ValueError(f"target must be one of {LISTNET_TARGETS}, got {target!r}")
    check_reduce(reduce)
    per_query, grad = _listnet_core(s, y, offsets, target)
    return reduce_losses(per_query, grad, reduce, offsets.shape[0] - 1)
