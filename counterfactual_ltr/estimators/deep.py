"""Deep PropDCG (Agarwal et al. 2019, sec. 4.2): a neural ranker trained on the propensity-weighted DCG bound.

The objective is the hinge bound of Eq. (7) with the linear scoring function
replaced by a network ``f = NN_w`` (an :class:`~counterfactual_ltr.models.MLP`)::

    J(w) = (1/n) sum_q sum_{j in q} W_j lambda(1 + H_j(f))  +  alpha/2 sum_layers ||W_layer||^2
    H_j(f) = sum_{y in q, y != j} max(0, 1 - (f(x_j) - f(x_y)))

``W_j`` is the summed inverse propensity of the clicks on document ``j``
(the log is aggregated, so the cost does not grow with the number of
sessions), ``n`` the number of clicks and ``lambda`` the rank weight of
``metric`` (``"dcg"``: ``-1/log2(1 + r)``, i.e. the Deep PropDCG objective
``-(W_j) / log2(2 + sum_y hinge)`` per clicked document). The per-query
loss and its gradient with respect to the scores come from
:func:`counterfactual_ltr.surrogates.lambda_hinge_bound`; the network
back-propagates them to its parameters.

Optimisation (sec. 4.2, 5.8): Adam on mini-batches of whole query instances
-- the queries are shuffled every epoch and cut into batches whose
candidate documents total about ``batch_size`` -- with L2 weight decay
``alpha`` on the weight matrices. A batch's loss is divided by its number of
clicks (the per-click mean, an estimate of the ``1/n`` objective).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .._progress import progress
from .._segments import offsets_from_lengths, segment_gather, segment_ids
from ..logs.clicklog import ClickLog
from ..datasets import dense_features
from ..models import MLP, Adam, _check_activation, _check_float_dtype, _rng
from ..propensity import as_propensity_model
from .._validation import check_bool, check_int, check_random_state, check_real
from ._base import RankerMixin, transform_log
from ._docs import doc

__all__ = ["DeepPropDCG", "deep_propdcg_objective", "paper_lr_schedule", "query_batches", "DivergenceError"]

#: Learning-rate schedule of the paper (sec. 5.8) for 750 epochs: (fraction of the epochs, lr factor).
PAPER_SCHEDULE = ((300 / 750, 1.0), (500 / 750, 0.1), (1.0, 0.01))

#: Training stops as diverged when an epoch's loss exceeds the initial loss ``J0`` by more than this many
#: ``max(1, |J0|)``. The DCG/RBP data term lies in ``[-max W, 0]``, so such a loss comes from exploding
#: weights (weight decay) or scores (avg_rank): e.g. loss 1e7 at learning_rate=1e6.
_DIVERGENCE_FACTOR = 100.0

_FITTED = ("model_", "converged_", "initial_loss_",
           "n_features_in_", "loss_curve_", "n_iter_", "validation_scores_", "best_validation_score_",
           "best_epoch_", "learning_rates_", "preprocessor_", "n_train_clicks_", "n_train_queries_", "t_", "epoch_seconds_")


class DivergenceError(FloatingPointError, ValueError):
    """Training diverged (non-finite loss, scores or parameters). Both a FloatingPointError and a ValueError.

    Examples
    --------
    >>> issubclass(DivergenceError, ValueError)
    True
    """


def paper_lr_schedule(epoch: int, max_epochs: int, learning_rate: float) -> float:
    """Learning rate of ``epoch`` (0-based) under the schedule of section 5.8, scaled to ``max_epochs``.

    The paper trains 750 epochs: ``learning_rate`` for the first 300, ``/10``
    for the next 200, ``/100`` for the last 250. With ``max_epochs = E`` the
    boundaries become ``round(0.4 E)`` and ``round(2 E / 3)``.

    Parameters
    ----------
    epoch : int (0-based)
        The epoch whose learning rate is asked.
    max_epochs : int
        Epochs of the whole training (the schedule's boundaries scale with it).
    learning_rate : float
        The base learning rate.

    Returns
    -------
    float

    Examples
    --------
    >>> [paper_lr_schedule(e, 750, 1e-6) for e in (0, 299, 300, 499, 500, 749)]
    [1e-06, 1e-06, 1e-07, 1e-07, 1e-08, 1e-08]
    >>> [paper_lr_schedule(e, 15, 1.0) for e in (5, 6, 9, 10)]
    [1.0, 0.1, 0.1, 0.01]
    """
    for fraction, factor in PAPER_SCHEDULE:
        if epoch < round(fraction * max_epochs):
            return learning_rate * factor
    return learning_rate * PAPER_SCHEDULE[-1][1]


def deep_propdcg_objective(model, X, click_weights, query_offsets, *, alpha: float = 0.0, n_clicks=None,
                           metric="dcg", margin: float = 1.0, **metric_params):
    """Objective of one batch of queries and its gradient per parameter of ``model``.

    ``(1 / n_clicks) * sum_j W_j lambda(1 + H_j(model(X))) + alpha/2 sum ||W_layer||^2`` where the
    first term is :func:`~counterfactual_ltr.surrogates.lambda_hinge_bound` on the model's scores
    (``n_clicks`` default 1). Returns ``(objective, grads)``; raises :class:`DivergenceError` if
    the scores or the objective are not finite.

    Parameters
    ----------
    model : MLP or LinearModel
        The scoring network.
    X : array (n_docs, n_features)
        Features of the batch's documents.
    click_weights : array (n_docs,)
        ``W_j`` per document.
    query_offsets : array (n_queries + 1,)
        Query segments of the rows.
    alpha : float >= 0, default 0.0
        Weight decay on the weight matrices.
    n_clicks : int, optional
        The loss is divided by it (default 1).
    metric : str or LambdaWeight, default "dcg"
        The rank weight ``lambda``.
    margin : float, default 1.0
        The hinge's margin.
    **metric_params
        Extra parameters of ``metric``.

    Returns
    -------
    objective : float
    grads : list of arrays, one per parameter of ``model``

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr.models import MLP
    >>> net = MLP((3,), random_state=0).initialize(2)
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> obj, grads = deep_propdcg_objective(net, X, np.array([0.0, 2.0, 0.0]), np.array([0, 3]), n_clicks=1)
    >>> bool(obj < 0), len(grads) == len(net.params)
    (True, True)
    """
    from ..surrogates import lambda_hinge_bound

    with np.errstate(over="ignore", invalid="ignore"):
        scores = model.forward(X)
    if not np.all(np.isfinite(scores)):
        raise DivergenceError("the model produced non-finite scores")
    # Overflow is reported below as a DivergenceError when it makes the objective non-finite.
    with np.errstate(over="ignore", invalid="ignore"):
        loss, grad = lambda_hinge_bound(scores, click_weights, query_offsets, metric=metric, margin=margin,
                                        reduce="sum", **metric_params)
        scale = 1.0 if n_clicks is None else 1.0 / float(n_clicks)
        grads = model.backward(grad * scale)
    objective = loss * scale
    if alpha:
        with np.errstate(over="ignore", invalid="ignore"):
            penalty, penalty_grads = model.weight_decay(alpha)
            grads = [g + pg for g, pg in zip(grads, penalty_grads)]
        objective += penalty
    if not np.isfinite(objective):
        raise DivergenceError(f"the objective is not finite ({objective})")
    return float(objective), grads


class DeepPropDCG(RankerMixin, BaseEstimator):
    """Deep PropDCG: an MLP ranker trained on clicks by the propensity-weighted hinge bound (see module doc).

    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default (200,)
        Hidden layers of the MLP (the paper: one layer of 200 sigmoid units).
        ``()`` with ``activation="identity"`` is a linear ranker trained on the
        SVM PropDCG bound by SGD.
    activation : {"sigmoid", "relu", "tanh", "identity"}, default "sigmoid"
        Activation of the hidden units.
    alpha : float >= 0, default 1e-6
        L2 weight decay ``alpha/2 ||W||^2`` on the weight matrices (biases free), added to the objective.
        Deep PropDCG has no ``C``: the rule that refuses a ``C`` too large for a solver
        (:func:`~counterfactual_ltr.estimators._base.check_C_scale`) has no counterpart here, since
        Adam's steps do not grow with ``1/alpha``; an alpha that overflows the initial objective is refused.
    learning_rate : float > 0, default 1e-3
        Base Adam step size.
    lr_schedule : None, "paper" or callable, default None
        ``None``: constant. ``"paper"``: the schedule of sec. 5.8 scaled to
        ``max_epochs`` (see :func:`paper_lr_schedule`: ``learning_rate`` for the
        first 40% of the epochs, ``/10`` until two thirds, ``/100`` after). The
        paper's own setting is ``learning_rate=1e-6, lr_schedule="paper",
        max_epochs=750, alpha=1e-6, batch_size=1000``. A callable is called as
        ``lr_schedule(epoch, max_epochs, learning_rate)``.
    batch_size : int >= 1, default 1000
        Documents per mini-batch; batches hold whole queries (a query starts
        the batch in which its first document falls, so batches total about
        ``batch_size`` documents; a longer query is a batch of its own).
    max_epochs : int >= 1, default 100
        Passes over the training queries at most.
    early_stopping : bool, default False
        Stop when the validation SNIPS estimate of ``metric`` has not improved
        by more than ``tol`` for ``n_iter_no_change`` epochs, and keep the
        parameters of the best epoch. The validation clicks are the
        ``validation_log`` given to :meth:`fit`, or else the sessions of a
        random ``validation_fraction`` of the log's queries (held out of training).
    validation_fraction : float in (0, 1), default 0.1
        Share of the log's queries held out for validation when ``early_stopping`` and no
        ``validation_log`` is given.
    n_iter_no_change : int >= 1, default 10
        Epochs without an improvement of more than ``tol`` before early stopping.
    tol : float >= 0, default 0.0
        Improvement of the validation estimate that counts as one.
    metric : str or LambdaWeight, default "dcg"
        Rank weight ``lambda`` of the bound (any differentiable one of Table 1:
        "dcg", "avg_rank", "rbp"; extra parameters in ``metric_params``).
    metric_params : dict or None, default None
        Extra parameters of ``metric`` (e.g. ``{"p": 0.8}`` for "rbp").
    margin : float > 0, default 1.0
        Hinge margin (>= 1 keeps the bound).
    propensity : None, float (eta) or propensity model, default None
        Propensities of the clicks (default position-based with eta = 1).
    shuffle : bool, default True
        Shuffle the queries every epoch.
    beta1, beta2, epsilon : float, default 0.9, 0.999, 1e-8
        Adam's decay rates of the first and second moment estimates, and its denominator's offset.
    dtype : {float64, float32}, default float64
        Precision of the features, parameters and arithmetic of training (any other dtype is a ValueError).
    random_state : int, Generator or None, default None
        Seeds initialisation, shuffling and the validation split: the same
        seed gives bit-identical predictions.
    verbose : bool, default False
        Print every epoch's loss (and validation estimate).
    preprocessor : scikit-learn transformer, optional
        Fitted (a clone) on the documents of the log's queries in ``fit``
        and applied in ``predict``; tunable as ``preprocessor__<param>``.

    Attributes
    ----------
    model_ : MLP
    loss_curve_ : list of float
        Training objective per epoch (mean over the epoch's batches of the per-click loss, plus the
        weight-decay term).
    validation_scores_ : list of float or None
        Validation SNIPS estimate of ``metric`` after every epoch (when validation clicks exist).
    best_validation_score_, best_epoch_ (1-based; the kept parameters with early stopping)
    n_iter_ : int, epochs run (fewer than ``max_epochs`` after early stopping or divergence)
    converged_ : bool
        False when training diverged -- an epoch's loss above ``initial_loss_ + 100 max(1, |initial_loss_|)``:
        a ``ConvergenceWarning``, training stops and the parameters the lowest-loss epoch started from
        are restored -- or when the last epoch's loss is still above ``initial_loss_`` (also warned).
        Non-finite losses or parameters raise :class:`DivergenceError` instead.
    initial_loss_ : float, training objective of the initial parameters
    learning_rates_ : list of float, learning rate of every epoch
    t_ : int, Adam steps
    epoch_seconds_ : list of float, wall time of every epoch's training pass (validation excluded)
    n_train_clicks_, n_train_queries_ : what training used
    n_features_in_ : int

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=60, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> model = DeepPropDCG(hidden_layer_sizes=(16,), learning_rate=1e-2, max_epochs=20, random_state=0).fit(log)
    >>> model.predict(data.X).shape == (data.n_docs,), model.loss_curve_[-1] < model.loss_curve_[0]
    (True, True)
    """

    def __init__(self, hidden_layer_sizes=(200,), activation: str = "sigmoid", alpha: float = 1e-6,
                 learning_rate: float = 1e-3, lr_schedule=None, batch_size: int = 1000, max_epochs: int = 100,
                 early_stopping: bool = False, validation_fraction: float = 0.1, n_iter_no_change: int = 10,
                 tol: float = 0.0, metric="dcg", metric_params=None, margin: float = 1.0, propensity=None,
                 shuffle: bool = True, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                 dtype=np.float64, random_state=None, verbose: bool = False, preprocessor=None):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.alpha = alpha
        self.learning_rate = learning_rate
        self.lr_schedule = lr_schedule
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.metric = metric
        self.metric_params = metric_params
        self.margin = margin
        self.propensity = propensity
        self.shuffle = shuffle
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose
        self.preprocessor = preprocessor

    # ------------------------------------------------------------------ checks
    def _check_params(self, n_features=None):
        """Every hyper-parameter checked as ``fit`` uses it, whatever the others (``load_model`` runs it too)."""
        check_real(self.alpha, "alpha", min_value=0.0)
        for name in ("early_stopping", "shuffle", "verbose"):
            check_bool(getattr(self, name), name)
        as_propensity_model(self.propensity)
        _check_float_dtype(self.dtype, "dtype")
        if not isinstance(self.random_state, np.random.RandomState):   # (checking one would draw from it)
            check_random_state(self.random_state)
        check_real(self.learning_rate, "learning_rate", min_value=0.0, include_min=False)
        check_real(self.margin, "margin", min_value=0.0, include_min=False)
        check_real(self.tol, "tol", min_value=0.0)
        check_real(self.validation_fraction, "validation_fraction", min_value=0.0, max_value=1.0,
                   include_min=False, include_max=False)
        for name in ("beta1", "beta2"):
            check_real(getattr(self, name), name, min_value=0.0, max_value=1.0, include_max=False)
        check_real(self.epsilon, "epsilon", min_value=0.0, include_min=False)
        for name in ("batch_size", "max_epochs", "n_iter_no_change"):
            check_int(getattr(self, name), name, min_value=1)
        if not (self.lr_schedule is None or isinstance(self.lr_schedule, str) and self.lr_schedule == "paper"
                or callable(self.lr_schedule)):
            raise ValueError(f"lr_schedule must be None, 'paper' or a callable, got {self.lr_schedule!r}")
        _check_activation(self.activation)
        MLP(self.hidden_layer_sizes, self.activation)  # validates the layer sizes
        lam = self._lambda()
        if lam.derivative is None:
            raise ValueError(f"metric {getattr(lam, 'name', self.metric)!r} is not differentiable: "
                             "Deep PropDCG needs a differentiable rank weight")

    def _metric_params(self) -> dict:
        if self.metric_params is not None and not isinstance(self.metric_params, dict):
            raise TypeError(f"metric_params must be a dict or None, got {type(self.metric_params).__name__}")
        return dict(self.metric_params or {})

    def _lambda(self):
        from ..metrics import LambdaWeight, get_lambda

        if isinstance(self.metric, LambdaWeight):
            return self.metric
        return get_lambda(self.metric, **self._metric_params())

    def _validation_metric(self):
        return self.metric if isinstance(self.metric, str) else "dcg"

    def _lr(self, epoch: int) -> float:
        lr, E = float(self.learning_rate), int(self.max_epochs)
        if self.lr_schedule is None:
            return lr
        if self.lr_schedule == "paper":
            return paper_lr_schedule(epoch, E, lr)
        return float(self.lr_schedule(epoch, E, lr))

    # --------------------------------------------------------------------- fit
    def fit(self, log, y=None, validation_log=None):
        """Train on a :class:`ClickLog`; ``validation_log`` (optional) gives the validation clicks.

        Parameters
        ----------
        log : ClickLog
            The training clicks.
        y : ignored
            Present for scikit-learn's model selection.
        validation_log : ClickLog, optional
            Clicks for the per-epoch validation SNIPS (and early stopping).

        Returns
        -------
        self

        Raises ``ValueError`` on bad input and :class:`DivergenceError` (a
        ``FloatingPointError`` and ``ValueError``) naming the epoch if the
        loss, the scores or the parameters become non-finite; the estimator is
        then left unfitted.
        """
        for name in _FITTED:  # a failed fit must not leave an older (or NaN) model behind
            self.__dict__.pop(name, None)
        if not isinstance(log, ClickLog):
            raise ValueError(f"{type(self).__name__}.fit needs a ClickLog, got {type(log).__name__}")
        if validation_log is not None and not isinstance(validation_log, ClickLog):
            raise ValueError(f"validation_log must be a ClickLog, got {type(validation_log).__name__}")
        self._check_params()
        propensity = as_propensity_model(self.propensity)
        if log.n_clicks == 0:
            raise ValueError("the click log has no clicks: nothing to learn from")
        log, _, _ = self._begin_fit(log)
        if validation_log is not None and self.preprocessor_ is not None:
            validation_log, _ = transform_log(validation_log, self.preprocessor_)
        seeds = _rng(self.random_state).integers(0, 2**63 - 1, size=3)
        init_rng, shuffle_rng, split_rng = (np.random.default_rng(int(s)) for s in seeds)
        train_log = log
        if validation_log is None and self.early_stopping:
            train_log, validation_log = _split_by_query(log, float(self.validation_fraction), split_rng)
        if validation_log is not None and validation_log.n_clicks == 0:
            raise ValueError("the validation click log has no clicks: SNIPS early stopping is undefined")
        data = _TrainingData(train_log, propensity, np.dtype(self.dtype))
        model = MLP(self.hidden_layer_sizes, self.activation, random_state=init_rng, dtype=data.X.dtype)
        model.initialize(data.X.shape[1])
        optimizer = Adam(model.params, self.learning_rate, self.beta1, self.beta2, self.epsilon)
        validator = None if validation_log is None else _Validator(validation_log, propensity,
                                                                     self._validation_metric(), data.X.dtype)
        # The objective of the initial parameters: the yardstick of divergence (see _DIVERGENCE_FACTOR).
        try:
            initial_loss, _ = deep_propdcg_objective(model, data.X, data.W, data.offsets, alpha=float(self.alpha),
                                                     n_clicks=data.n_clicks, metric=self._lambda(),
                                                     margin=float(self.margin))
        except DivergenceError as err:
            raise ValueError(f"{type(self).__name__}: the objective of the initial parameters is not finite ({err}): "
                             f"alpha={self.alpha!r} or margin={self.margin!r} is too large for float64") from None
        model.clear_cache()
        run = self._train(model, optimizer, data, shuffle_rng, validator, initial_loss)
        self._keep_parameters(model, run, initial_loss)
        self.converged_ = not run.diverged and run.loss_curve[-1] <= initial_loss + 1e-9 * max(1.0, abs(initial_loss))
        self.initial_loss_ = initial_loss
        self.model_ = model
        self.n_features_in_ = data.X.shape[1]
        self.loss_curve_ = run.loss_curve
        self.n_iter_ = run.epoch
        self.learning_rates_ = run.learning_rates
        self.t_ = optimizer.t
        self.epoch_seconds_ = run.seconds
        self.validation_scores_ = run.validation_scores if validator is not None else None
        self.best_validation_score_ = (validator.sign * run.best_score) if validator is not None else None
        self.best_epoch_ = run.best_epoch if validator is not None else run.epoch
        self.n_train_clicks_ = data.n_clicks
        self.n_train_queries_ = data.n_queries
        return self._end_fit()

    def _train(self, model, optimizer, data, shuffle_rng, validator, initial_loss):
        """The epochs: Adam steps, divergence and early-stopping checks; returns their :class:`_Run`."""
        run = _Run()
        blow_up = initial_loss + _DIVERGENCE_FACTOR * max(1.0, abs(initial_loss))
        bar = progress(range(1, int(self.max_epochs) + 1), desc=type(self).__name__, unit="epoch", leave=False)
        for epoch in bar:
            run.epoch = epoch
            t0 = time.perf_counter()
            # An epoch's loss is measured along its steps, so it speaks for the parameters it started from.
            run.start_params = model.get_parameters()
            lr = self._lr(epoch - 1)
            if not (np.isfinite(lr) and lr > 0):
                raise ValueError(f"the learning-rate schedule gave {lr} at epoch {epoch}")
            perm = shuffle_rng.permutation(data.n_queries) if self.shuffle else np.arange(data.n_queries)
            epoch_loss = self._epoch(model, optimizer, data, perm, lr, epoch)
            run.loss_curve.append(epoch_loss)
            run.learning_rates.append(lr)
            run.seconds.append(time.perf_counter() - t0)
            if epoch_loss > blow_up:
                run.diverged = True
                warnings.warn(f"{type(self).__name__} diverged at epoch {epoch} (learning rate {lr:g}): the "
                              f"training loss {epoch_loss:.4g} is far above the initial {initial_loss:.4g}; training "
                              "stopped and the parameters the lowest-loss epoch started from restored (converged_ "
                              "is False); lower learning_rate", ConvergenceWarning, stacklevel=3)
                break
            if epoch_loss < run.train_best[0]:
                run.train_best = (epoch_loss, run.start_params)
            if validator is not None:
                score = validator.score(model)
                run.validation_scores.append(score)
                signed = validator.sign * score
                run.stall = 0 if signed > run.best_score + float(self.tol) else run.stall + 1
                if signed > run.best_score:
                    run.best_score, run.best_epoch, run.best_params = signed, epoch, model.get_parameters()
                if self.verbose:
                    print(f"epoch {epoch}: loss {epoch_loss:.6f} validation {score:.5f}", flush=True)
                if self.early_stopping and run.stall >= int(self.n_iter_no_change):
                    break
            elif self.verbose:
                print(f"epoch {epoch}: loss {epoch_loss:.6f}", flush=True)
        bar.close()
        return run

    def _epoch(self, model, optimizer, data, perm, lr, epoch):
        """One pass over the queries in the order ``perm``, in batches of whole queries; the per-click loss."""
        order = segment_gather(data.offsets, perm)
        Xp, Wp, cp = data.X[order], data.W[order], data.counts[order]
        offs_p = offsets_from_lengths(data.lengths[perm])
        q_bounds = query_batches(offs_p, int(self.batch_size))
        alpha, metric, margin = float(self.alpha), self._lambda(), float(self.margin)
        total = 0.0
        for b in range(len(q_bounds) - 1):
            q0, q1 = q_bounds[b], q_bounds[b + 1]
            r0, r1 = offs_p[q0], offs_p[q1]
            n_clicks_b = int(cp[r0:r1].sum())
            try:
                obj, grads = deep_propdcg_objective(model, Xp[r0:r1], Wp[r0:r1], offs_p[q0:q1 + 1] - r0,
                                                    alpha=alpha, n_clicks=n_clicks_b, metric=metric, margin=margin)
            except DivergenceError as err:
                raise DivergenceError(f"{type(self).__name__} diverged at epoch {epoch} (batch {b + 1}, "
                                      f"learning rate {lr:g}): {err}; lower learning_rate (or alpha)") from None
            total += obj * n_clicks_b
            with np.errstate(over="ignore", invalid="ignore"):
                optimizer.step(grads, lr)
        model.clear_cache()
        epoch_loss = total / data.n_clicks
        if not (np.isfinite(epoch_loss) and model.all_finite()):
            raise DivergenceError(f"{type(self).__name__} diverged at epoch {epoch} (learning rate {lr:g}): "
                                  "non-finite loss or parameters; lower learning_rate (or alpha)")
        return epoch_loss

    def _keep_parameters(self, model, run, initial_loss):
        """The parameters to keep: the best validation epoch's, or before a divergence; warn if the loss rose."""
        if self.early_stopping and run.best_params is not None:
            model.set_parameters(run.best_params)
        elif run.diverged:  # a first epoch that diverges restores the initial parameters
            model.set_parameters(run.train_best[1] if run.train_best[1] is not None else run.start_params)
        elif run.loss_curve[-1] > initial_loss + 1e-9 * max(1.0, abs(initial_loss)):
            warnings.warn(f"{type(self).__name__}: training ended with loss {run.loss_curve[-1]:.4g}, above the "
                          f"initial {initial_loss:.4g} (converged_ is False); lower learning_rate", ConvergenceWarning,
                          stacklevel=3)
        model.clear_cache()

    # ----------------------------------------------------------------- predict
    @doc
    def predict(self, X):
        """Scores of the rows of ``X`` (array, RankingDataset or ClickLog's data); higher is better.

        {predict}
        """
        check_is_fitted(self, "model_")
        X = self._prediction_features(X, self.model_.params[0].shape[0])
        return _predict_chunked(self.model_, X)

    def objective(self, log) -> float:
        """Training objective (per-click bound + weight decay) of the fitted model on a click log.

        Parameters
        ----------
        log : ClickLog
            The clicks (propensities from ``propensity``).

        Returns
        -------
        float
        """
        check_is_fitted(self, "model_")
        if getattr(self, "preprocessor_", None) is not None:
            log, _ = transform_log(log, self.preprocessor_)
        agg = log.aggregate(as_propensity_model(self.propensity))
        if agg.n_clicks == 0:
            raise ValueError("the click log has no clicks")
        data = agg.data
        rows = data.rows_of(agg.queries)
        obj, _ = deep_propdcg_objective(self.model_, dense_features(data.X[rows]), agg.weights[rows],
                                        offsets_from_lengths(data.query_lengths[agg.queries]),
                                        alpha=float(self.alpha), n_clicks=agg.n_clicks, metric=self._lambda(),
                                        margin=float(self.margin))
        self.model_.clear_cache()
        return obj


class _TrainingData:
    """The training clicks of a log, aggregated per document, on the rows of the queries with clicks."""

    def __init__(self, log, propensity, dtype):
        agg = log.aggregate(propensity)
        if agg.n_clicks == 0:
            raise ValueError("the training part of the click log has no clicks: nothing to learn from")
        data = agg.data
        queries = agg.queries
        rows = data.rows_of(queries)
        self.X = np.ascontiguousarray(dense_features(data.X[rows]), dtype=dtype)
        self.W = agg.weights[rows]
        self.counts = agg.click_counts[rows]
        self.lengths = data.query_lengths[queries]
        self.offsets = offsets_from_lengths(self.lengths)
        self.n_queries = len(queries)
        self.n_clicks = agg.n_clicks


class _Run:
    """What the epochs of one fit record."""

    def __init__(self):
        self.epoch = 0
        self.start_params = None                # the parameters the last epoch started from
        self.train_best = (np.inf, None)        # lowest epoch loss and the parameters the epoch started from
        self.diverged = False
        self.loss_curve, self.validation_scores, self.learning_rates, self.seconds = [], [], [], []
        self.best_score, self.best_epoch, self.best_params, self.stall = -np.inf, 0, None, 0


def query_batches(query_offsets, batch_size: int) -> np.ndarray:
    """Cut consecutive whole queries into batches of about ``batch_size`` documents.

    Query ``q`` joins the batch in which its first document falls (document
    index ``query_offsets[q] // batch_size``), so a batch holds whole queries
    and about ``batch_size`` documents; a query longer than ``batch_size`` is a
    batch of its own. Returns the query boundaries: batch ``b`` holds queries
    ``bounds[b]:bounds[b + 1]``.

    Parameters
    ----------
    query_offsets : array (n_queries + 1,)
        Query segments of the rows.
    batch_size : int >= 1
        Documents per batch (about).

    Returns
    -------
    array of int

    Examples
    --------
    >>> query_batches([0, 4, 8, 9, 20, 22], 5).tolist()
    [0, 2, 4, 5]
    """
    offsets = np.asarray(query_offsets, dtype=np.int64)
    # A batch larger than all documents is one batch (and keeps huge sizes within int64).
    block = offsets[:-1] // min(int(batch_size), int(offsets[-1]) + 1)
    return np.flatnonzero(np.r_[True, block[1:] != block[:-1], True])


def _predict_chunked(model, X, chunk: int = 65536) -> np.ndarray:
    out = np.empty(X.shape[0], dtype=np.float64)
    for start in range(0, X.shape[0], chunk):
        out[start:start + chunk] = model.predict(dense_features(X[start:start + chunk]))
    return out


def _split_by_query(log: ClickLog, fraction: float, rng) -> tuple[ClickLog, ClickLog]:
    """Hold out the sessions of a random ``fraction`` of the log's queries (sessions of a query stay together).

    Only queries with clicks are held out: the others carry no SNIPS signal, and a validation part
    without clicks would leave early stopping undefined.
    """
    clicked_sessions = np.unique(segment_ids(log.session_offsets)[np.flatnonzero(log.clicks)])
    queries = np.unique(log.session_query[clicked_sessions])
    if len(queries) < 2:
        raise ValueError("early stopping needs at least two queries with clicks in the log to hold some out for "
                         "validation (early_stopping=True)")
    n_val = min(max(1, int(round(fraction * len(queries)))), len(queries) - 1)
    held = rng.choice(queries, size=n_val, replace=False)
    is_val = np.isin(log.session_query, held)
    return log[np.flatnonzero(~is_val)], log[np.flatnonzero(is_val)]


class _Validator:
    """SNIPS estimate of a metric on a validation log, scoring only the log's queries."""

    def __init__(self, log: ClickLog, propensity, metric: str, dtype):
        from ..evaluation import LOWER_IS_BETTER

        self.log, self.propensity, self.metric = log, propensity, metric
        self.rows = log.data.rows_of(np.unique(log.session_query))
        self.X = np.ascontiguousarray(dense_features(log.data.X[self.rows]), dtype=dtype)
        self.sign = -1.0 if metric in LOWER_IS_BETTER else 1.0

    def score(self, model) -> float:
        from ..evaluation import snips_estimate

        scores = np.zeros(self.log.data.n_docs)
        scores[self.rows] = _predict_chunked(model, self.X)
        return snips_estimate(self.log, scores, metric=self.metric, propensity=self.propensity, n_bootstrap=0).value
