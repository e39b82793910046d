"""Ranking surrogates: pure functions of per-query scores.

Every surrogate has one signature (see ``docs/conventions.md``)::

    loss, grad = surrogate(scores, labels, query_offsets, *, reduce="sum", **params)

``grad`` is the (sub)gradient of the returned loss with respect to
``scores`` (for ``reduce=None`` it is the gradient of the summed loss).
Batch estimators chain it through a linear model, online learners use it for
one query per round, Deep PropDCG chains it through an MLP.
"""

from .pairwise import *  # noqa: F401,F403
from .slam import *  # noqa: F401,F403
from .listnet import *  # noqa: F401,F403
from .topk_losses import *  # noqa: F401,F403
from .smoothed import *  # noqa: F401,F403
