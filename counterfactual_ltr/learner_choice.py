"""Choosing the learner by the log: every candidate learner tuned on its own grid, compared on the same folds.

Which learner ranks best depends on the data and even on the draw of the log: trees win on one
feature set, a propensity SVM on another, the naive click SVM on long lists with few clicks. So
:func:`select_learner` treats the learner as one more hyper-parameter. Each candidate (by default
:data:`LEARNERS`: RankSVM on clicks, SVM PropRank, SVM PropDCG, GBDTPropDCG) is tuned over its own
grid by the same cross-validated criterion (:func:`~counterfactual_ltr.model_selection.grid_search`
for one parameter, with the grid extended at a binding edge;
:func:`~counterfactual_ltr.model_selection.param_grid_search` for several), on the **same folds**
of queries (:func:`~counterfactual_ltr.model_selection.cv_folds`, whose click counts every learner
shares). The learners' best candidates are then compared on those folds.

The choice (:func:`choose_learner`) is the learner with the best mean score. How far ahead it is
of every cheaper learner (earlier in the candidates' order), and the standard error of that lead, are
measured on the paired per-query differences of the learners' pooled held-out estimates and
recorded; a lead within one standard error is said in the reason. With ``noise > 0`` the cheapest
learner within ``noise`` standard errors is kept instead (the one-standard-error rule at 1). The
winner alone is refitted on the whole log; its ``selection_`` holds its own search's record and the
table of every learner (``selection_["learners"]``), which a model file keeps and
:func:`learner_lines` prints.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

__all__ = ["LEARNERS", "LEARNER_CLASSES", "learner_candidates", "select_learner", "choose_learner", "learner_leads",
           "kept_at_noise", "learner_lines"]

#: Every learner ``select_learner`` knows, cheapest first (the order of the one-standard-error rule),
#: with the estimator class each name builds (the names of ``cltr fit --model``).
LEARNER_CLASSES = {"svm-rank": "RankSVM", "svm-proprank": "SVMPropRank", "svm-propdcg": "SVMPropDCG",
                   "gbdt-propdcg": "GBDTPropDCG", "deep": "DeepPropDCG"}
#: The learners compared by default (Deep PropDCG only on request: it costs far more than the rest).
LEARNERS = ("svm-rank", "svm-proprank", "svm-propdcg", "gbdt-propdcg")
#: The C grid of the SVM learners by default (as ``cltr fit``'s); extended at a binding edge.
C_GRID = (0.1, 1.0, 10.0, 100.0)


def learner_candidates(names=LEARNERS, *, propensity=None, C=C_GRID, tree_grid=None, alpha=(1e-6,),
                       preprocessor=None, random_state=0, deep_params=None) -> dict:
    """The candidates of :func:`select_learner`: ``{name: (estimator, grid)}``, in the order of :data:`LEARNER_CLASSES`.

    Parameters
    ----------
    names : sequence of str, default :data:`LEARNERS`
        Keys of :data:`LEARNER_CLASSES`.
    propensity : None, float or propensity model
        The examination model of every propensity learner (RankSVM takes none).
    C : sequence of float > 0, default ``(0.1, 1, 10, 100)``
        The grid of the SVMs.
    tree_grid : dict, optional
        GBDTPropDCG's grid (default :data:`~counterfactual_ltr.estimators.GBDT_GRID`).
    alpha : sequence of float >= 0, default ``(1e-6,)``
        Deep PropDCG's grid of weight decay.
    preprocessor : scikit-learn transformer, optional
        Every learner's ``preprocessor`` (cloned by each fit).
    random_state : int, default 0
        Seed of the trees and the network.
    deep_params : dict, optional
        Further DeepPropDCG parameters (e.g. ``{"max_epochs": 20}``).

    Returns
    -------
    dict

    Examples
    --------
    >>> list(learner_candidates(["svm-propdcg", "svm-rank"]))
    ['svm-rank', 'svm-propdcg']
    """
    from . import estimators

    unknown = [n for n in names if n not in LEARNER_CLASSES]
    if unknown or not len(names):
        raise ValueError(f"unknown learner {unknown[0]!r}; expected some of {list(LEARNER_CLASSES)}" if unknown
                         else "names must name at least one learner")
    out = {}
    for name in (n for n in LEARNER_CLASSES if n in names):
        cls = getattr(estimators, LEARNER_CLASSES[name])
        params = {} if preprocessor is None else {"preprocessor": preprocessor}
        if name != "svm-rank":
            params["propensity"] = propensity
        if name == "gbdt-propdcg":
            grid = dict(estimators.GBDT_GRID if tree_grid is None else tree_grid)
            out[name] = (cls(random_state=random_state, **params), {k: list(v) for k, v in grid.items()})
        elif name == "deep":
            out[name] = (cls(random_state=random_state, **params, **(deep_params or {})),
                         {"alpha": [float(a) for a in alpha]})
        else:
            out[name] = (cls(**params), {"C": [float(c) for c in C]})
    return out


def choose_learner(names, fold_scores, noise: float = 0.0, query_terms=None) -> tuple:
    """The learner to keep: the best mean score, or (``noise > 0``) the cheapest within ``noise`` standard errors of it.

    The best is the learner with the highest mean score over the folds (the selection criterion).
    With ``noise > 0`` a cheaper learner is kept instead when the best's lead over it is at most
    ``noise`` standard errors of their paired difference (``noise=1``: the one-standard-error rule of
    Hastie, Tibshirani and Friedman, *The Elements of Statistical Learning*, 2009, sec. 7.10). With
    ``query_terms`` (each learner's contribution of every query to its pooled held-out estimate),
    lead and standard error are those of the paired per-query differences, the queries being the
    log's independent units; without, those of the per-fold differences. Whatever ``noise``, the
    reason says when the lead over a cheaper learner is within one standard error.

    The default keeps the best mean: held-out click estimates seldom separate learners by a standard
    error even where their rankings differ clearly, and preferring the cheaper learner then costs
    more than it saves (``docs/trees.md``, "Choosing the learner").

    Parameters
    ----------
    names : list of str
        The learners, cheapest first.
    fold_scores : array of shape (n_learners, n_folds)
        Each learner's (best candidate's) score on each fold; the same folds for all.
    noise : float >= 0, default 0.0
        How many standard errors a cheaper learner may trail the best by and still be kept.
    query_terms : array of shape (n_learners, n_queries), optional
        Per-query terms that sum to each learner's pooled held-out estimate (see
        :func:`select_learner`).

    Returns
    -------
    (chosen, best, reason) : (int, int, str)
        Index of the learner kept, index of the best mean, and what the choice rests on.

    Examples
    --------
    >>> folds = [[0.30, 0.32, 0.31], [0.31, 0.32, 0.31]]
    >>> choose_learner(["svm", "trees"], folds)[0], choose_learner(["svm", "trees"], folds, noise=1.0)[0]
    (1, 0)
    >>> choose_learner(["svm", "trees"], [[0.30, 0.31, 0.30], [0.32, 0.33, 0.33]], noise=1.0)[0]
    1
    """
    scores = np.asarray(fold_scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] != len(names) or scores.shape[1] < 2:
        raise ValueError(f"fold_scores must have one row per learner ({len(names)}) and at least 2 folds, "
                         f"got shape {scores.shape}")
    if not np.isfinite(scores).all():
        raise ValueError("fold_scores must be finite (a failed learner is left out before choosing)")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
    if query_terms is not None:
        query_terms = np.asarray(query_terms, dtype=np.float64)
        if query_terms.ndim != 2 or query_terms.shape[0] != len(names) or query_terms.shape[1] < 2 \
                or not np.isfinite(query_terms).all():
            raise ValueError(f"query_terms must be finite with one row per learner ({len(names)}) and at least "
                             f"2 queries, got shape {query_terms.shape}")
    means = scores.mean(axis=1)
    best, leads, errors = learner_leads(scores, query_terms)
    unit = "queries" if query_terms is not None else "folds"
    head = f"{names[best]} scored best ({means[best]:.5f})"
    i = kept_at_noise(best, leads, errors, noise)
    if i != best:
        return i, best, (f"{head} but leads {names[i]} by {leads[i]:.5f}, within {noise:g} standard "
                         f"error{'s' * (noise != 1)} of the paired differences over {unit} "
                         f"({errors[i]:.5f}): the cheaper {names[i]} is kept")
    i = kept_at_noise(best, leads, errors, 1.0)
    if i != best:
        return best, best, (f"{head}; its lead over the cheaper {names[i]} ({leads[i]:.5f}) is within one standard "
                            f"error of the paired differences over {unit} ({errors[i]:.5f}), so {names[i]} may rank "
                            "as well")
    if best == 0:
        return best, best, f"{head} and is the cheapest"
    return best, best, (f"{head} and leads every cheaper learner by more than one standard error of the paired "
                        f"differences over {unit}")


def kept_at_noise(best: int, leads, errors, noise: float) -> int:
    """Index of the learner the rule keeps: the cheapest the best leads by at most ``noise`` errors, else ``best``.

    The rule of :func:`choose_learner` on leads already measured, e.g. a stored table's
    ``leads`` and ``lead_errors`` re-read at another ``noise``. ``noise = 0`` keeps ``best``.

    Parameters
    ----------
    best : int
        Index of the best mean score.
    leads, errors : sequences of float
        The best's lead over every learner (cheapest first) and its standard error.
    noise : float >= 0
        How many standard errors a cheaper learner may trail the best by.

    Returns
    -------
    int

    Examples
    --------
    >>> kept_at_noise(2, [0.004, 0.001, 0.0], [0.002, 0.002, 0.0], 1.0)
    1
    """
    if noise > 0:
        for i in range(best):
            if leads[i] <= noise * errors[i]:
                return i
    return best


def learner_leads(fold_scores, query_terms=None) -> tuple:
    """``(best, leads, standard_errors)``: the best mean fold score and its lead over every learner.

    With ``query_terms`` the lead is the difference of the pooled estimates (sums of the query
    terms) and its error that of a sum of independent per-query differences; else the mean per-fold
    difference and its standard error. The best's own lead is 0 with error 0.

    Parameters
    ----------
    fold_scores : array of shape (n_learners, n_folds)
        Each learner's score on each fold.
    query_terms : array of shape (n_learners, n_queries), optional
        Per-query terms of each learner's pooled held-out estimate.

    Returns
    -------
    best : int
    leads, standard_errors : arrays of shape (n_learners,)

    Examples
    --------
    >>> best, leads, errors = learner_leads([[0.30, 0.31, 0.30], [0.32, 0.33, 0.33]])
    >>> best, [round(float(v), 4) for v in leads]
    (1, [0.0233, 0.0])
    """
    scores = np.asarray(fold_scores, dtype=np.float64)
    best = int(np.argmax(scores.mean(axis=1)))
    pooled = query_terms is not None
    terms = np.asarray(query_terms if pooled else scores, dtype=np.float64)
    d = terms[best] - terms
    if pooled:       # the pooled estimate is the sum of the query terms: its difference and that sum's error
        return best, d.sum(axis=1), np.sqrt(d.shape[1]) * d.std(axis=1, ddof=1)
    return best, d.mean(axis=1), d.std(axis=1, ddof=1) / np.sqrt(d.shape[1])


def select_learner(log, learners=None, *, propensity=None, cv: int = 3, scoring=None, scoring_name=None,
                   strengths=(0.0,), noise: float = 0.0, extend: bool = True, max_extensions: int = 3,
                   scoring_for=None, refit: bool = True):
    """Tune every candidate learner on the same folds, keep the best (or a cheaper one within the noise), refit it.

    The noise of a lead is measured on the paired per-query differences of the learners' pooled
    held-out estimates when ``scoring`` is an IPS or SNIPS scorer of this package (or ``None``),
    else on the per-fold differences (:func:`choose_learner`). A scorer that scores a quantile over
    an estimated propensity's replicates is compared so at its point estimate, so a learner's lead
    may differ in sign from the difference of the quantile scores.

    Parameters
    ----------
    log : ClickLog
        The training log.
    learners : dict, optional
        ``{name: (estimator, grid)}``, cheapest first; default :func:`learner_candidates` with
        ``propensity``. One numeric parameter: :func:`~counterfactual_ltr.model_selection.grid_search`
        (extended at a binding edge); several: :func:`~counterfactual_ltr.model_selection.param_grid_search`.
    propensity : None, float or propensity model
        With ``learners=None``: the propensity learners' examination model.
    cv : int >= 2, default 3
        Folds of queries, the same for every learner.
    scoring : None or scorer, default None
        The criterion (e.g. :func:`~counterfactual_ltr.evaluation.snips_scorer`); ``None``: ``score``.
    scoring_name : str, optional
        How the records name the criterion.
    strengths : sequence of float in [0, 1], default (0.0,)
        Tempering strengths of an estimated propensity, tried for every propensity learner.
    noise : float >= 0, default 0.0
        See :func:`choose_learner` (0: the best mean is kept).
    extend, max_extensions
        As for :func:`~counterfactual_ltr.model_selection.grid_search`.
    scoring_for : callable, optional
        ``scoring_for(name) -> scorer`` scoring as ``scoring`` does (e.g. counting fits for a progress bar).
    refit : bool, default True
        Fit the chosen learner on the whole log; False: every learner's best candidate, unfitted.

    Returns
    -------
    estimator, or dict of str -> estimator (``refit=False``)
        The chosen learner fitted on the whole log; ``selection_`` is its search's record with
        ``"learners"``: ``names``, ``best_scores``, ``std_scores``, ``fold_scores``, ``leads`` and
        ``lead_errors`` (of the best over each), ``lead_unit``, ``chosen_params``, ``seconds`` (CPU
        time of each search), ``failed``, ``best``, ``chosen``, ``reason``, ``noise``.

    Examples
    --------
    >>> import warnings
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=40, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     model = select_learner(log, learner_candidates(["svm-rank", "svm-proprank"], C=[1.0]), cv=2)
    >>> model.selection_["learners"]["chosen"] in ("svm-rank", "svm-proprank")
    True
    """
    from sklearn.base import clone

    from ._validation import check_bool
    from .model_selection import cv_folds

    learners = learner_candidates(propensity=propensity) if learners is None else dict(learners)
    if not learners:
        raise ValueError("learners must hold at least one (estimator, grid)")
    refit = check_bool(refit, "refit")
    folds = cv_folds(log, cv)
    name_of_scoring = scoring_name or ("estimator.score" if scoring is None else repr(scoring))
    records, failed, seconds, out_of_fold = {}, {}, {}, {}
    for name, (estimator, grid) in learners.items():
        recorder = _OutOfFold(scoring if scoring_for is None else scoring_for(name))
        started = time.process_time()
        try:
            model = _search(estimator, grid, log, folds, recorder, name_of_scoring, strengths, extend, max_extensions)
        except (ValueError, ImportError, ArithmeticError) as err:
            failed[name] = f"{type(err).__name__}: {err}"[:2000]
            warnings.warn(f"select_learner leaves out {name}: its search failed ({failed[name]})", stacklevel=2)
            continue
        seconds[name] = time.process_time() - started
        if not np.isfinite(model.selection_["fold_scores"]).all():
            failed[name] = "its best candidate has a non-finite cross-validated score"
            continue
        records[name] = model
        out_of_fold[name] = recorder.scores_of(folds, model.selection_["fold_scores"], log.data.n_docs)
    if not records:
        raise ValueError("every learner's search failed: " + "; ".join(f"{k}: {v}" for k, v in failed.items()))
    table = _table(records, failed, seconds, _query_terms(log, list(records), out_of_fold, records, scoring), noise)
    for model in records.values():
        model.selection_ = {**model.selection_, "learners": table}
    if not refit:
        return records
    model = records[table["chosen"]]
    record = model.selection_
    model = clone(model).fit(log)
    model.selection_ = record
    return model


def _table(records, failed, seconds, terms, noise) -> dict:
    """The ``"learners"`` record: every learner's scores, the best's leads over it, the choice and why."""
    names = list(records)
    fold_scores = np.array([records[n].selection_["fold_scores"] for n in names])
    chosen, best, reason = choose_learner(names, fold_scores, noise, terms)
    _, leads, errors = learner_leads(fold_scores, terms)
    return {"names": names, "best_scores": [float(v) for v in fold_scores.mean(axis=1)],
            "std_scores": [float(v) for v in fold_scores.std(axis=1)], "fold_scores": fold_scores.tolist(),
            "leads": [float(v) for v in leads], "lead_errors": [float(v) for v in errors],
            "lead_unit": "folds" if terms is None else "queries",
            "chosen_params": [_params_text(records[n]) for n in names], "seconds": [float(seconds[n]) for n in names],
            "failed": failed, "best": names[best], "chosen": names[chosen], "reason": reason, "noise": float(noise)}


def _search(estimator, grid, log, folds, scoring, scoring_name, strengths, extend, max_extensions):
    """One learner's search on the shared folds, unfitted: ``grid_search`` for one number, else the product grid."""
    from .model_selection import grid_search, param_grid_search, tempered_grid_search

    strengths = strengths if "propensity" in estimator.get_params() else (0.0,)
    if len(grid) == 1 and all(_is_number(v) for v in next(iter(grid.values()))):
        (parameter, values), = grid.items()
        options = dict(scoring=scoring, scoring_name=scoring_name, extend=extend, max_extensions=max_extensions,
                       refit=False, folds=folds)
        if list(strengths) == [0.0]:
            return grid_search(estimator, log, parameter, values, **options)
        return tempered_grid_search(estimator, log, parameter, values, strengths=strengths, **options)
    return param_grid_search(estimator, log, grid, scoring=scoring, scoring_name=scoring_name, strengths=strengths,
                             refit=False, folds=folds)


class _OutOfFold:
    """A scorer that also keeps every fitted candidate's scores of its held-out fold's documents.

    After a search, :meth:`scores_of` finds the chosen candidate's fits by their fold scores (each
    fold's score of the chosen candidate is one of the recorded calls on that fold) and puts their
    held-out scores together: one out-of-fold score per document of the log's queries.
    """

    def __init__(self, scorer):
        self.scorer = scorer
        self.calls = []        # (test log's id, score, the model's scores of its rows)
        self.rows = {}         # test log's id -> (its queries' rows, their features): gathered once per fold

    def __call__(self, estimator, X, y=None):
        value = estimator.score(X) if self.scorer is None else self.scorer(estimator, X, y)
        if id(X) not in self.rows:
            rows = X.data.rows_of(np.unique(X.session_query))
            self.rows[id(X)] = rows, X.data.X[rows]
        self.calls.append((id(X), float(value), np.asarray(estimator.predict(self.rows[id(X)][1]), dtype=np.float64)))
        return value

    def scores_of(self, folds, fold_scores, n_docs):
        scores = np.zeros(n_docs)
        for (_, test), value in zip(folds, fold_scores):
            scores[self.rows[id(test)][0]] = next(p for i, v, p in self.calls if i == id(test) and v == value)
        self.calls, self.rows = [], {}
        return scores


def _query_terms(log, names, out_of_fold, records, scoring):
    """Each learner's per-query terms of its pooled held-out IPS/SNIPS estimate, or None for another scorer.

    The pooled estimate is ``sum_i X_i / sum_i W_i`` (SNIPS; IPS divides by the number of sessions)
    over all sessions with the learner's out-of-fold scores (``session_contributions``); its terms
    are the sums of ``X_i`` over each query's sessions divided by that denominator. Scored under the
    scorer's propensity, or the first propensity learner's (the one ``score`` would use).
    """
    from .evaluation.offpolicy import session_contributions
    from .evaluation.scorers import _LogScorer
    from .metrics import LOWER_IS_BETTER

    if scoring is None:
        kind, metric, metric_params, prop = "snips", "dcg", {}, None
    elif isinstance(scoring, _LogScorer) and scoring.kind in ("ips", "snips") and not scoring.options:
        kind, metric, metric_params, prop = scoring.kind, scoring.metric, scoring.metric_params, scoring.propensity
    else:
        return None
    if prop is None:
        prop = next((m.get_params()["propensity"] for m in records.values() if "propensity" in m.get_params()), None)
    terms = []
    for name in names:
        X, W, _ = session_contributions(log, out_of_fold[name], metric=metric, propensity=prop, **metric_params)
        denominator = W.sum() if kind == "snips" else len(W)
        per_query = np.bincount(log.session_query, X, minlength=log.data.n_queries)[np.unique(log.session_query)]
        terms.append((-1 if metric in LOWER_IS_BETTER else 1) * per_query / denominator)
    return np.array(terms)


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _params_text(model) -> str:
    """The chosen candidate of a learner's search, as ``name=value, ...`` (with its tempering)."""
    record = model.selection_
    if "parameters" in record:
        pairs = zip(record["parameters"], record["chosen"])
    else:
        pairs = [(record["parameter"], record["chosen"])]
    text = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in pairs)
    if "tempering" in record:
        text += f", tempering={record['tempering']['chosen']:g}"
    return text[:200]


def learner_lines(record: dict) -> list:
    """The learner table of a ``selection_`` record as lines for a terminal, the choice marked.

    Parameters
    ----------
    record : dict
        A ``selection_`` record with ``"learners"`` (of :func:`select_learner`).

    Returns
    -------
    list of str

    Examples
    --------
    >>> table = {"names": ["svm-rank", "gbdt-propdcg"], "best_scores": [0.31, 0.33], "std_scores": [0.01, 0.01],
    ...          "leads": [0.02, 0.0], "lead_errors": [0.005, 0.0], "lead_unit": "queries",
    ...          "fold_scores": [[0.3, 0.32], [0.32, 0.34]], "chosen_params": ["C=1", "num_leaves=7"],
    ...          "seconds": [1.0, 9.0], "failed": {}, "best": "gbdt-propdcg", "chosen": "gbdt-propdcg",
    ...          "reason": "gbdt-propdcg scored best", "noise": 1.0}
    >>> print("\\n".join(learner_lines({"learners": table, "scoring": "snips-dcg", "n_folds": 2})))
      learner        snips-dcg (2-fold CV)   std       lead of the best (se over queries) CPU s   best candidate
      svm-rank       0.31000                 0.01000   0.02000 (0.00500)                  1.0     C=1
      gbdt-propdcg   0.33000                 0.01000                                      9.0     num_leaves=7   <- chosen
      gbdt-propdcg scored best
    """
    t = record["learners"]
    best = t["names"].index(t["best"])
    width = max(12, *(len(n) for n in t["names"]))
    criterion = f"{record.get('scoring', 'score')} ({record.get('n_folds', len(t['fold_scores'][0]))}-fold CV)"
    lead_head = f"lead of the best (se over {t['lead_unit']})"
    lines = [f"  {'learner':<{width}}   {criterion:<23} std       {lead_head:<34} CPU s   best candidate"]
    for i, name in enumerate(t["names"]):
        lead_text = "" if i == best else f"{t['leads'][i]:.5f} ({t['lead_errors'][i]:.5f})"
        mark = "   <- chosen" if name == t["chosen"] else ""
        lines.append(f"  {name:<{width}}   {t['best_scores'][i]:<23.5f} {t['std_scores'][i]:<9.5f} {lead_text:<34} "
                     f"{t['seconds'][i]:<7.1f} {t['chosen_params'][i]}{mark}")
    for name, why in t["failed"].items():
        lines.append(f"  {name:<{width}}   left out: {why}")
    lines.append(f"  {t['reason']}")
    return lines
