"""What the estimators share: checked feature matrices, the optional ``preprocessor`` and ``score``."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..logs.aggregate import ClickAggregate
from ..logs.clicklog import ClickLog
from ..datasets import RankingDataset, checked_csr


def click_aggregate(log, propensity, estimator: str, *, allow_affine: bool = False) -> ClickAggregate:
    """The aggregate a propensity learner trains on, from a :class:`ClickLog` or a :class:`ClickAggregate`.

    Both give the same weights (an aggregate is re-weighted under ``propensity``
    from its count table), so ``fit(log)`` and ``fit(log.aggregate())`` agree exactly.
    Learners that cannot handle the negative weights of a trust-bias (affine)
    correction leave ``allow_affine`` False and refuse such a model.
    """
    from ..propensity import as_propensity_model, is_affine

    if not allow_affine and is_affine(as_propensity_model(propensity)):
        raise ValueError(f"{estimator} does not support a trust-bias (affine) propensity model: its objective "
                         "needs non-negative click weights (SVMPropRank / SVMPropDCG / SVMPropRBP do support it)")
    if isinstance(log, ClickLog):
        agg = log.aggregate(propensity)
    elif isinstance(log, ClickAggregate):
        agg = log.reweight(propensity)
    else:
        raise ValueError(f"{estimator}.fit needs a ClickLog or a ClickAggregate, got {type(log).__name__}")
    if agg.n_clicks == 0:
        raise ValueError("the click log has no clicks: nothing to learn from")
    return agg


#: The largest ``kappa`` (see :func:`check_C_scale`) each solver family resolves: measured on MQ2008 and
#: synthetic data (``python -m experiments.benchmarks.bench_c_scale``, docs/reliability-notes.md), with a margin below
#: the smallest kappa at which a fit was seen to fail or run away (the bundle method's master problem loses
#: its precision first; the Newton solver's systems last).
C_SCALE_LIMITS = {"newton": 1e14, "cutting_plane": 1e9, "bmrm": 1e6}


def c_scale(C: float, loss_at_zero: float, X, margin: float = 1.0) -> float:
    """``kappa = C L(0) R^2 / margin^2``: how far the regulariser lets the optimal scores spread, in margins.

    ``L(0)`` is the (weighted) loss at ``w = 0`` and ``R`` an upper bound of the distance between
    two rows the loss compares (twice the largest distance of a row of ``X`` from one centre).
    From ``0.5 ||w*||^2 <= C L(0)``, two rows' optimal scores differ by at most ``sqrt(2 kappa)``
    margins; ``kappa`` is also what the solvers' work grows with: the condition of the smoothed
    Newton systems and the iteration count of the bundle method.
    """
    from ..solvers.hessian_free import centered_row_norms

    if X.shape[0] == 0 or loss_at_zero <= 0:
        return 0.0
    spread = 2.0 * np.max(centered_row_norms(X))
    with np.errstate(over="ignore"):         # beyond float64: inf, which every limit refuses
        return float(np.float64(C) * np.float64(loss_at_zero) * (spread / np.float64(margin)) ** 2)


def check_C_scale(estimator, C: float, loss_at_zero: float, X, *, solver: str, margin: float = 1.0) -> float:
    """Refuse, before any solving, a ``C`` whose scale ``kappa`` (:func:`c_scale`) the learner's solver cannot resolve.

    The same rule for every learner with a ``C``: ``kappa`` computed from the learner's own loss
    and data, compared with the limit of its solver (:data:`C_SCALE_LIMITS`). Beyond it a fit
    would run for minutes or return a solution the solver cannot certify (``coef_ = 0`` said to
    be optimal for a C far too large, non-converged Newton steps).
    Returns ``kappa``.
    """
    return refuse_C_scale(estimator, c_scale(C, loss_at_zero, X, margin), solver)


def refuse_C_scale(estimator, kappa: float, solver: str) -> float:
    """``ValueError`` when the scale ``kappa`` (:func:`c_scale`) is beyond what ``solver`` resolves; else ``kappa``."""
    limit = C_SCALE_LIMITS[solver]
    if kappa > limit:
        name = type(estimator).__name__
        largest = float(estimator.C) * limit / kappa
        raise ValueError(f"{name}: C = {estimator.C:g} is too large for this data: its scale C x L(0) x R^2 / "
                         f"margin^2 is {kappa:.3g}, beyond the {limit:.0e} that the {solver} solver resolves "
                         f"(the fit would run away or return an uncertified solution); the largest C accepted "
                         f"on this data is {largest:.3g} (features of very different magnitudes make R large: "
                         "preprocessor=StandardScaler() lowers it)")
    return kappa


def prediction_matrix(X, n_features: int) -> np.ndarray:
    """``X`` (array, RankingDataset, or ClickLog/ClickAggregate: its data set) as a finite float64 (n, d) array.

    A scipy.sparse ``X`` is returned as a finite float64 CSR matrix (never densified).
    """
    if isinstance(X, RankingDataset):
        X = X.X
    elif isinstance(X, (ClickLog, ClickAggregate)):
        X = X.data.X
    if sp.issparse(X):
        return _checked_sparse(X, n_features, "X")
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"X must be a numeric (n, {n_features}) array, a RankingDataset or a ClickLog ({err})") from None
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"X has shape {X.shape}, expected (n, {n_features})")
    bad = np.argwhere(~np.isfinite(X))
    if bad.size:
        raise ValueError(f"X holds a non-finite value at row {bad[0][0]}, column {bad[0][1]}")
    return X


def _checked_sparse(X, n_features, what: str):
    """A sparse matrix as float64 CSR with ``n_features`` columns (None: any) and finite values."""
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{what} has shape {X.shape}, expected (n, {n_features})")
    return checked_csr(X, what)


def _transformed(pre, X, where: str, width: int | None = None) -> np.ndarray:
    """``pre.transform(X)`` checked: 2-D, same number of rows, finite (a sparse result stays sparse).

    ``width``: the number of columns the model was fitted on (a preprocessor that gives
    another number at predict time is an error naming both, not a failure inside matmul).
    """
    Xt = pre.transform(X)
    if width is not None and getattr(Xt, "ndim", 2) == 2 and np.shape(Xt)[1] != width:
        raise ValueError(f"the preprocessor turned {X.shape} into {np.shape(Xt)} on {where}, but the model was "
                         f"fitted on {width} columns of its output: it must give as many columns as in fit")
    if sp.issparse(Xt):
        if Xt.shape[0] != X.shape[0]:
            raise ValueError(f"the preprocessor turned {X.shape} into {Xt.shape} on {where}: it must keep the rows")
        try:
            return _checked_sparse(Xt, None, "the preprocessor's output")
        except ValueError as err:
            raise ValueError(f"{err} on {where}") from None
    Xt = np.asarray(Xt, dtype=np.float64)
    if Xt.ndim != 2 or Xt.shape[0] != X.shape[0]:
        raise ValueError(f"the preprocessor turned {X.shape} into {Xt.shape} on {where}: it must keep the rows")
    bad = np.argwhere(~np.isfinite(Xt))
    if bad.size:
        raise ValueError(f"the preprocessor produced a non-finite value on {where} (row {bad[0][0]}, "
                         f"column {bad[0][1]})")
    return Xt


def _restricted(data: RankingDataset, queries, pre, fit: bool):
    """The data set of ``queries`` only, features through ``pre`` (fitted on those rows first with ``fit``).

    Returns ``(sub, new_row, pre)``: ``new_row[r]`` is the row of ``sub`` of row ``r`` of ``data`` (-1: dropped).
    """
    from sklearn.base import clone

    rows = data.rows_of(queries)
    Xr = data.X[rows]
    if fit:
        pre = clone(pre).fit(Xr)
    sub = RankingDataset(_transformed(pre, Xr, "the log's documents"), data.y[rows], data.qid[rows], name=data.name)
    new_row = np.full(data.n_docs, -1, dtype=np.int64)
    new_row[rows] = np.arange(len(rows))
    return sub, new_row, pre


def transform_log(log: ClickLog, pre, *, fit: bool = False):
    """``(log', pre')``: the log over its own queries' rows with features ``pre'.transform(X)``.

    With ``fit``, ``pre'`` is a clone of ``pre`` fitted on the rows of the queries the
    log touches (the training fold's documents), so no other fold's rows leak into it.
    """
    queries = np.unique(log.session_query)
    sub, new_row, pre = _restricted(log.data, queries, pre, fit)
    new_query = np.full(log.data.n_queries, -1, dtype=np.int64)
    new_query[queries] = np.arange(len(queries))
    return ClickLog(sub, new_query[log.session_query], log.session_offsets, new_row[log.docs], log.clicks,
                    log.session_ids, logger=log.logger, intervention=log.intervention, positions=log.positions), pre


def transform_aggregate(agg: ClickAggregate, pre, *, fit: bool = False):
    """:func:`transform_log` for an aggregate: the same queries (those with impressions), rows and weights."""
    if agg.table is None:
        raise ValueError("a preprocessor needs the aggregate's (doc, position) count table to restrict it to its "
                         "queries; build the aggregate with ClickLog.aggregate or aggregate_clicks")
    docs, positions, clicks, impressions = agg.table
    sub, new_row, pre = _restricted(agg.data, np.unique(agg.data.query_index[docs]), pre, fit)
    return ClickAggregate.from_table(sub, new_row[docs], positions, clicks, impressions, agg.n_sessions,
                                     agg.propensity), pre


def input_feature_names(X):
    """The feature names of a fit's input: those of its :class:`RankingDataset`, or None.

    Parameters
    ----------
    X : RankingDataset, ClickLog, ClickAggregate or array
        A fit's input; a log or an aggregate has its names from the data set it refers to.

    Returns
    -------
    list of str or None
        None for an array or a data set without names (LETOR files, generated data).

    Examples
    --------
    >>> from counterfactual_ltr import RankingDataset
    >>> input_feature_names(RankingDataset.from_frame({"query": [1, 1], "doc": [1, 2], "bm25": [0.5, 0.2]}))
    ['bm25']
    """
    data = X.data if isinstance(X, (ClickLog, ClickAggregate)) else X
    return getattr(data, "feature_names", None) if isinstance(data, RankingDataset) else None


class RankerMixin:
    """What every ranker shares: the optional ``preprocessor`` and :meth:`score`.

    ``preprocessor`` (a scikit-learn transformer, e.g. ``StandardScaler()``) is
    cloned and fitted in ``fit`` on the documents the training input touches
    (for a click log: the rows of its queries, i.e. the training fold's), kept as
    ``preprocessor_`` and applied in ``predict``. As a parameter it is tuned like
    any other: ``GridSearchCV(..., {"preprocessor__with_mean": [True, False]})``.

    A fit on data whose columns have names (a :class:`RankingDataset` built by ``from_frame``,
    or a click log or aggregate over one) keeps them, as scikit-learn does, in
    ``feature_names_in_`` (an object array of str, one per raw feature); the export
    (:mod:`counterfactual_ltr.export`) names the serving stack's features by them.
    """

    def _begin_fit(self, X, y=None, qid=None):
        """Fit the preprocessor (if any); the input with transformed features, and ``(y, qid)``.

        Also records the raw columns' names (``feature_names_in_``), or forgets those of an
        earlier fit when the new input has none.
        """
        names = input_feature_names(X)
        if names is None:
            self.__dict__.pop("feature_names_in_", None)
        else:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        pre = getattr(self, "preprocessor", None)
        self.preprocessor_ = None
        if pre is None:
            return X, y, qid
        if not (hasattr(pre, "fit") and hasattr(pre, "transform")):
            raise TypeError(f"preprocessor must be a scikit-learn transformer (fit/transform), got {pre!r}")
        if isinstance(X, ClickLog):
            X, self.preprocessor_ = transform_log(X, pre, fit=True)
            return X, y, qid
        if isinstance(X, ClickAggregate):
            X, self.preprocessor_ = transform_aggregate(X, pre, fit=True)
            return X, y, qid
        if not isinstance(X, RankingDataset):
            if qid is None:
                raise ValueError(f"{type(self).__name__}.fit(X, y) needs qid=... (the query id of every row)")
            X = RankingDataset(X, y, qid)
        from sklearn.base import clone

        self.preprocessor_ = clone(pre).fit(X.X)
        data = RankingDataset(_transformed(self.preprocessor_, X.X, "the training data"), X.y, X.qid, name=X.name)
        return data, data.y, data.qid

    def _end_fit(self):
        """``n_features_in_`` counts the raw features when a preprocessor changed them."""
        if getattr(self, "preprocessor_", None) is not None:
            self.n_features_in_ = int(self.preprocessor_.n_features_in_)
        return self

    def _prediction_features(self, X, n_model_features: int) -> np.ndarray:
        """Checked raw features of ``X``, through the fitted preprocessor when there is one."""
        pre = getattr(self, "preprocessor_", None)
        if pre is None:
            return prediction_matrix(X, n_model_features)
        return _transformed(pre, prediction_matrix(X, self.n_features_in_), "the prediction input", n_model_features)

    def score(self, X, y=None, qid=None, *, k: int = 10) -> float:
        """NDCG@k on labelled data, or the SNIPS-DCG estimate on a click log (greater is better).

        Parameters
        ----------
        X : RankingDataset, ClickLog, ClickAggregate, or array (n_docs, n_features)
            A labelled data set (or ``X`` with ``y`` and ``qid``): mean NDCG@``k`` over
            its queries (queries without relevant documents count 0). A click log:
            the SNIPS estimate of DCG under the estimator's ``propensity`` -- what
            ``GridSearchCV`` uses when no ``scoring`` is given. A click aggregate: the
            same SNIPS point estimate from its per-document sums.
        y, qid : arrays, optional
            Graded labels and query ids when ``X`` is an array.
        k : int, default 10

        Returns
        -------
        float

        Examples
        --------
        >>> from click_sim import make_ranking
        >>> from counterfactual_ltr.estimators import RankSVM
        >>> data = make_ranking(n_queries=30, random_state=0)
        >>> 0.0 <= RankSVM().fit(data).score(data) <= 1.0
        True
        """
        from ..metrics import ndcg

        if isinstance(X, ClickLog):
            from ..evaluation import snips_estimate

            return snips_estimate(X, self, metric="dcg", propensity=getattr(self, "propensity", None)).value
        if isinstance(X, ClickAggregate) or getattr(X, "is_distributed", False) and hasattr(X, "n_clicks"):
            return X.reweight(getattr(self, "propensity", None)).snips_value(self, metric="dcg")
        if not isinstance(X, RankingDataset):
            if y is None or qid is None:
                raise ValueError("score needs a labelled RankingDataset, a ClickLog, or X with y and qid")
            X = RankingDataset(X, y, qid)
        return float(ndcg(self.predict(X.X), X.y, X.query_offsets, k=k))
