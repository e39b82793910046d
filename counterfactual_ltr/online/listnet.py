"""Online ListNet: online gradient descent on ListNet's cross entropy (the baseline of Chaudhuri & Tewari).

Every round (not only on mistakes) ``w_{t+1} = w_t - eta_t X_t^T (softmax(X_t w_t) - P(R_t))``,
the gradient of :func:`~counterfactual_ltr.surrogates.listnet_loss` chained through the
linear scorer, with ``eta_t = eta`` (``schedule="constant"``) or ``eta / sqrt(t)``
(``schedule="sqrt"``, the rate of the ``O(sqrt(T))`` OGD regret bound).
"""

from __future__ import annotations

import numpy as np

from ..surrogates.listnet import LISTNET_TARGETS, _listnet_core
from ._base import Feedback, make_schedule
from .perceptrons import _LinearPerceptron

__all__ = ["OnlineListNet"]

_SCHEDULES = {"constant": 0.0, "sqrt": 0.5}


class OnlineListNet(_LinearPerceptron):
    """OGD on the ListNet top-one cross entropy with a linear scorer, full feedback.

    Parameters
    ----------
    eta : float > 0 or callable ``t -> rate``
        Base learning rate ``c``.
    schedule : "constant" or "sqrt"
        ``eta_t = c`` or ``c / sqrt(t)`` (``t = 1, 2, ...`` counts rounds); ignored when
        ``eta`` is a callable.
    eta_power : float, optional
        General schedule ``eta_t = c / t**eta_power``; overrides ``schedule`` when given
        (the parameter name of :class:`~counterfactual_ltr.online.TopKFeedbackRanker`).
    target : "softmax" or "gain"
        Target top-one distribution (see :func:`~counterfactual_ltr.surrogates.listnet_loss`;
        ``"softmax"`` of the grades is the paper's and Cao et al.'s choice).

    Attributes
    ----------
    coef_ : weights; ``t_`` : next round (1-based); ``n_updates_`` : rounds with a non-zero step.

    Examples
    --------
    >>> from click_sim import make_separable_ranking
    >>> data = make_separable_ranking(20, random_state=0)
    >>> learner = OnlineListNet(eta=0.1, schedule="sqrt").reset(data.n_features)
    >>> X, y = data.X[:20], data.y[:20]
    >>> shown = learner.rank(X)
    >>> learner.update(X, Feedback(shown, y[shown])).t_
    2
    """

    def __init__(self, eta=0.1, schedule: str = "constant", target: str = "softmax", eta_power=None):
        self.eta = eta
        self.schedule = schedule
        self.target = target
        self.eta_power = eta_power
        self._validate()

    def _validate(self):
        if not isinstance(self.schedule, str) or self.schedule not in _SCHEDULES:
            raise ValueError(f"schedule must be one of {tuple(_SCHEDULES)}, got {self.schedule!r}")
        if not isinstance(self.target, str) or self.target not in LISTNET_TARGETS:
            raise ValueError(f"target must be one of {LISTNET_TARGETS}, got {self.target!r}")
        power = _SCHEDULES[self.schedule] if self.eta_power is None else self.eta_power
        return make_schedule(self.eta, power, "eta")

    def reset(self, n_features: int, *, feature_names=None) -> "OnlineListNet":
        self._eta_t = self._validate()
        self._base_reset(n_features, feature_names)
        return self

    def update(self, X, feedback: Feedback) -> "OnlineListNet":
        s, y, _ = self._scores_and_labels(X, feedback)
        _, g = _listnet_core(s, y, self._offsets(X.shape[0]), self.target)
        rate = self._eta_t(self.t_)
        if not (rate > 0 and np.isfinite(rate)):
            raise ValueError(f"eta_t must be a positive finite number, got {rate} at round {self.t_} "
                             f"(eta={self.eta!r}, eta_power={self.eta_power!r}, schedule={self.schedule!r})")
        with np.errstate(over="ignore", invalid="ignore"):
            w = self.coef_ - rate * (g @ X)
        self._take_step(w)
        self.n_updates_ += 1
        self.t_ += 1
        return self
