"""The online protocol shared by every online learner.

In each round the environment picks a query, the learner ranks its
documents (``rank``), the environment reveals the graded labels of the top
``feedback_k`` shown documents (all of them when ``feedback_k`` is None),
and the learner updates (``update``). ``click_sim.run_online`` drives it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._docs import common_doc
from .._validation import check_real
from ..models import _rng

__all__ = ["Feedback", "OnlineLearner", "RandomRanker", "check_learning_rate", "make_schedule"]


@dataclass(frozen=True)
class Feedback:
    """What a learner sees after a round.

    Parameters
    ----------
    ranking : ndarray of int
        The permutation that was shown: row indices of the query's ``X``, best first.
    labels : ndarray
        ``labels[i]`` is the graded label of document ``ranking[i]``, for the
        first ``len(labels)`` positions only (the learner's ``feedback_k``).

    Examples
    --------
    >>> import numpy as np
    >>> Feedback(np.array([2, 0, 1]), np.array([1, 0])).k
    2
    """

    ranking: np.ndarray
    labels: np.ndarray

    @property
    def k(self) -> int:
        return len(self.labels)


class OnlineLearner:
    """Base class: ``rank(X)`` then ``update(X, feedback)``, once per round.

    Subclasses set ``feedback_k`` (None: full feedback) and implement both
    methods; ``reset(n_features)`` (re)initialises the state before a run.
    The methods' documentation here is every learner's.
    """

    feedback_k: int | None = None

    def reset(self, n_features: int, *, feature_names=None) -> "OnlineLearner":
        """Start over: the learner's state (weights, round counter, random stream) for ``n_features`` features.

        Parameters
        ----------
        n_features : int
            Width of the feature rows of the coming rounds.
        feature_names : list of str, optional
            The columns' names (a data set's ``feature_names``), kept as ``feature_names_in_`` as
            the batch rankers keep them, so that an export names the stack's features by them;
            None forgets those of an earlier run.

        Returns
        -------
        self
        """
        raise NotImplementedError

    def rank(self, X: np.ndarray) -> np.ndarray:
        """The ranking shown this round: row indices of ``X``, best first (a permutation).

        Parameters
        ----------
        X : ndarray of shape (n_docs, n_features)
            The documents of this round's query.

        Returns
        -------
        ndarray of int, shape (n_docs,)
        """
        raise NotImplementedError

    def update(self, X: np.ndarray, feedback: Feedback) -> "OnlineLearner":
        """Learn from this round's feedback.

        Parameters
        ----------
        X : ndarray of shape (n_docs, n_features)
            The documents of this round's query, as given to :meth:`rank`.
        feedback : Feedback
            The ranking shown and the labels of its top ``feedback_k`` documents.

        Returns
        -------
        self
        """
        raise NotImplementedError

    def _keep_feature_names(self, feature_names, n_features) -> None:
        """``feature_names_in_`` from ``feature_names`` (one per feature), or none when None."""
        if feature_names is None:
            self.__dict__.pop("feature_names_in_", None)
            return
        if isinstance(feature_names, (str, bytes)):
            raise ValueError("feature_names must be a list of names, one per feature, not one string")
        names = [str(n) for n in feature_names]
        if len(names) != int(n_features):
            raise ValueError(f"feature_names has {len(names)} names but n_features is {n_features}")
        self.feature_names_in_ = np.asarray(names, dtype=object)

    def _check_width(self, X) -> None:
        """Start at ``w = 0`` on first use; a list of another width is an error, never a silent reset."""
        if getattr(self, "coef_", None) is None:
            self.reset(X.shape[1])
        elif self.coef_.shape[0] != X.shape[1]:
            raise ValueError(f"X has {X.shape[1]} features but {type(self).__name__} holds weights for "
                             f"{self.coef_.shape[0]}: call reset(n_features) to start over")

    def _take_step(self, w_new, rate_name: str = "eta") -> None:
        """Accept new weights only if finite: an overflowing step is an error, never NaN weights."""
        if not np.all(np.isfinite(w_new)):
            raise ValueError(f"{type(self).__name__}: the weights overflowed at round {getattr(self, 't_', '?')}; "
                             f"lower {rate_name} (the weights of the previous round are kept)")
        self.coef_ = w_new

    @common_doc
    def predict(self, X) -> np.ndarray:
        """Scores ``X @ coef_`` (higher is better) of a finite ``(n, n_features)`` array.

        {feature_rows_scores}
        """
        from ..estimators._base import prediction_matrix

        if getattr(self, "coef_", None) is None:
            raise ValueError(f"{type(self).__name__} has no weights yet: call reset(n_features) or run it first")
        return prediction_matrix(X, self.coef_.shape[0]) @ self.coef_


class RandomRanker(OnlineLearner):
    """Shows a uniformly random permutation every round and learns nothing (baseline).

    Parameters
    ----------
    random_state : None, int or numpy Generator, default None
        Seeds the permutations (the stream restarts at every :meth:`reset`).

    Examples
    --------
    >>> import numpy as np
    >>> sorted(RandomRanker(random_state=0).rank(np.zeros((4, 2))).tolist())
    [0, 1, 2, 3]
    """

    feedback_k = 0

    def __init__(self, random_state=None):
        self.random_state = random_state

    def reset(self, n_features: int, *, feature_names=None) -> "RandomRanker":
        self._keep_feature_names(feature_names, n_features)
        self._rng = _rng(self.random_state)
        return self

    def rank(self, X):
        if not hasattr(self, "_rng"):
            self.reset(X.shape[1])
        return self._rng.permutation(X.shape[0])

    def update(self, X, feedback):
        return self


def check_learning_rate(value, name: str = "eta") -> float:
    """A positive finite learning rate, or ``ValueError``.

    Parameters
    ----------
    value : float
        The learning rate.
    name : str, default "eta"
        Its parameter name, for the error message.

    Returns
    -------
    float

    Examples
    --------
    >>> check_learning_rate(0.5)
    0.5
    """
    return check_real(value, name, min_value=0.0, include_min=False)


def make_schedule(value, power: float = 0.0, name: str = "eta"):
    """Rate schedule ``t -> value / t**power`` (t = 1, 2, ...); ``power=0`` is constant.

    ``value`` may also be a callable ``t -> rate`` (returned unchanged).

    Parameters
    ----------
    value : float > 0 or callable
        The rate at ``t = 1``, or a schedule ``t -> rate``.
    power : float >= 0, default 0.0
        Decay exponent of the rate.
    name : str, default "eta"
        Parameter name of the rate, for error messages.

    Returns
    -------
    callable
        ``t -> rate`` for rounds ``t = 1, 2, ...``.

    Examples
    --------
    >>> make_schedule(1.0, power=0.5)(4)
    0.5
    """
    if callable(value):
        return value
    c = check_learning_rate(value, name)
    power = check_real(power, f"{name} schedule power ({name}_power)", min_value=0.0)
    if power == 0:
        return lambda t: c
    return lambda t: c * float(t) ** -power   # never overflows (t >= 1); may underflow to 0
