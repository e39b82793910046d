"""Gradient-boosted trees on the counterfactual objective: PropDCG with LightGBM as the engine.

:class:`GBDTPropDCG` fits LightGBM trees (an optional extra, ``pip install 'counterfactual-ltr[trees]'``)
to a custom objective over the click log's aggregate (``W_j``: the summed inverse propensity of
the clicks on document ``j``; the cost does not grow with the number of sessions):

* ``objective="propdcg"``: the propensity-weighted rank bound of Agarwal et al. (2019, Eq. 7),
  ``J(s) = (1/n) sum_j W_j lambda(1 + H_j(s))`` (``n`` clicks, ``lambda`` the rank weight of
  ``metric``), with every pair's hinge smoothed by a softplus of temperature ``temperature``
  (:func:`~counterfactual_ltr.surrogates.smooth_lambda_bound`): an upper bound of the hinge, so
  ``J`` still bounds the IPS risk of the ranking for ``W >= 0``; ``temperature=0`` would be the SVM
  PropDCG bound itself, whose curvature is 0 almost everywhere. Every pair (clicked document x
  other document of its query) is evaluated each round; for long lists ``smoothing="huber"``
  takes the shifted Huber smoothing from sorted scores instead (one sort per round).
* ``objective="ips_lambdarank"``: LambdaMART's gradients with each clicked document's pairs
  weighted by its inverse propensity (:func:`~counterfactual_ltr.surrogates.ips_lambdarank`).

Non-convexity. ``lambda`` is concave for DCG and RBP: ``J`` is a difference of convex functions
in the scores. Every boosting round is one Newton step, and it is taken on the convex-concave
procedure's majoriser *at that round's scores*: the gradient is ``J``'s own (the majoriser touches
``J`` with the same gradient), the curvature the majoriser's diagonal, with the CCP weights
``W_j lambda'(1 + H_j)`` of :func:`counterfactual_ltr.solvers.ccp.linearised_weights` re-computed each
round. Re-linearising every round costs nothing extra (the hinge sums come from the same pass
as the gradient), while a linearisation kept for ``k`` rounds would boost towards a stale
majoriser; the dropped ``lambda''`` term is negative, so the curvature is the conservative one.
A document whose curvature falls below ``1e-6`` of the round's largest gets that floor (a round
with an underflowing curvature would otherwise make a leaf value ``-g / h`` explode).

Scale: LightGBM receives the gradient and curvature of ``n_rows * J`` (``n_rows`` training rows),
so that per-row values are of order one as for LightGBM's own objectives and ``min_child_weight``
and ``reg_lambda`` mean the same whatever the number of clicks. The training rows are the rows of
the queries with a click (the others carry no gradient). Trust bias (an affine ``propensity``)
gives negative ``W_j``: their gradient is kept and their curvature (negative) left out.

Reproducibility: ``random_state`` seeds LightGBM (``seed``) and the validation split;
``deterministic=True`` and ``force_row_wise=True`` are always set, with ``n_jobs`` threads, so the
same seed and data give bit-identical trees. Safe model files hold the booster's own text model
(:meth:`GBDTPropDCG.booster_to_array`); opening one runs no code.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .._segments import offsets_from_lengths
from .._validation import check_bool, check_int, check_real
from ..logs.aggregate import ClickAggregate
from ..logs.clicklog import ClickLog
from ..propensity import as_propensity_model
from ._base import RankerMixin, click_aggregate, transform_log
from ._booster_text import check_booster_text

__all__ = ["GBDTPropDCG", "GBDT_GRID", "ConstantRankerWarning", "LightGBMWarning", "check_lgb_params",
           "lightgbm_or_raise"]

#: The recommended grid of :class:`GBDTPropDCG` (a ``param_grid`` for ``GridSearchCV``, scored by
#: a SNIPS scorer over ``GroupKFold`` of the log's queries). ``cltr fit --model gbdt-propdcg``
#: searches it for every tree option not given, so the command line and Python share one grid.
#: Every tree on half the features (``colsample_bytree``): measured better than all features in
#: this recipe; both objectives, as neither is better on every data set (``docs/trees.md``).
GBDT_GRID = {"n_estimators": [100, 300], "num_leaves": [7, 31], "learning_rate": [0.1], "colsample_bytree": [0.5],
             "objective": ["propdcg", "ips_lambdarank"]}

OBJECTIVES = ("propdcg", "ips_lambdarank")
# A document's curvature is at least this share of the round's largest (see the module docstring).
_CURVATURE_FLOOR = 1e-6
# LightGBM parameters (canonical names) set from this class's own (the value: the parameter that sets it);
# lgb_params may not name them or any of their aliases.
_OWN_LGB_KEYS = {"objective": "objective", "num_iterations": "n_estimators", "learning_rate": "learning_rate",
                 "num_leaves": "num_leaves", "max_depth": "max_depth", "min_data_in_leaf": "min_child_samples",
                 "min_sum_hessian_in_leaf": "min_child_weight", "bagging_fraction": "subsample",
                 "bagging_freq": "subsample_freq", "feature_fraction": "colsample_bytree", "lambda_l1": "reg_alpha",
                 "lambda_l2": "reg_lambda", "seed": "random_state", "num_threads": "n_jobs",
                 "early_stopping_round": "early_stopping", "deterministic": "(always True)",
                 "force_row_wise": "(always True)", "verbosity": "(LightGBM's warnings are Python warnings)",
                 "metric": "metric (the validation SNIPS estimate)"}
# Parameters whose model a GBDTPropDCG model file cannot hold or serve (see _booster_text): refused up front.
_UNSAVEABLE_LGB_KEYS = {"linear_tree": "linear trees", "categorical_feature": "categorical splits"}


def _lgb_aliases(lgb) -> dict:
    """Every LightGBM parameter name and alias -> its canonical name, from LightGBM's own table."""
    table = lgb.basic._ConfigAliases
    table.get("verbosity")      # fills the table lazily
    return {alias: name for name, aliases in table.aliases.items() for alias in [name, *aliases]}


def check_lgb_params(lgb_params, lgb=None) -> dict:
    """``lgb_params`` checked against LightGBM's parameter list: a ``ValueError`` naming a bad key.

    Unknown names (typically misspelt; LightGBM would ignore them), names or aliases of a
    parameter this class sets from its own (LightGBM would drop one of the two), and parameters
    whose model cannot be saved or served (linear trees, categorical splits) are refused.

    Parameters
    ----------
    lgb_params : dict or None
        Extra LightGBM parameters, as ``GBDTPropDCG(lgb_params=...)`` takes them.
    lgb : module, optional
        ``lightgbm`` (imported when not given).

    Returns
    -------
    dict

    Examples
    --------
    >>> check_lgb_params({"max_bin": 63})
    {'max_bin': 63}
    >>> check_lgb_params({"eta": 0.9})
    Traceback (most recent call last):
    ...
    ValueError: lgb_params key 'eta' (an alias of LightGBM's 'learning_rate') is set from GBDTPropDCG's own parameter learning_rate: set learning_rate=... instead
    """
    if lgb_params is None:
        return {}
    if not isinstance(lgb_params, dict):
        raise TypeError(f"lgb_params must be a dict or None, got {type(lgb_params).__name__}")
    aliases = _lgb_aliases(lightgbm_or_raise() if lgb is None else lgb)
    for key in lgb_params:
        if not isinstance(key, str):
            raise ValueError(f"lgb_params keys must be LightGBM parameter names (str), got {key!r}")
        name = aliases.get(key)
        if name is None:
            import difflib

            close = difflib.get_close_matches(key, list(aliases), n=3)
            raise ValueError(f"lgb_params key {key!r} is not a LightGBM parameter"
                             + (f" (did you mean {', '.join(map(repr, close))}?)" if close else "")
                             + "; see LightGBM's parameter list")
        what = f"lgb_params key {key!r}" + (f" (an alias of LightGBM's {name!r})" if key != name else "")
        if name in _OWN_LGB_KEYS:
            own = _OWN_LGB_KEYS[name]
            raise ValueError(f"{what} is set by GBDTPropDCG itself {own}" if own.startswith("(") else
                             f"{what} is set from GBDTPropDCG's own parameter {own}: set {own.split()[0]}=... "
                             "instead")
        if name in _UNSAVEABLE_LGB_KEYS:
            raise ValueError(f"{what} gives {_UNSAVEABLE_LGB_KEYS[name]}, which a GBDTPropDCG model file cannot "
                             "hold (save_model would write a model load_model refuses): leave it out"
                             + (" and encode categories as numbers or one-hot columns"
                                if name == "categorical_feature" else ""))
    return dict(lgb_params)


_FITTED = ("booster_", "n_estimators_", "objective_history_", "validation_scores_", "best_iteration_",
           "n_features_in_", "preprocessor_", "n_train_clicks_", "n_train_rows_", "n_train_queries_",
           "n_pairs_", "fit_seconds_")


def lightgbm_or_raise():
    """The ``lightgbm`` module, or an ``ImportError`` naming the extra that installs it.

    Returns
    -------
    module

    Examples
    --------
    >>> lightgbm_or_raise().__name__
    'lightgbm'
    """
    try:
        import lightgbm
    except ImportError:
        raise ImportError("GBDTPropDCG needs LightGBM: pip install 'counterfactual-ltr[trees]' "
                          "(or pip install 'lightgbm>=4')") from None
    return lightgbm


class GBDTPropDCG(RankerMixin, BaseEstimator):
    """Gradient-boosted trees (LightGBM) trained on clicks by the propensity-weighted DCG bound (see module doc).

    Parameters
    ----------
    objective : {"propdcg", "ips_lambdarank"}, default "propdcg"
        ``"propdcg"``: the softplus-smoothed rank bound of Agarwal et al. (2019, Eq. 7) for the
        rank weight of ``metric``; ``"ips_lambdarank"``: LambdaMART's gradients with each clicked
        document's pairs weighted by its inverse propensity.
    metric : str or LambdaWeight, default "dcg"
        The rank weight ``lambda``: "dcg", "avg_rank", "rbp" (differentiable, for "propdcg"; "prec@k"
        also for "ips_lambdarank"); extra parameters in ``metric_params``. The validation SNIPS
        estimate (early stopping) is of the same metric.
    metric_params : dict or None, default None
        Extra parameters of ``metric`` (e.g. ``{"p": 0.8}`` for "rbp").
    temperature : float > 0, default 1.0
        Softplus temperature of the smoothed hinges ("propdcg"), in score units as the margin: each
        pair's term exceeds its hinge by at most ``temperature * log 2``. Smaller is a tighter bound
        but flatter curvature away from the margin (slower, noisier leaves); see ``docs/trees.md``.
        With ``smoothing="huber"``: the Huber band, in ``(0, margin]``.
    smoothing : {"softplus", "huber"}, default "softplus"
        "softplus" evaluates every pair (clicked document x other document of its query) each
        round; "huber", the Huber-smoothed hinge shifted by half its band (also an upper bound of
        the hinge), comes from sorted scores without forming pairs: one sort per round whatever
        the list length, for long lists. Its curvature is 0 outside the band, so every document's
        curvature is raised to at least ``|gradient| / margin`` (no document's own Newton step
        exceeds a margin).
    margin : float > 0, default 1.0
        Hinge margin ("propdcg"; >= 1 keeps the bound on the rank).
    sigma : float > 0, default 1.0
        Scale of LambdaMART's logistic ("ips_lambdarank").
    n_estimators : int >= 1, default 100
        Boosting rounds (trees).
    learning_rate : float > 0, default 0.1
        Shrinkage of every tree.
    num_leaves : int >= 2, default 31
        Leaves per tree at most.
    max_depth : int, default -1
        Depth per tree at most (-1: no limit).
    min_child_samples : int >= 1, default 20
        Rows per leaf at least (LightGBM's ``min_data_in_leaf``).
    min_child_weight : float >= 0, default 1e-3
        Summed curvature per leaf at least (``min_sum_hessian_in_leaf``).
    subsample : float in (0, 1], default 1.0
        Share of the rows bagged for each tree (with ``subsample_freq > 0``).
    subsample_freq : int >= 0, default 0
        Bag every ``subsample_freq`` rounds (0: no bagging).
    colsample_bytree : float in (0, 1], default 0.5
        Share of the features each tree may use. Half (not LightGBM's 1.0), as in ``GBDT_GRID``:
        trained on clicks, trees on half the features ranked held-out queries better in most paired
        runs (``docs/trees.md``), as Agarwal et al. (2019) set LambdaRank.
    reg_alpha : float >= 0, default 0.0
        L1 penalty on the leaf values.
    reg_lambda : float >= 0, default 0.0
        L2 penalty on the leaf values.
    lgb_params : dict or None, default None
        Further LightGBM parameters (e.g. ``{"max_bin": 63}``), checked in ``fit`` by
        :func:`check_lgb_params` against LightGBM's own table: unknown names, the ones above and
        their aliases (``eta``, ``num_boost_round``, ...) and options a model file cannot hold
        (linear trees, categorical features) are a ``ValueError``. LightGBM's warnings arrive as
        :class:`LightGBMWarning`; a model whose trees all have one leaf (a constant ranker, e.g.
        ``min_child_samples`` above half the training rows) warns with :class:`ConstantRankerWarning`.
    propensity : None, float (eta) or propensity model, default None
        Examination propensities of the clicks (default position-based with eta = 1); a
        trust-bias model gives the affine correction (negative weights allowed).
    early_stopping : bool, default False
        Stop when the validation SNIPS estimate of ``metric`` has not improved by more than ``tol``
        for ``n_iter_no_change`` rounds, and keep the trees of the best round. The validation
        clicks are the ``validation_log`` given to :meth:`fit`, or else the sessions of a random
        ``validation_fraction`` of the log's queries (held out of training).
    validation_fraction : float in (0, 1), default 0.1
        Share of the log's queries held out when ``early_stopping`` and no ``validation_log``.
    n_iter_no_change : int >= 1, default 10
        Rounds without an improvement of more than ``tol`` before early stopping.
    tol : float >= 0, default 0.0
        Improvement of the validation estimate that counts as one.
    n_jobs : int >= 1, default 1
        LightGBM threads.
    random_state : int, Generator or None, default None
        Seeds LightGBM (bagging, feature sampling) and the validation split; ``None`` keeps
        LightGBM's fixed default seeds.
    preprocessor : scikit-learn transformer, optional
        Fitted (a clone) on the documents of the log's queries in ``fit`` and applied in
        ``predict``; tunable as ``preprocessor__<param>`` (trees rarely need one).

    Attributes
    ----------
    booster_ : lightgbm.Booster
        The trees (those of the best round with early stopping).
    n_estimators_ : int
        Trees kept.
    objective_history_ : array
        The training objective (per click) at the scores every round started from. For "propdcg" a
        ``ConvergenceWarning`` says so when its last value is above its first (a learning rate that
        overshoots the Newton steps); "ips_lambdarank"'s loss is re-weighted by each round's ranks.
    validation_scores_ : array or None
        Validation SNIPS estimate of ``metric`` after every round (when validation clicks exist).
    best_iteration_ : int
        Rounds kept (the best validation round with early stopping, else all).
    n_train_clicks_, n_train_rows_, n_train_queries_, n_pairs_ : int
        What training used (rows of the queries with clicks; pairs of a clicked row and another row of its query).
    fit_seconds_ : float
        Wall time of the boosting.
    preprocessor_ : the fitted preprocessor or None
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=60, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> model = GBDTPropDCG(n_estimators=30, num_leaves=7, random_state=0).fit(log)
    >>> model.predict(data).shape == (data.n_docs,), bool(model.objective_history_[-1] < model.objective_history_[0])
    (True, True)
    """

    def __init__(self, objective: str = "propdcg", metric="dcg", metric_params=None, temperature: float = 1.0,
                 smoothing: str = "softplus", margin: float = 1.0, sigma: float = 1.0, n_estimators: int = 100, learning_rate: float = 0.1,
                 num_leaves: int = 31, max_depth: int = -1, min_child_samples: int = 20,
                 min_child_weight: float = 1e-3, subsample: float = 1.0, subsample_freq: int = 0,
                 colsample_bytree: float = 0.5, reg_alpha: float = 0.0, reg_lambda: float = 0.0, lgb_params=None,
                 propensity=None, early_stopping: bool = False, validation_fraction: float = 0.1,
                 n_iter_no_change: int = 10, tol: float = 0.0, n_jobs: int = 1, random_state=None,
                 preprocessor=None):
        self.objective = objective
        self.metric = metric
        self.metric_params = metric_params
        self.temperature = temperature
        self.smoothing = smoothing
        self.margin = margin
        self.sigma = sigma
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.max_depth = max_depth
        self.min_child_samples = min_child_samples
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.subsample_freq = subsample_freq
        self.colsample_bytree = colsample_bytree
        self.reg_alpha = reg_alpha
        self.reg_lambda = reg_lambda
        self.lgb_params = lgb_params
        self.propensity = propensity
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.preprocessor = preprocessor

    # ------------------------------------------------------------------ checks
    def _lambda(self):
        from ..metrics import LambdaWeight, get_lambda

        if self.metric_params is not None and not isinstance(self.metric_params, dict):
            raise TypeError(f"metric_params must be a dict or None, got {type(self.metric_params).__name__}")
        if isinstance(self.metric, LambdaWeight):
            return self.metric
        return get_lambda(self.metric, **(self.metric_params or {}))

    def _check_params(self, n_features=None):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        lam = self._lambda()
        if self.objective == "propdcg" and lam.derivative is None:
            raise ValueError(f"metric {lam.name!r} is not differentiable: objective='propdcg' needs a "
                             "differentiable rank weight (use objective='ips_lambdarank')")
        from ..surrogates import SMOOTHINGS, check_width

        if self.smoothing not in SMOOTHINGS:
            raise ValueError(f"smoothing must be one of {SMOOTHINGS}, got {self.smoothing!r}")
        check_width(self.margin, self.temperature, self.smoothing)
        for name in ("temperature", "margin", "sigma", "learning_rate"):
            check_real(getattr(self, name), name, min_value=0.0, include_min=False)
        for name in ("min_child_weight", "reg_alpha", "reg_lambda", "tol"):
            check_real(getattr(self, name), name, min_value=0.0)
        for name in ("subsample", "colsample_bytree"):
            check_real(getattr(self, name), name, min_value=0.0, max_value=1.0, include_min=False)
        check_real(self.validation_fraction, "validation_fraction", min_value=0.0, max_value=1.0,
                   include_min=False, include_max=False)
        for name, low in (("n_estimators", 1), ("num_leaves", 2), ("min_child_samples", 1), ("subsample_freq", 0),
                          ("n_iter_no_change", 1), ("n_jobs", 1)):
            check_int(getattr(self, name), name, min_value=low)
        check_int(self.max_depth, "max_depth", min_value=-1)
        check_bool(self.early_stopping, "early_stopping")
        check_lgb_params(self.lgb_params)
        return lam

    def _warn_unused_options(self):
        """A warning for options set away from their defaults that the chosen objective does not read.

        A warning rather than an error: a grid over ``objective`` with ``smoothing="huber"`` set for
        its ``"propdcg"`` arm is a sound search, and its ``"ips_lambdarank"`` fits simply ignore it.
        """
        if self.objective == "ips_lambdarank":
            unused = {"smoothing": (self.smoothing, "softplus"), "temperature": (self.temperature, 1.0),
                      "margin": (self.margin, 1.0)}
            other, why = "propdcg", "LambdaMART's logistic gradients (scaled by sigma) are not smoothed hinges"
        else:
            unused, other = {"sigma": (self.sigma, 1.0)}, "ips_lambdarank"
            why = "the smoothed hinges of propdcg have no logistic scale"
        given = [f"{name}={value!r}" for name, (value, default) in unused.items() if value != default]
        if given:
            warnings.warn(f"{type(self).__name__}: {', '.join(given)} {'is an option' if len(given) == 1 else 'are options'}"
                          f" of objective={other!r}, ignored with objective={self.objective!r}: {why}",
                          UserWarning, stacklevel=3)

    def _seed(self):
        from ..models import _rng

        if self.random_state is None:
            return None
        if isinstance(self.random_state, (int, np.integer)) and not isinstance(self.random_state, bool):
            check_int(self.random_state, "random_state", min_value=0)
            return int(self.random_state)
        return int(_rng(self.random_state).integers(0, 2**31 - 1))

    def _lgb_params(self, seed) -> dict:
        params = {"learning_rate": float(self.learning_rate), "num_leaves": int(self.num_leaves),
                  "max_depth": int(self.max_depth), "min_data_in_leaf": int(self.min_child_samples),
                  "min_sum_hessian_in_leaf": float(self.min_child_weight), "bagging_fraction": float(self.subsample),
                  "bagging_freq": int(self.subsample_freq), "feature_fraction": float(self.colsample_bytree),
                  "lambda_l1": float(self.reg_alpha), "lambda_l2": float(self.reg_lambda),
                  "num_threads": int(self.n_jobs), "deterministic": True, "force_row_wise": True, "verbose": 0,
                  "metric": "None"}
        if seed is not None:
            params["seed"] = seed
        params.update(self.lgb_params or {})
        return params

    # --------------------------------------------------------------------- fit
    def fit(self, log, y=None, validation_log=None):
        """Boost trees on a :class:`ClickLog` or :class:`ClickAggregate` (propensities from ``propensity``).

        Parameters
        ----------
        log : ClickLog or ClickAggregate
            The training clicks (early stopping without ``validation_log`` needs a ``ClickLog``).
        y : ignored
            Present for scikit-learn's model selection.
        validation_log : ClickLog or ClickAggregate, optional
            Clicks for the per-round validation SNIPS estimate (and early stopping).

        Returns
        -------
        self
        """
        lgb = lightgbm_or_raise()
        for name in _FITTED:  # a failed fit must not leave an older model behind
            self.__dict__.pop(name, None)
        if not isinstance(log, (ClickLog, ClickAggregate)):
            raise ValueError(f"{type(self).__name__}.fit needs a ClickLog or a ClickAggregate, got {type(log).__name__}")
        if validation_log is not None and not isinstance(validation_log, (ClickLog, ClickAggregate)):
            raise ValueError(f"validation_log must be a ClickLog or a ClickAggregate, got {type(validation_log).__name__}")
        lam = self._check_params()
        self._warn_unused_options()
        seed = self._seed()
        propensity = as_propensity_model(self.propensity)
        log, _, _ = self._begin_fit(log)
        if validation_log is not None and self.preprocessor_ is not None:
            validation_log = _transformed_clicks(validation_log, self.preprocessor_)
        if validation_log is None and self.early_stopping:
            log, validation_log = self._held_out(log, seed)
        rows = _TrainingRows(click_aggregate(log, propensity, type(self).__name__, allow_affine=True),
                             self.smoothing if self.objective == "propdcg" else "softplus")
        history = []
        params = self._lgb_params(seed)
        params["objective"] = self._objective_function(rows, lam, history)
        # feature_pre_filter off: a min_child_samples that no split can meet gives trees of one leaf (a constant
        # ranker), not LightGBM's error that no feature is left.
        train_set = lgb.Dataset(rows.X, label=np.zeros(rows.n_rows), params={"verbose": 0, "feature_pre_filter": False})
        fit_kw, validation = {}, None
        if validation_log is not None:
            validation = _SnipsValidation(validation_log, propensity, self._validation_metric())
            fit_kw = validation.train_arguments(lgb, train_set, self)
        started = time.perf_counter()
        with _LightGBMWarnings(lgb):
            try:
                booster = lgb.train(params, train_set, num_boost_round=int(self.n_estimators), **fit_kw)
            except lgb.basic.LightGBMError as err:
                raise ValueError(f"LightGBM refused the parameters ({err}); lgb_params={self.lgb_params!r}") from None
        self.fit_seconds_ = time.perf_counter() - started
        best = booster.best_iteration if (self.early_stopping and booster.best_iteration > 0) else booster.num_trees()
        # A booster rebuilt from its text holds no reference to the objective function (pickle-safe).
        self.booster_ = lgb.Booster(model_str=booster.model_to_string(num_iteration=best))
        self.n_estimators_ = self.booster_.num_trees()
        self.best_iteration_ = int(best)
        self.objective_history_ = np.asarray(history)
        self.validation_scores_ = None if validation is None else np.asarray(validation.record["validation"]["snips"])
        self.n_features_in_ = rows.X.shape[1]
        self.n_train_clicks_, self.n_train_rows_ = rows.n_clicks, rows.n_rows
        self.n_train_queries_, self.n_pairs_ = rows.n_queries, rows.pairs.n_pairs
        if all(tree["num_leaves"] == 1 for tree in self.booster_.dump_model()["tree_info"]):
            why = (f"min_child_samples={self.min_child_samples!r} is more than half the {rows.n_rows} training rows "
                   "(the rows of the queries with a click): no split keeps that many on both sides; lower it"
                   if 2 * int(self.min_child_samples) > rows.n_rows else
                   "no split improved the objective (min_child_weight, reg_lambda or the clicks); see LightGBM's "
                   "warnings")
            warnings.warn(f"{type(self).__name__}: every tree has a single leaf, so the model ranks every document "
                          f"equal: {why}", ConstantRankerWarning, stacklevel=2)
        if self.objective == "propdcg" and len(history) > 1 and history[-1] > history[0]:
            warnings.warn(f"{type(self).__name__}: the training objective rose from {history[0]:.4g} to "
                          f"{history[-1]:.4g} over the rounds (learning_rate={self.learning_rate!r} overshoots); "
                          "lower learning_rate", ConvergenceWarning, stacklevel=2)
        return self._end_fit()

    def _validation_metric(self):
        return self.metric if isinstance(self.metric, str) else "dcg"

    def _held_out(self, log, seed):
        from .deep import _split_by_query

        if not isinstance(log, ClickLog):
            raise ValueError("early_stopping without a validation_log holds out queries of a ClickLog; with a "
                             "ClickAggregate give validation_log=...")
        rng = np.random.default_rng(None if seed is None else seed + 1)
        return _split_by_query(log, float(self.validation_fraction), rng)

    def _objective_function(self, rows, lam, history):
        """LightGBM's custom objective: ``(grad, hess)`` of ``n_rows * J`` at the current raw scores."""
        scale = rows.n_rows / rows.n_clicks
        margin, temperature, sigma = float(self.margin), float(self.temperature), float(self.sigma)
        propdcg = self.objective == "propdcg"
        step_bound = propdcg and self.smoothing == "huber"

        def objective(scores, _dataset):
            if propdcg:
                per_query, grad, hess = rows.pairs.bound(scores, lam, margin, temperature, True)
            else:
                per_query, grad, hess = rows.pairs.lambdarank(scores, lam, sigma, True)
            history.append(float(per_query.sum()) / rows.n_clicks)
            if step_bound:      # Huber: no curvature outside the band; no document's own step above a margin
                np.maximum(hess, np.abs(grad) / margin, out=hess)
            top = float(hess.max())
            np.maximum(hess, _CURVATURE_FLOOR * top if top > 0 else 1.0, out=hess)
            return grad * scale, hess * scale

        return objective

    # ----------------------------------------------------------------- predict
    def predict(self, X, num_iteration=None):
        """Scores of the rows of ``X`` (array, sparse matrix, RankingDataset or ClickLog's data); higher is better.

        Parameters
        ----------
        X : array (n_docs, n_features), scipy.sparse matrix, RankingDataset or ClickLog
            The rows to score.
        num_iteration : int, optional
            Score with the first ``num_iteration`` trees only (default: all kept trees), e.g. to
            choose the number of trees on validation clicks from one fit.

        Returns
        -------
        scores : array (n_docs,)
            Through ``preprocessor_`` first when a preprocessor was given.
        """
        check_is_fitted(self, "booster_")
        X = self._prediction_features(X, self.booster_.num_feature())
        if num_iteration is not None:
            num_iteration = check_int(num_iteration, "num_iteration", min_value=1)
        return self.booster_.predict(X, num_iteration=num_iteration, num_threads=int(self.n_jobs))

    def booster_to_array(self) -> np.ndarray:
        """The booster's own text model as a ``uint8`` array (what a safe model file stores).

        Returns
        -------
        array of uint8
            The UTF-8 bytes of ``booster_.model_to_string()``: tree structure and numbers, no code.
        """
        check_is_fitted(self, "booster_")
        return np.frombuffer(self.booster_.model_to_string().encode("utf-8"), dtype=np.uint8).copy()

    @staticmethod
    def booster_from_array(array, n_features=None):
        """A LightGBM booster from the ``uint8`` array of :meth:`booster_to_array`.

        Parameters
        ----------
        array : array of uint8
            The UTF-8 bytes of a LightGBM text model, checked by
            :func:`~counterfactual_ltr.estimators._booster_text.check_booster_text` before
            LightGBM parses it (LightGBM's parser trusts its input).
        n_features : int, optional
            The number of features the trees must take.

        Returns
        -------
        lightgbm.Booster

        Examples
        --------
        >>> from click_sim import make_ranking, simulate_clicks
        >>> data = make_ranking(n_queries=30, random_state=0)
        >>> log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
        >>> model = GBDTPropDCG(n_estimators=5, num_leaves=4).fit(log)
        >>> booster = GBDTPropDCG.booster_from_array(model.booster_to_array())
        >>> bool((booster.predict(data.X) == model.predict(data)).all())
        True
        """
        lgb = lightgbm_or_raise()
        array = np.asarray(array)
        if array.dtype != np.uint8 or array.ndim != 1:
            raise ValueError(f"a booster is stored as a 1-D uint8 array, got {array.dtype} of shape {array.shape}")
        try:
            text = array.tobytes().decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"the stored booster is not UTF-8 text ({err})") from None
        text = check_booster_text(text, n_features)
        try:
            return lgb.Booster(model_str=text)
        except lgb.basic.LightGBMError as err:
            raise ValueError(f"the stored booster is not a LightGBM model ({err})") from None


class ConstantRankerWarning(UserWarning):
    """A fitted ranker gives every document of a query the same score (e.g. trees of one leaf).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("every tree has one leaf", ConstantRankerWarning)
    >>> caught[0].category.__name__
    'ConstantRankerWarning'
    """


class LightGBMWarning(UserWarning):
    """A warning of LightGBM's, raised as a Python warning (LightGBM's own log is otherwise silenced).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", LightGBMWarning)    # silence LightGBM's own remarks
    ...     warnings.warn("No further splits with positive gain", LightGBMWarning)
    """


class _LightGBMWarnings:
    """LightGBM's log routed to Python during a fit: each distinct ``[Warning]`` line once, as LightGBMWarning.

    LightGBM's logger is process-wide; the one registered before is restored on exit.
    """

    def __init__(self, lgb):
        self.lgb, self.lines = lgb, []

    def info(self, msg):
        self.lines.append(str(msg))

    warning = info

    def __enter__(self):
        basic = self.lgb.basic
        self.saved = (basic._LOGGER, basic._INFO_METHOD_NAME, basic._WARNING_METHOD_NAME)
        self.lgb.register_logger(self)
        return self

    def __exit__(self, *exc):
        self.lgb.register_logger(*self.saved)
        seen = {}
        for line in self.lines:
            text = line.strip()
            if "[Warning]" in text:
                text = text.split("[Warning]", 1)[1].strip()
                seen[text] = seen.get(text, 0) + 1
        for text, count in seen.items():
            warnings.warn(f"LightGBM: {text}" + (f" ({count} times)" if count > 1 else ""), LightGBMWarning,
                          stacklevel=3)
        return False


def _transformed_clicks(log, pre):
    """A validation log or aggregate with its features through the fitted preprocessor."""
    from ._base import transform_aggregate

    return transform_log(log, pre)[0] if isinstance(log, ClickLog) else transform_aggregate(log, pre)[0]


class _TrainingRows:
    """The rows of the queries with a non-zero click weight: features, weights, pairs (built once per fit)."""

    def __init__(self, agg: ClickAggregate, smoothing: str):
        from ..surrogates import anchor_pairs

        data = agg.data
        queries = agg.queries
        rows = data.rows_of(queries)
        self.X = data.X[rows] if not sp.issparse(data.X) else data.X[rows].tocsr()
        self.W = np.asarray(agg.weights[rows], dtype=np.float64)
        offsets = offsets_from_lengths(data.query_lengths[queries])
        # Pair arithmetic in float32: LightGBM keeps the gradients in float32 anyway, and it halves the
        # bytes every pass over the pairs moves (timings: docs/trees.md).
        self.pairs = anchor_pairs(self.W, offsets, smoothing, dtype=np.float32)
        if self.pairs.n_pairs == 0:
            raise ValueError("every click is on a query with a single candidate document: no pair to rank, "
                             "nothing to learn")
        self.n_rows, self.n_queries, self.n_clicks = int(rows.size), int(queries.size), int(agg.n_clicks)


class _SnipsValidation:
    """The SNIPS estimate of a metric on validation clicks, as a LightGBM evaluation function."""

    def __init__(self, log, propensity, metric: str):
        agg = log.aggregate(propensity) if isinstance(log, ClickLog) else log.reweight(propensity)
        if agg.n_clicks == 0:
            raise ValueError("the validation clicks are empty: the SNIPS estimate is undefined")
        self.agg, self.metric = agg, metric
        self.rows = agg.data.rows_of(agg.queries)
        self.scores = np.zeros(agg.data.n_docs)
        self.record = {}

    def __call__(self, preds, _dataset):
        self.scores[self.rows] = preds
        return "snips", float(self.agg.snips_value(self.scores, metric=self.metric)), True

    def train_arguments(self, lgb, train_set, est) -> dict:
        X = self.agg.data.X[self.rows]
        valid = lgb.Dataset(X, label=np.zeros(self.rows.size), reference=train_set, params={"verbose": -1})
        callbacks = [lgb.record_evaluation(self.record)]
        if est.early_stopping:
            callbacks.append(lgb.early_stopping(int(est.n_iter_no_change), first_metric_only=True, verbose=False,
                                                min_delta=float(est.tol)))
        return {"valid_sets": [valid], "valid_names": ["validation"], "feval": self, "callbacks": callbacks}
