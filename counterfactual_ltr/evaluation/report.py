"""Validation reports: should a candidate ranker replace the one that logged the clicks?

A report reads top down: a title and a summary of the log (sessions, queries,
clicks, the propensity model and where it came from, how the logger behaved);
per metric a verdict table whose first row is the baseline (the logging policy,
observed on-policy) and then, per candidate, its estimate, the paired
difference to the baseline with its interval, p-value and lower bound
(:func:`~counterfactual_ltr.evaluation.compare_rankers`) and a plain verdict;
warnings where they apply; a figure per metric; then the details: the paired
comparisons and every estimator's estimate of every ranker, each column defined
in one line. :meth:`ValidationReport.to_html`, :meth:`~ValidationReport.to_markdown`
and :meth:`~ValidationReport.to_dict` (JSON) carry the same content
(written by ``evaluation._report_render``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import numpy as np

from .._segments import segment_ids
from .._validation import check_bool, check_int, check_real
from ..logs.clicklog import ClickLog
from ..metrics import LOWER_IS_BETTER
from ..examination.propensity_models import is_session_dependent, resolve_propensity
from . import _report_render as report_render
from .compare import (TrustRules, _check_replicates, _compare, _degenerate, _percent, refuse_single_query,
                      value_label, whose)
from .offpolicy import ESTIMATORS, _need_features, _setup, true_values
from . import click_value
from .click_value import true_click_values
from .relevance import fit_relevance

__all__ = ["ValidationReport", "validation_report"]

LABELS = {"ips": "IPS", "snips": "SNIPS", "clipped_ips": "clipped IPS", "dr": "DR", "policy_aware": "policy-aware",
          "on_policy": "on-policy", "on_policy_snips": "on-policy (per relevant document)"}
LOGGING = "logging policy"
SOURCES = {"given": "given", "the rankers' own": "the one the rankers were trained under",
           "default": "the default (eta = 1), assumed: it must match how the log was collected"}


def _source_text(source: str, model) -> str:
    """Where the propensity came from; a given one that was estimated says so (and by which method)."""
    method = getattr(model, "method_", "given")
    if source == "given" and method != "given":
        return f"estimated by {method!r} and passed in"
    return SOURCES[source]


@dataclass
class ValidationReport:
    """Every ranker evaluated on one validation log, and each candidate compared with a baseline.

    ``rows`` holds one dict per ranker: ``row[metric][estimator]`` is an
    :class:`Estimate` for every name in ``estimators`` and, when the
    click-relevance was known, ``row[metric]["true"]`` the true values
    (``"ips"``: per session, what IPS, clipped IPS, DR and policy-aware
    estimate; ``"snips"``: per relevant document). ``comparisons[metric]`` is
    the list of :class:`~counterfactual_ltr.evaluation.Comparison` of every
    candidate with the baseline (empty without a baseline).

    Made by :func:`validation_report`; read it with :meth:`to_html`,
    :meth:`to_markdown`, :meth:`to_dict`, :meth:`verdict_lines`, :meth:`plot` or :meth:`best`.

    Parameters
    ----------
    rows : list of dict
        One dict per ranker: ``row["name"]`` and ``row[metric]`` (estimator name -> Estimate).
    metrics : tuple of str
        The metrics estimated.
    confidence : float
        Level of the intervals, in (0, 1).
    n_sessions, n_clicks : int
        Size of the validation log.
    propensity : str
        ``repr`` of the propensity model the estimates used.
    estimators : tuple of str, default ("ips", "snips")
        Names of :data:`~counterfactual_ltr.evaluation.ESTIMATORS` in every row, in the tables' order.
    comparisons : dict, default {}
        Metric -> list of Comparison (one per candidate, Bonferroni over them).
    baseline : str or None, default None
        ``"logging policy"`` or the name of the baseline ranker; ``None``: no comparison.
    verdict_estimator : str, default "snips"
        The estimator of the verdicts.
    propensity_source : str, default ""
        Where the propensity model came from.
    n_queries : int, default 0
        Number of distinct queries in the log.
    logger : str, default ""
        How the logging policy behaved (fixed or varying rankings, full or cut lists).
    notes : tuple of str, default ()
        Report-level notes (e.g. why DR equals IPS).
    ranker_warnings : dict, default {}
        Ranker name -> tuple of warnings (degenerate ranking, heavy weights, low effective sample size).
    truth : dict, default {}
        Metric -> candidate name -> true difference, when the click-relevance was known.

    Examples
    --------
    >>> import warnings
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=50, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     report = validation_report({"f1": data.X[:, 1], "f2": data.X[:, 2]}, log, metrics=("dcg",),
    ...                                estimators=("ips", "snips"), n_bootstrap=0, random_state=0)
    >>> report.rows[0]["name"], sorted(report.rows[0]["dcg"]), report.n_sessions, report.baseline
    ('f1', ['ips', 'snips'], 1000, 'logging policy')
    >>> [c.candidate for c in report.comparisons["dcg"]]
    ['f1', 'f2']
    >>> print(report.to_markdown().splitlines()[0])
    # Offline evaluation: 2 candidates against the logging policy
    """

    rows: list
    metrics: tuple
    confidence: float
    n_sessions: int
    n_clicks: int
    propensity: str
    estimators: tuple = ("ips", "snips")
    comparisons: dict = field(default_factory=dict)
    baseline: str | None = None
    verdict_estimator: str = "snips"
    propensity_source: str = ""
    n_queries: int = 0
    logger: str = ""
    notes: tuple = ()
    ranker_warnings: dict = field(default_factory=dict)
    truth: dict = field(default_factory=dict)

    def best(self, metric: str = "dcg", estimator: str = "snips") -> str:
        """Name of the ranker with the best estimate (highest; lowest for average rank).

        Parameters
        ----------
        metric : str, default "dcg"
            One of the report's metrics.
        estimator : str, default "snips"
            One of the report's estimators.

        Returns
        -------
        str
        """
        values = [r[metric][estimator].value for r in self.rows]
        pick = int(np.argmin(values) if metric in LOWER_IS_BETTER else np.argmax(values))
        return self.rows[pick]["name"]

    def verdict_lines(self) -> list:
        """One plain sentence per candidate and metric (what ``cltr evaluate`` prints).

        Returns
        -------
        list of str
        """
        return [c.summary() for metric in self.metrics for c in self.comparisons.get(metric, [])]

    def content(self) -> dict:
        """The report's text, section by section: what every format renders (see the module docstring).

        Returns
        -------
        dict
        """
        return report_render.content(self)

    def to_markdown(self) -> str:
        """The report as Markdown (the figures are in the HTML).

        Returns
        -------
        str
        """
        return report_render.markdown(self.content())

    def to_html(self, figures: bool = True) -> str:
        """The report as one self-contained HTML page, figures embedded, readable in a 1,200 px window.

        Parameters
        ----------
        figures : bool, default True
            Embed one figure per metric (needs matplotlib; without it the page says so).

        Returns
        -------
        str
        """
        images = report_render.figures_png(self) if check_bool(figures, "figures") else None
        return report_render.html(self.content(), images)

    def to_dict(self) -> dict:
        """The report as JSON-ready data: the same sections as the HTML and Markdown, plus every number.

        Returns
        -------
        dict
        """
        out = dict(self.content())
        out.update({"n_sessions": self.n_sessions, "n_queries": self.n_queries, "n_clicks": self.n_clicks,
                    "propensity": self.propensity, "propensity_source": self.propensity_source,
                    "confidence": self.confidence, "baseline": self.baseline,
                    "verdict_estimator": self.verdict_estimator,
                    "comparisons": {m: {c.candidate: json_ready({**asdict(c), "verdict": c.verdict,
                                                                 "reasons": c.reasons, "improvement": c.improvement,
                                                                 "log_size_needed": c.log_size_needed(),
                                                                 "improvement_interval": c.improvement_interval,
                                                                 "label": value_label(c.metric, c.value)})
                                        for c in cs}
                                    for m, cs in self.comparisons.items()},
                    "rankers": {row["name"]: {m: {k: json_ready(asdict(v)) if hasattr(v, "__dataclass_fields__")
                                                  else json_ready(v) for k, v in row[m].items()}
                                              for m in self.metrics} for row in self.rows},
                    "truth": json_ready(self.truth)})
        return out

    def plot(self, path=None, metric: str = "dcg"):
        """The figure of one metric: every ranker's estimate, and each candidate's improvement with its interval.

        Parameters
        ----------
        path : str or path-like, optional
            Save the figure there (PNG) and close it.
        metric : str, default "dcg"
            The metric shown.

        Returns
        -------
        matplotlib Figure
        """
        fig = report_render.figure(self, metric)
        if path is not None:
            import matplotlib.pyplot as plt

            fig.savefig(path, dpi=100)
            plt.close(fig)
        return fig


def json_ready(value):
    """JSON-ready: tuples to lists, numpy numbers to floats, non-finite floats to None."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [json_ready(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


# ----------------------------------------------------------------------------- what the log says


def logger_description(log: ClickLog) -> tuple[str, bool, bool]:
    """``(text, fixed, full)``: whether every session of a query shows the same ranking, and all its documents."""
    offsets = log.session_offsets
    lengths = np.diff(offsets)
    full = bool(np.all(lengths == log.data.query_lengths[log.session_query]))
    session = segment_ids(offsets)
    position = np.arange(log.n_items) - offsets[session]
    key = log.session_query[session].astype(np.int64) * (int(lengths.max(initial=0)) + 1) + position
    order = np.argsort(key, kind="stable")
    k, d = key[order], log.docs[order]
    same = k[1:] == k[:-1]
    fixed = bool(np.all(d[1:][same] == d[:-1][same]))
    text = ("the same ranking in every session of a query (a deterministic logger)" if fixed
            else "rankings that vary between sessions of a query (a stochastic logger, or several)")
    text += "; every session shows all documents of its query" if full else \
        f"; sessions show at most {int(lengths.max(initial=0))} documents"
    if log.logging_policy is not None:
        text += "; the log carries its logging policy (which policy-aware estimates need)"
    return text, fixed, full


def _notes(estimators, fixed, full, uses_policy, source) -> list:
    notes = []
    if "dr" in estimators and "ips" in estimators and full and (fixed or not uses_policy):
        why = "the logger is deterministic and " if fixed else ""
        notes.append(f"DR equals IPS for every ranker here: {why}every session shows all documents of its query, "
                     "so the relevance model's terms cancel (expected, not a fault).")
    if source == "default":
        notes.append("The propensity model is the default (eta = 1), not known to match this log: give the "
                     "log's examination model (e.g. estimated by 'cltr propensity') if it differs.")
    return notes


# ----------------------------------------------------------------------------- building the report


def _check_arguments(rankers, metrics, estimators, log, baseline, verdict_estimator):
    _need_features(log, "validation_report")
    if not isinstance(rankers, Mapping) or len(rankers) == 0:
        raise ValueError(f"rankers must be a non-empty dict of name -> ranker or scores, got {rankers!r:.80}")
    if isinstance(metrics, str) or len(metrics) == 0:
        raise ValueError(f"metrics must be a non-empty sequence of metric names, got {metrics!r}")
    if estimators is None:
        estimators = [k for k in ESTIMATORS if k != "policy_aware" or log.logging_policy is not None]
    estimators = tuple(estimators)
    unknown = [k for k in estimators if k not in ESTIMATORS]
    if unknown or not estimators:
        raise ValueError(f"unknown estimators {unknown}; choose from {sorted(ESTIMATORS)}")
    if verdict_estimator not in ESTIMATORS:
        raise ValueError(f"unknown verdict_estimator {verdict_estimator!r}; choose from {sorted(ESTIMATORS)}")
    if baseline is not None and baseline != "logging" and baseline not in rankers:
        raise ValueError(f"baseline must be 'logging', None or the name of one of the rankers "
                         f"({', '.join(map(str, rankers))}), got {baseline!r}")
    if baseline is not None:
        refuse_single_query(log, "validation_report", "or baseline=None for each ranker's estimates alone")
    return estimators


def _check_pair_bootstrap(pair_bootstrap, confidence, rankers, baseline) -> None:
    """The comparisons' resamples checked before any estimate is computed, under this function's name for them."""
    m = len(rankers) - (0 if baseline in (None, "logging") else 1)
    if baseline is None or m == 0:
        return
    pair_bootstrap = check_int(pair_bootstrap, "pair_bootstrap", min_value=0)
    confidence = check_real(confidence, "confidence", min_value=0.0, max_value=1.0, include_min=False,
                            include_max=False)
    try:
        with warnings.catch_warnings():          # a warning, if any, comes from the comparisons themselves
            warnings.simplefilter("ignore")
            _check_replicates(pair_bootstrap, confidence, m)
    except ValueError as err:
        raise ValueError("pair_bootstrap=" + str(err).removeprefix("n_bootstrap=")) from None


def _estimates(rankers, log, metrics, estimators, model, confidence, options, n_bootstrap, random_state,
               true_relevance):
    rows = []
    for name, ranker in rankers.items():
        row = {"name": name}
        for metric in metrics:
            with whose(f"ranker {name!r}"):
                row[metric] = {kind: ESTIMATORS[kind](log, ranker, metric=metric, propensity=model,
                                                      confidence=confidence, n_bootstrap=n_bootstrap,
                                                      random_state=random_state, **options.get(kind, {}))
                               for kind in estimators}
            if true_relevance is not None:
                row[metric]["true"] = true_values(log, ranker, true_relevance, metric=metric)
        rows.append(row)
    return rows


def _comparisons(rankers, log, metrics, baseline, verdict_estimator, model, confidence, options, pair_bootstrap,
                 random_state, true_relevance, rules=None, propagate_propensity=True):
    """Metric -> list of Comparison, and metric -> candidate -> true difference (when the relevance is known)."""
    if baseline is None:
        return {}, {}
    logging = baseline == "logging"
    candidates = {k: v for k, v in rankers.items() if logging or k != baseline}
    if not candidates:
        return {}, {}
    opts = options.get(verdict_estimator, {})
    setup = _setup(verdict_estimator, log, model, clip=opts.get("clip"), relevance_model=opts.get("relevance_model"),
                   random_state=random_state)
    out, truth = {}, {}
    for metric in metrics:
        # The metric of clicks can be the same for every ranking (avg rank under eta = 1): compare on relevance then.
        # A cascade-aware propensity (per shown result) gives no examination by rank: relevance only.
        value = "relevance" if logging and (is_session_dependent(model) or click_value.ranking_free(metric, {}, model,
                                                                                                      log)) else None
        found = _compare(log, candidates, "logging" if logging else rankers[baseline], LOGGING if logging else baseline,
                         estimator=verdict_estimator, metric=metric, propensity=model, confidence=confidence,
                         n_bootstrap=pair_bootstrap, random_state=random_state, clip=opts.get("clip", 0.1),
                         relevance_model=None, logging_policy=None, n_folds=2, metric_params={}, setup=setup,
                         value=value, rules=rules, propagate_propensity=propagate_propensity)
        out[metric] = list(found.values())
        if true_relevance is not None:
            truth[metric] = _true_differences(log, rankers, candidates, baseline, out[metric][0].value, metric,
                                              model, true_relevance, verdict_estimator)
    return out, truth


def _true_differences(log, rankers, candidates, baseline, value, metric, model, relevance, estimator) -> dict:
    """Candidate name -> the difference the verdict estimator targets, from the known relevance."""
    target = "snips" if estimator == "snips" else "ips"
    # With every position examined (eta = 0) the value of clicks is the metric over relevance of the shown lists.
    examination = model if value == "clicks" else 0.0

    def truth(r):
        return true_click_values(log, r, relevance, metric=metric, propensity=examination)[target]

    base = truth("logging" if baseline == "logging" else rankers[baseline])
    return {k: truth(r) - base for k, r in candidates.items()}


def _ranker_warnings(rankers, log, comparisons, rows, metrics, verdict_estimator) -> dict:
    """Per ranker: ties everywhere, and the verdict estimator's diagnostics (heavy weights, low ESS, unshown mass)."""
    out = {}
    for row in rows:
        name, messages = row["name"], []
        if _degenerate(log, rankers[name]):
            messages.append("ranks every document equal (all scores tie, e.g. w = 0): its ranking is the data "
                            "set's row order, not a model's")
        estimates = [row[m][verdict_estimator] for m in metrics if verdict_estimator in row[m]]
        estimates += [c.candidate_estimate for cs in comparisons.values() for c in cs if c.candidate == name]
        for estimate in estimates:
            messages += [w for w in estimate.warnings if w not in messages]
        if messages:
            out[name] = tuple(messages)
    return out


def validation_report(rankers: dict, log: ClickLog, *, propensity=None, metrics=("dcg", "avg_rank"),
                      confidence: float = 0.95, true_relevance=None, estimators=None, clip=0.1,
                      relevance_model=None, n_bootstrap=200, random_state=None, baseline="logging",
                      verdict_estimator="snips", pair_bootstrap=2000, propensity_source=None,
                      rules=None, propagate_propensity=True) -> ValidationReport:
    """Evaluate every ranker on a validation log and compare each with a baseline: should we ship it?

    Parameters
    ----------
    rankers : dict name -> fitted ranker (``predict``) or scores per data-set row
        The rankers, in the report's order.
    log : ClickLog
        The validation log (sessions of held-out queries).
    propensity : None, float or propensity model, default None
        Examination model of the log, one for every ranker (a number: its
        ``eta``); ``None``: the one the rankers were trained under when they
        carry one, else eta = 1 (see
        :func:`~counterfactual_ltr.examination.propensity_models.resolve_propensity`).
    metrics : sequence of str, default ("dcg", "avg_rank")
        Metrics to estimate, names of
        :data:`~counterfactual_ltr.metrics.LAMBDA_WEIGHTS` without parameters.
    confidence : float in (0, 1), default 0.95
        Level of every interval (the lower bounds are the intervals' lower ends on the improvement).
    true_relevance : array (n_docs,), optional
        Click-relevance of every data-set row when it is known (simulation):
        ``P(click | examined)``. The report then shows the true values.
    estimators : sequence of names of :data:`~counterfactual_ltr.evaluation.ESTIMATORS`, optional
        Those of the detailed table. Default: all, ``"policy_aware"`` only when
        the log carries its logging policy.
    clip : float in (0, 1], default 0.1
        Propensity floor of clipped IPS.
    relevance_model : None, scikit-learn estimator, callable or array (n_docs,), default None
        Relevance model of DR (see :func:`~counterfactual_ltr.evaluation.fit_relevance`):
        fitted once, cross-fitted, and shared by every ranker.
    n_bootstrap : int >= 0, default 200
        Bootstrap resamples of the sessions per estimate (0: no bootstrap interval).
    random_state : None, int or numpy Generator, default None
        Seed of the bootstraps and of DR's folds.
    baseline : "logging", a key of ``rankers``, or None, default "logging"
        What every candidate is compared with: the logged rankings (compared on
        the metric of clicks, observed on-policy for them), one of the rankers
        (compared on the metric over click-relevance), or nothing.
    verdict_estimator : str, default "snips"
        The estimator of the comparisons and verdicts.
    pair_bootstrap : int >= 0, default 2000
        Bootstrap resamples of the queries for the paired BCa intervals.
    propensity_source : str, optional
        Where the propensity model came from, for the summary (default: said
        from how it was resolved).
    rules : TrustRules, optional
        When a verdict is "cannot tell" (see
        :class:`~counterfactual_ltr.evaluation.compare.TrustRules`; default ``TrustRules()``).
    propagate_propensity : bool, default True
        An estimated propensity is re-estimated (or redrawn from its replicates) on every
        resample of the queries, so the verdicts' intervals include its estimation error, as in
        :func:`~counterfactual_ltr.evaluation.compare_rankers`; ``False`` treats it as known
        (the report says which).

    Returns
    -------
    ValidationReport

    Examples
    --------
    >>> import warnings
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=40, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     report = validation_report({"f0": data.X[:, 0], "f1": data.X[:, 1]}, log, random_state=0)
    >>> report.best("dcg") in ("f0", "f1"), report.estimators
    (True, ('ips', 'snips', 'clipped_ips', 'dr', 'policy_aware'))
    >>> report.comparisons["dcg"][0].summary().startswith("f0 vs logging policy, dcg of clicks (SNIPS)")
    True
    """
    chosen = estimators
    propagate_propensity = check_bool(propagate_propensity, "propagate_propensity")
    estimators = _check_arguments(rankers, metrics, estimators, log, baseline, verdict_estimator)
    _check_pair_bootstrap(pair_bootstrap, confidence, rankers, baseline)
    model, source = resolve_propensity(propensity, *rankers.values())
    if chosen is None and is_session_dependent(model):   # DR and policy-aware need the examination by rank
        estimators = tuple(k for k in estimators if k not in ("dr", "policy_aware"))
    options = {"clipped_ips": {"clip": clip}, "dr": {}}
    if "dr" in estimators or verdict_estimator == "dr":
        options["dr"]["relevance_model"] = fit_relevance(log, relevance_model, propensity=model,
                                                         random_state=random_state)
    rows = _estimates(rankers, log, metrics, estimators, model, confidence, options, n_bootstrap, random_state,
                      true_relevance)
    comparisons, truth = _comparisons(rankers, log, metrics, baseline, verdict_estimator, model, confidence, options,
                                      pair_bootstrap, random_state, true_relevance, rules, propagate_propensity)
    text, fixed, full = logger_description(log)
    uses_policy = log.logging_policy is not None
    return ValidationReport(
        rows, tuple(metrics), confidence, log.n_sessions, log.n_clicks, repr(model), estimators, comparisons,
        None if baseline is None else (LOGGING if baseline == "logging" else baseline), verdict_estimator,
        propensity_source or _source_text(source, model), int(np.unique(log.session_query).size), text,
        tuple(_notes(estimators, fixed, full, uses_policy, source)),
        _ranker_warnings(rankers, log, comparisons, rows, metrics, verdict_estimator), truth)
