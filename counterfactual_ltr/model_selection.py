"""Grid search of one hyper-parameter on a click log that says what it did: the choice, the grid, the scores.

:func:`grid_search` cross-validates every value of the grid over the same
folds of queries (``GroupKFold`` over the log's sessions), keeps the best (the
first of ties, i.e. the smallest value) and refits it on the whole log. A
choice at an end of the grid whose mean score is strictly above its
neighbour's is a **binding edge**: the criterion was still improving there, so
a wider grid might choose otherwise. (A tie with the neighbour is not: at small
``C`` the weights are proportional to ``C`` and both values rank alike.) A
binding edge warns (:class:`GridEdgeWarning`); with ``extend=True`` the grid is
first extended in that direction by factors of 10, at most ``max_extensions``
values, until the choice is interior. The record of the search (grid,
cross-validated scores, choice, edge, extensions) is kept on the returned
estimator as ``selection_``, which :func:`~counterfactual_ltr.model_files.persistence.save_model`
writes into the model file. :func:`check_grid_edge` applies the same check to
a user's own fitted ``GridSearchCV``.
"""

from __future__ import annotations

import warnings

import numpy as np

from ._validation import check_bool, check_int

__all__ = ["GridEdgeWarning", "grid_search", "tempered_grid_search", "param_grid_search", "with_tempering",
           "best_tempering", "check_grid_edge", "search_record", "selection_lines", "cv_folds", "TEMPERING"]

#: The tempering strengths ``tempered_grid_search`` (and ``cltr fit``) choose from with an estimated propensity.
TEMPERING = (0.0, 0.5, 1.0)


class GridEdgeWarning(UserWarning):
    """The chosen hyper-parameter value is at a binding edge of its grid: a wider grid might choose otherwise.

    Issued by :func:`grid_search` (when its grid was not, or could not be,
    extended far enough) and :func:`check_grid_edge`.

    Examples
    --------
    >>> import warnings
    >>> issubclass(GridEdgeWarning, UserWarning)
    True
    """


def _binding_edge(grid, means) -> str | None:
    """``"low"``/``"high"`` when the best (first of ties) is an end of ``grid`` strictly above its neighbour."""
    means = np.asarray(means, dtype=np.float64)
    if len(means) < 2:
        return None
    best = int(np.argmax(means))
    if 0 < best < len(means) - 1:
        return None
    neighbour = 1 if best == 0 else best - 1
    return ("low" if best == 0 else "high") if means[best] > means[neighbour] else None


def cv_folds(log, cv: int = 3) -> list:
    """``GroupKFold(cv)`` over the log's queries as ``(train, test)`` click logs, frozen so that they count once.

    Every search of this module scores its candidates on these folds; :func:`select_learner` hands the
    same folds to every learner, so all of them are compared on the same held-out clicks and each
    fold's clicks are counted once (:meth:`~counterfactual_ltr.logs.ClickLog.frozen`).

    Parameters
    ----------
    log : ClickLog
        The log to split.
    cv : int >= 2, default 3
        Number of folds.

    Returns
    -------
    list of (ClickLog, ClickLog)

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=9, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=2, random_state=0)
    >>> [(len(train), len(test)) for train, test in cv_folds(log, 3)]
    [(12, 6), (12, 6), (12, 6)]
    """
    from sklearn.model_selection import GroupKFold

    cv = check_int(cv, "cv", min_value=2)
    n_queries = len(np.unique(log.groups))
    if n_queries < cv:
        raise ValueError(f"cv={cv} folds of queries need at least {cv} queries with sessions; the log has "
                         f"{n_queries}")
    return [(log[train].frozen(), log[test].frozen())
            for train, test in GroupKFold(cv).split(np.arange(len(log)), groups=log.groups)]


def _fold_scores(estimator, folds, candidates, scoring, error_score, stacklevel: int = 5) -> np.ndarray:
    """Score of every candidate (a dict of parameters) on every fold: an array ``(n_candidates, n_folds)``.

    A clone of ``estimator`` with the candidate's parameters is fitted on each fold's training log and
    scored on its test log (``scoring(model, test)``, or ``model.score(test)``), as ``GridSearchCV`` does.
    A failed fit raises, or (``error_score`` a number) scores ``error_score`` with a warning.
    """
    from sklearn.base import clone
    from sklearn.exceptions import FitFailedWarning

    scores = np.empty((len(candidates), len(folds)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, params in enumerate(candidates):
            for k, (train, test) in enumerate(folds):
                try:
                    model = clone(estimator).set_params(**params).fit(train)
                    scores[i, k] = model.score(test) if scoring is None else scoring(model, test)
                except Exception as err:
                    if isinstance(error_score, str) and error_score == "raise":
                        raise
                    scores[i, k] = error_score
                    warnings.warn(f"the fit of {params} on fold {k} failed and scores {error_score}: "
                                  f"{type(err).__name__}: {err}", FitFailedWarning)
    _warn_once_per_cause(caught, scores.size, stacklevel)
    return scores


def _cross_validate(estimator, folds, parameter, values, scoring, error_score):
    scores = _fold_scores(estimator, folds, [{parameter: v} for v in values], scoring, error_score, stacklevel=6)
    return {float(v): row for v, row in zip(values, scores)}


def _warn_once_per_cause(caught, n_fits: int, stacklevel: int = 4) -> None:
    """Re-emit the fits' warnings once per cause (category and text up to its numbers), with how many fits said it.

    Every fold of every grid value fits the same kind of data, so a warning about it comes from most
    fits; said once with its count it stays readable (the first fit's text is kept).
    """
    import re

    causes = {}
    for w in caught:
        key = (w.category, re.sub(r"[-+]?\d[\d.,e+-]*", "#", str(w.message)))
        causes.setdefault(key, [w, 0])[1] += 1
    for (category, _), (first, count) in causes.items():
        where = f" (in {min(count, n_fits)} of {n_fits} fits of the grid search)" if n_fits > 1 else ""
        warnings.warn(f"{first.message}{where}", category, stacklevel=stacklevel)


def grid_search(estimator, log, parameter: str, values, *, cv: int = 3, scoring=None, scoring_name=None,
                extend: bool = False, max_extensions: int = 3, error_score="raise", refit: bool = True,
                folds=None):
    """Choose ``parameter`` from ``values`` by cross-validation over queries; refit; record and report edges.

    Parameters
    ----------
    estimator : scikit-learn ranker
        Its other parameters stay as set; a clone is fitted for every value and fold.
    log : ClickLog
        The training log; folds are ``GroupKFold(cv)`` over its sessions' queries.
    parameter : str
        Name of the hyper-parameter (e.g. ``"C"``).
    values : sequence of float > 0 (>= 0 allowed for a low end)
        The grid; searched in increasing order.
    cv : int >= 2, default 3
        Number of folds.
    scoring : None or scikit-learn scorer, default None
        ``None``: the estimator's ``score`` (SNIPS-DCG on a log); e.g.
        :func:`~counterfactual_ltr.evaluation.snips_scorer`.
    scoring_name : str, optional
        How the record names the criterion (default: the scorer's ``repr``).
    extend : bool, default False
        Extend the grid at a binding edge by factors of 10 until the choice is
        interior (what ``cltr fit`` does).
    max_extensions : int >= 0, default 3
        At most this many values are added.
    error_score : "raise" or float, default "raise"
        As for ``GridSearchCV``.
    refit : bool, default True
        Fit the chosen value on the whole log (False: the clone is returned unfitted, with its record).
    folds : list of (ClickLog, ClickLog), optional
        The folds to score on, as :func:`cv_folds` makes them (default: ``cv_folds(log, cv)``).

    Returns
    -------
    estimator
        A clone fitted on the whole log with the chosen value; ``selection_``
        holds the record (a dict: ``parameter``, ``grid``, ``mean_test_score``,
        ``std_test_score``, ``chosen``, ``best_score``, ``fold_scores`` (the chosen
        value's score on each fold), ``edge``, ``extended``, ``max_extensions``,
        ``scoring``, ``n_folds``).

    Warns
    -----
    GridEdgeWarning
        When the final choice is at a binding edge of the (extended) grid.

    Examples
    --------
    >>> import warnings
    >>> from click_sim import make_ranking, simulate_clicks
    >>> from counterfactual_ltr.estimators import SVMPropRank
    >>> data = make_ranking(n_queries=40, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     model = grid_search(SVMPropRank(), log, "C", [0.1, 1, 10], cv=2)
    >>> model.selection_["chosen"] in model.selection_["grid"], len(model.selection_["mean_test_score"]) >= 3
    (True, True)
    """
    from sklearn.base import clone

    grid = sorted({float(v) for v in values})
    if not grid or not all(np.isfinite(grid)):
        raise ValueError(f"the grid of {parameter} must hold finite numbers, got {list(values)!r}")
    max_extensions = check_int(max_extensions, "max_extensions", min_value=0)
    extend = check_bool(extend, "extend")
    refit = check_bool(refit, "refit")
    folds = cv_folds(log, cv) if folds is None else folds      # the same folds every round
    scores = _cross_validate(estimator, folds, parameter, grid, scoring, error_score)
    added = []
    while True:
        grid = sorted(scores)
        edge = _binding_edge(grid, [scores[v].mean() for v in grid])
        nxt = None if edge is None else (grid[-1] * 10 if edge == "high" else grid[0] / 10)
        if not extend or nxt is None or nxt <= 0 or len(added) >= max_extensions or nxt in scores:
            break
        added.append(nxt)
        scores.update(_cross_validate(estimator, folds, parameter, [nxt], scoring, error_score))
    means = [float(scores[v].mean()) for v in grid]
    chosen = grid[int(np.argmax(means))]
    record = {"parameter": parameter, "grid": grid, "mean_test_score": means,
              "std_test_score": [float(scores[v].std()) for v in grid], "chosen": chosen, "best_score": max(means),
              "fold_scores": [float(v) for v in scores[chosen]], "edge": edge, "extended": added,
              "max_extensions": max_extensions if extend else 0,
              "scoring": scoring_name or ("estimator.score" if scoring is None else repr(scoring)),
              "n_folds": len(folds)}
    if edge is not None:
        warnings.warn(_edge_message(record, extend), GridEdgeWarning, stacklevel=2)
    model = clone(estimator).set_params(**{parameter: chosen})
    if refit:
        model.fit(log)
    model.selection_ = record
    return model


def tempered_grid_search(estimator, log, parameter: str, values, *, strengths=TEMPERING, **options):
    """:func:`grid_search` once per tempering of the estimator's estimated propensity; the best by the same score.

    The estimator's ``propensity`` (an :class:`~counterfactual_ltr.propensity.EstimatedPropensity`
    with an interval) is replaced by ``propensity.tempered(s)`` for each ``s`` of ``strengths``: the
    click weights at positions the log barely identifies move towards the smallest its interval
    supports. Each strength gets its own search of ``parameter`` over the same folds; the one with
    the best cross-validated score wins. With :func:`~counterfactual_ltr.evaluation.snips_scorer`
    of the untempered estimate as ``scoring`` (its ``propensity_quantile`` scores the improvement
    over the logged rankings that holds across the estimate's replicates), a ranker whose gain
    rests on a few heavily weighted clicks scores low.

    Parameters
    ----------
    estimator : scikit-learn ranker with a ``propensity`` parameter
        Its propensity is the estimate to temper.
    log : ClickLog
        The training log, as for :func:`grid_search`.
    parameter : str
        The hyper-parameter searched at every strength (e.g. ``"C"``).
    values : sequence of float
        Its grid, as for :func:`grid_search`.
    strengths : sequence of float in [0, 1], default ``TEMPERING``
        The tempering strengths (``0``: the estimate itself).
    **options
        Passed to :func:`grid_search` (``cv``, ``scoring``, ``extend``, ...).

    Returns
    -------
    estimator
        The best fit; its ``selection_`` is that search's record with ``"tempering"``:
        ``{"strengths", "best_scores", "chosen"}`` (when more than one strength was tried).

    Examples
    --------
    >>> import warnings
    >>> from click_sim import make_ranking, simulate_clicks
    >>> from counterfactual_ltr import SVMPropRank, estimate_propensities, snips_scorer
    >>> from click_sim import SwapIntervention
    >>> data = make_ranking(n_queries=60, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=30, random_state=0,
    ...                       intervention=SwapIntervention(0.5, max_position=4))
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     est = estimate_propensities(log, "swap", max_position=4, n_bootstrap=40, random_state=0)
    ...     model = tempered_grid_search(SVMPropRank(propensity=est), log, "C", [0.1, 1], cv=2,
    ...                                  scoring=snips_scorer(propensity=est))
    >>> model.selection_["tempering"]["chosen"] in (0.0, 0.5, 1.0)
    True
    """
    from sklearn.base import clone

    strengths = sorted({float(v) for v in strengths})
    if not strengths or any(not 0 <= v <= 1 for v in strengths):
        raise ValueError(f"strengths must lie in [0, 1], got {strengths}")
    propensity = estimator.get_params().get("propensity")
    if strengths != [0.0] and getattr(propensity, "upper_", None) is None:
        raise ValueError("tempering needs an estimated propensity with an interval (estimate_propensities with "
                         "n_bootstrap > 0) as the estimator's propensity")
    fits = [grid_search(with_tempering(estimator, s), log, parameter, values, **options) for s in strengths]
    return best_tempering(fits, strengths, [f.selection_["best_score"] for f in fits])


def param_grid_search(estimator, log, param_grid: dict, *, cv: int = 3, scoring=None, scoring_name=None,
                      strengths=(0.0,), limits=None, error_score="raise", refit: bool = True, folds=None):
    """Choose several hyper-parameters at once over the product of their grids; refit; record the search.

    Every combination of ``param_grid`` (as ``GridSearchCV`` takes it) is cross-validated over the
    same folds of queries (:func:`cv_folds`), once per tempering strength of an estimated propensity
    (:func:`with_tempering`; the best strength by the same score, :func:`best_tempering`). The best
    combination (the first of ties) is refitted on the whole log. A numeric parameter whose choice
    is at a binding edge of its grid warns (:func:`check_grid_edge`); the grid is not extended.

    Parameters
    ----------
    estimator : scikit-learn ranker
        Its other parameters stay as set; a clone is fitted for every combination and fold.
    log : ClickLog
        The training log.
    param_grid : dict of str -> list
        Values of every parameter searched (e.g. :data:`~counterfactual_ltr.estimators.GBDT_GRID`).
    cv : int >= 2, default 3
        Number of folds (of queries).
    scoring : None or scorer, default None
        As for :func:`grid_search`.
    scoring_name : str, optional
        How the record names the criterion.
    strengths : sequence of float in [0, 1], default (0.0,)
        Tempering strengths, as for :func:`tempered_grid_search`.
    limits : dict, optional
        Least value of a parameter, for the edge warning's advice (see :func:`check_grid_edge`).
    error_score : "raise" or float, default "raise"
        As for ``GridSearchCV``.
    refit : bool, default True
        Fit the best combination on the whole log (False: returned unfitted, with its record).
    folds : list of (ClickLog, ClickLog), optional
        As for :func:`grid_search`.

    Returns
    -------
    estimator
        The best combination, fitted on the whole log unless ``refit=False``; its ``selection_`` is
        :func:`search_record`'s record with ``fold_scores`` (and ``tempering`` when several
        strengths were tried).

    Examples
    --------
    >>> import warnings
    >>> from click_sim import make_ranking, simulate_clicks
    >>> from counterfactual_ltr.estimators import SVMPropRank
    >>> data = make_ranking(n_queries=30, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     model = param_grid_search(SVMPropRank(), log, {"C": [0.1, 10], "solver_tol": [1e-6]}, cv=2)
    >>> model.selection_["parameters"], len(model.selection_["candidates"])
    (['C', 'solver_tol'], 2)
    """
    from types import SimpleNamespace

    from sklearn.base import clone
    from sklearn.model_selection import ParameterGrid

    strengths = sorted({float(v) for v in strengths})
    if not strengths or any(not 0 <= v <= 1 for v in strengths):
        raise ValueError(f"strengths must lie in [0, 1], got {strengths}")
    refit = check_bool(refit, "refit")
    folds = cv_folds(log, cv) if folds is None else folds
    candidates = list(ParameterGrid(param_grid))
    searches = []
    for strength in strengths:
        tempered = with_tempering(estimator, strength)
        scores = _fold_scores(tempered, folds, candidates, scoring, error_score)
        means = scores.mean(axis=1)
        searches.append((tempered, scores, SimpleNamespace(
            best_index_=int(np.argmax(means)), n_splits_=len(folds), scoring=scoring_name,
            cv_results_={"params": candidates, "mean_test_score": means, "std_test_score": scores.std(axis=1)})))
    fits = []
    for tempered, scores, search in searches:
        model = clone(tempered).set_params(**candidates[search.best_index_])
        model.selection_ = {**search_record(search, scoring_name=scoring_name or (
            "estimator.score" if scoring is None else repr(scoring))),
            "fold_scores": [float(v) for v in scores[search.best_index_]]}
        fits.append((model, search))
    best = int(np.argmax([search.cv_results_["mean_test_score"][search.best_index_] for _, search in fits]))
    model, search = fits[best]
    model.selection_["edges"] = {**model.selection_["edges"], **check_grid_edge(search, limits=limits)}
    model = best_tempering([m for m, _ in fits], strengths, [m.selection_["best_score"] for m, _ in fits])
    if refit:
        model.fit(log)
    return model


def with_tempering(estimator, strength: float):
    """``estimator`` whose estimated propensity is tempered by ``strength`` (a clone; itself for 0).

    Parameters
    ----------
    estimator : scikit-learn ranker with a ``propensity`` parameter
        Its propensity is an :class:`~counterfactual_ltr.propensity.EstimatedPropensity` with an interval.
    strength : float in [0, 1]
        As :meth:`~counterfactual_ltr.propensity.EstimatedPropensity.tempered` takes it.

    Returns
    -------
    estimator

    Examples
    --------
    >>> from counterfactual_ltr import SVMPropRank
    >>> from counterfactual_ltr.propensity import EstimatedPropensity
    >>> est = EstimatedPropensity([1.0, 0.25], lower=[1.0, 0.1], upper=[1.0, 1.0], method="harvest")
    >>> with_tempering(SVMPropRank(propensity=est), 0.5).propensity.relative_.tolist()
    [1.0, 0.5]
    """
    from sklearn.base import clone

    if strength == 0:
        return estimator
    return clone(estimator).set_params(propensity=estimator.get_params()["propensity"].tempered(strength))


def best_tempering(fits, strengths, scores):
    """The fit of the best score among ``strengths``; its ``selection_`` records the choice (if there was one).

    Parameters
    ----------
    fits : list of fitted estimators
        One per strength, each with a ``selection_`` record.
    strengths : list of float
        The tempering strengths, in the order of ``fits``.
    scores : list of float
        Each fit's best cross-validated score.

    Returns
    -------
    estimator
        The best fit, its ``selection_["tempering"]`` holding ``strengths``, ``best_scores`` and ``chosen``.

    Examples
    --------
    >>> class Fit:
    ...     selection_ = {}
    >>> best_tempering([Fit(), Fit()], [0.0, 1.0], [0.2, 0.3]).selection_["tempering"]["chosen"]
    1.0
    """
    best = int(np.argmax(scores))
    model = fits[best]
    if len(strengths) > 1:
        model.selection_ = {**model.selection_, "tempering": {
            "strengths": [float(v) for v in strengths], "best_scores": [float(v) for v in scores],
            "chosen": float(strengths[best])}}
    return model


def _edge_message(record, extended: bool, least=None, whole=False) -> str:
    p, grid, means = record["parameter"], record["grid"], record["mean_test_score"]
    high = record["edge"] == "high"
    neighbour = grid[-2] if high else grid[1]
    where = "upper" if high else "lower"
    text = (f"{p}={record['chosen']:g} is at the {where} edge of the grid {_values(grid)}: its cross-validated "
            f"score {max(means):.5g} is above {p}={neighbour:g}'s, so a {'larger' if high else 'smaller'} {p} "
            "might be better")
    if extended and len(record["extended"]) < record["max_extensions"]:
        return text + f" (the grid cannot be extended below {grid[0]:g})"
    if extended:
        return text + f" (the grid was extended {len(record['extended'])} times, the limit)"
    chosen = record["chosen"]
    if whole:
        advice = chosen * 2 if high else chosen // 2
    else:
        advice = chosen * (10 if high else 0.1)
    if not high and least is not None and advice < least:
        if chosen <= least:
            return text + f", but {chosen:g} is the least value {p} takes"
        advice = least
    return text + f"; extend the grid (e.g. {p}={advice:g})"


def _values(grid) -> str:
    return "[" + ", ".join(f"{v:g}" for v in grid) + "]"


def selection_lines(record: dict) -> list:
    """A grid-search record as lines for a terminal: one row per grid value (or candidate), the choice marked.

    Parameters
    ----------
    record : dict
        A ``selection_`` record: of :func:`grid_search` (one parameter) or of
        :func:`search_record` (several; one column each).

    Returns
    -------
    list of str

    Examples
    --------
    >>> record = {"parameter": "C", "grid": [1.0, 10.0], "mean_test_score": [0.4, 0.5], "std_test_score": [0.01, 0.02],
    ...           "chosen": 10.0, "edge": None, "extended": [], "scoring": "snips-dcg", "n_folds": 3}
    >>> print("\\n".join(selection_lines(record)))
      C        snips-dcg (3-fold CV)   std
      1        0.40000                 0.01000
      10       0.50000                 0.02000   <- chosen
    """
    if "parameters" in record:
        return _candidate_lines(record)
    p = record["parameter"]
    lines = [f"  {p:<8} {record['scoring'] + ' (' + str(record['n_folds']) + '-fold CV)':<23} std"]
    for v, m, s in zip(record["grid"], record["mean_test_score"], record["std_test_score"]):
        mark = ("   <- chosen" if v == record["chosen"] else "") + ("   (added)" if v in record["extended"] else "")
        lines.append(f"  {v:<8g} {m:<23.5f} {s:.5f}{mark}")
    return lines


def _candidate_lines(record: dict) -> list:
    names = record["parameters"]
    widths = [max(len(n), 8, *(len(c[i]) for c in record["candidates"] if isinstance(c[i], str)))
              for i, n in enumerate(names)]
    head = "  " + " ".join(f"{n:<{w}}" for n, w in zip(names, widths))
    lines = [f"{head} {record['scoring'] + ' (' + str(record['n_folds']) + '-fold CV)':<23} std"]
    for values, m, s in zip(record["candidates"], record["mean_test_score"], record["std_test_score"]):
        mark = "   <- chosen" if list(values) == list(record["chosen"]) else ""
        cells = " ".join(_cell(v, w) for v, w in zip(values, widths))
        lines.append(f"  {cells} {m:<23.5f} {s:.5f}{mark}")
    edges = [f"{n} at its {e} edge" for n, e in record["edges"].items() if e is not None]
    if edges:
        lines.append("  (binding: " + ", ".join(edges) + ")")
    return lines


def search_record(search, *, scoring_name=None, edges=None) -> dict:
    """The record of a fitted ``GridSearchCV`` over several parameters, as :func:`grid_search` keeps one.

    ``cltr fit`` stores it as the chosen model's ``selection_`` (written into the model file) and
    prints it with :func:`selection_lines`, so a search over several parameters says what it chose
    from, as the one-parameter search does.

    Parameters
    ----------
    search : fitted sklearn.model_selection.GridSearchCV
        Its candidates' parameters must be numbers or short strings (a choice such as ``objective``).
    scoring_name : str, optional
        How the record names the criterion (default: the search's ``scoring`` as text).
    edges : dict, optional
        Parameter -> ``"low"``, ``"high"`` or ``None``, as :func:`check_grid_edge` returns
        (default: every parameter ``None``).

    Returns
    -------
    dict
        ``parameters`` (names, sorted), ``candidates`` (one list of values per candidate, in that
        order; numbers as floats, choices as strings), ``mean_test_score``, ``std_test_score``,
        ``chosen`` (the best candidate's values), ``best_score``, ``edges``, ``scoring``, ``n_folds``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> search = SimpleNamespace(best_index_=1, n_splits_=3, scoring="snips-dcg", cv_results_={
    ...     "params": [{"a": 1, "b": "propdcg"}, {"a": 2, "b": "ips_lambdarank"}],
    ...     "mean_test_score": [0.1, 0.2], "std_test_score": [0.01, 0.02]})
    >>> search_record(search)["chosen"]
    [2.0, 'ips_lambdarank']
    """
    params = search.cv_results_["params"]
    names = sorted(params[0])
    candidates = [[_record_value(p[n], n) for n in names] for p in params]
    means = [float(m) for m in search.cv_results_["mean_test_score"]]
    return {"parameters": names, "candidates": candidates, "mean_test_score": means,
            "std_test_score": [float(v) for v in search.cv_results_["std_test_score"]],
            "chosen": candidates[search.best_index_], "best_score": means[search.best_index_],
            "edges": {n: (edges or {}).get(n) for n in names},
            "scoring": scoring_name or str(search.scoring), "n_folds": int(search.n_splits_)}


def _record_value(value, name):
    """A grid value as the record keeps it: a number as a float, a choice as its string."""
    if isinstance(value, str) and 0 < len(value) <= 200:
        return value
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    raise ValueError(f"search_record needs numbers or short strings as parameter values; {name} = {value!r:.60}")


def _cell(value, width):
    return f"{value:<{width}g}" if isinstance(value, float) else f"{value:<{width}}"


def check_grid_edge(search, *, limits=None) -> dict:
    """Warn when a fitted ``GridSearchCV``'s choice is at a binding edge of a numeric parameter's grid.

    For each parameter with at least two numeric values, the candidates that
    share the best candidate's other values are compared: the choice binds at
    an edge when it is the smallest or largest value and its mean score is
    strictly above its neighbour's.

    Parameters
    ----------
    search : fitted sklearn.model_selection.GridSearchCV
        The search to check.
    limits : dict, optional
        Parameter -> the least value it takes (e.g. ``{"num_leaves": 2}``), so that the advice
        names only values the parameter accepts. Whole-number parameters (every grid value an
        integer) are advised in whole numbers (doubled or halved); others by factors of 10.

    Returns
    -------
    dict
        Parameter name -> ``"low"``, ``"high"`` or ``None``.

    Warns
    -----
    GridEdgeWarning
        For each parameter at a binding edge.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> search = SimpleNamespace(best_index_=2, cv_results_={"params": [{"C": 1}, {"C": 10}, {"C": 100}],
    ...                                                      "mean_test_score": [0.1, 0.2, 0.3]})
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     check_grid_edge(search)
    {'C': 'high'}
    >>> caught[0].category.__name__
    'GridEdgeWarning'
    """
    params, means = search.cv_results_["params"], np.asarray(search.cv_results_["mean_test_score"], dtype=float)
    best = params[search.best_index_]
    out = {}
    for name, value in best.items():
        same = [i for i, p in enumerate(params) if all(p[k] == v for k, v in best.items() if k != name)]
        try:
            values = [float(params[i][name]) for i in same]
        except (TypeError, ValueError):
            continue
        if len(set(values)) < 2:
            continue
        order = np.argsort(values, kind="stable")
        grid = [values[i] for i in order]
        edge = _binding_edge(grid, means[[same[i] for i in order]])
        out[name] = edge
        if edge is not None:
            record = {"parameter": name, "grid": grid, "mean_test_score": list(means[[same[i] for i in order]]),
                      "chosen": float(value), "edge": edge, "extended": []}
            whole = all(float(v).is_integer() for v in grid)
            warnings.warn(_edge_message(record, False, least=(limits or {}).get(name), whole=whole),
                          GridEdgeWarning, stacklevel=2)
    return out

