"""Off-policy evaluation of rankers from click logs: IPS and SNIPS.

For a scoring function ``S`` and a log of ``N`` sessions, the IPS estimate
of an additive metric ``Delta(S) = sum_y m(rank_S(y)) * rel(y)`` is
(Agarwal et al. 2019, Eq. 5)::

    IPS(S)   = (1/N) sum_i X_i,          X_i = sum_{clicks y in session i} m(rank_S(y)) / q_i(y)

unbiased for ``E[Delta(S)]`` whenever every relevant document has a
positive propensity ``q``. The self-normalised estimate (Swaminathan &
Joachims 2015) divides by the IPS estimate of the number of relevant
documents, ``W_i = sum_{clicks y in session i} 1 / q_i(y)``::

    SNIPS(S) = sum_i X_i / sum_i W_i

which estimates the metric *per relevant document*, e.g. the average over
relevant documents of ``1 / log2(1 + rank)`` for DCG: a ratio estimator,
consistent but not unbiased, with much smaller variance.

``m`` is the metric's rank weight in its natural orientation: ``1 /
log2(1 + r)`` for DCG, ``r`` for average rank (lower is better),
``1[r <= k] / k`` for Prec@k, ``(1 - p) p^(r - 1)`` for RBP; i.e. minus the
risk weights ``lambda`` of Table 1 (``r`` itself for AvgRank).

Confidence intervals are normal approximations: the CLT over sessions for
IPS and the delta method for SNIPS.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._segments import rank_within_queries
from ._validation import check_real
from .clicklog import ClickLog
from .propensity import as_propensity_model

__all__ = ["Estimate", "ips_estimate", "snips_estimate", "ips_scorer", "snips_scorer", "metric_weight",
           "ValidationReport", "validation_report", "true_values",
           "session_contributions"]

#: metrics whose estimate is better when lower (scorers negate them)
LOWER_IS_BETTER = {"avg_rank"}


@dataclass(frozen=True)
class Estimate:
    """An off-policy estimate with its uncertainty.

    ``ess`` is the effective sample size of the click weights,
    ``(sum w)^2 / sum w^2``; ``max_weight`` the largest ``1/q``.
    """

    value: float
    stderr: float
    ci_low: float
    ci_high: float
    confidence: float
    n_sessions: int
    n_clicks: int
    ess: float
    max_weight: float
    estimator: str
    metric: str

    def __float__(self) -> float:
        return float(self.value)


def metric_weight(metric="dcg", **params):
    """Rank weight ``m(r)`` of a metric in its natural orientation (see module docstring).

    ``metric`` is a name of :data:`counterfactual_ltr.metrics.LAMBDA_WEIGHTS`
    (``"dcg"``, ``"avg_rank"``, ``"prec@k"``, ``"rbp"``) or a callable
    ``m(ranks) -> weights``.

    >>> import numpy as np
    >>> metric_weight("dcg")(np.array([1, 3])).round(3).tolist()
    [1.0, 0.5]
    """
    if callable(metric):
        return metric
    from .metrics import get_lambda

    lam = get_lambda(metric, **params)
    sign = 1.0 if metric in LOWER_IS_BETTER else -1.0
    return lambda r: sign * lam.value(np.asarray(r, dtype=np.float64))


def _scores_for_log(log: ClickLog, scores_or_ranker) -> np.ndarray:
    data = log.data
    if hasattr(scores_or_ranker, "predict"):
        # Score only the queries the log touches: sub-logs of cross-validation stay cheap.
        queries = np.unique(log.session_query)
        rows = data.rows_of(queries)
        scores = np.zeros(data.n_docs)
        predicted = np.asarray(scores_or_ranker.predict(data.X[rows]))
        if predicted.dtype.kind not in "biuf" or predicted.size != rows.size:
            raise ValueError(f"{type(scores_or_ranker).__name__}.predict returned {predicted.shape} values of dtype "
                             f"{predicted.dtype} for {rows.size} rows; expected one real score per row")
        scores[rows] = predicted.ravel()
    else:
        scores = np.asarray(scores_or_ranker)
        if scores.dtype.kind not in "biuf":
            raise TypeError(f"scores must be real numbers (or a ranker with predict), got dtype {scores.dtype}")
        scores = scores.astype(np.float64)
        if scores.shape != (data.n_docs,):
            raise ValueError(f"scores have shape {scores.shape}, expected ({data.n_docs},) (one per data-set row)")
    if not np.all(np.isfinite(scores)):
        raise ValueError(f"scores hold a non-finite value at row {np.flatnonzero(~np.isfinite(scores))[0]}")
    return scores


def session_contributions(log: ClickLog, scores_or_ranker, *, metric="dcg", propensity=None, **metric_params):
    """Per-session ``X_i`` (weighted metric) and ``W_i`` (summed ``1/q``), and the click weights."""
    scores = _scores_for_log(log, scores_or_ranker)
    ranks = rank_within_queries(scores, log.data.query_offsets)
    clicked = np.flatnonzero(log.clicks)
    q = log.propensities(as_propensity_model(propensity))[clicked]
    w = 1.0 / q
    m = metric_weight(metric, **metric_params)(ranks[log.docs[clicked]])
    session = log.item_session[clicked]
    X = np.bincount(session, weights=w * m, minlength=log.n_sessions)
    W = np.bincount(session, weights=w, minlength=log.n_sessions)
    return X, W, w


def _estimate(kind, log, scores_or_ranker, metric, propensity, confidence, metric_params):
    if not isinstance(log, ClickLog):
        raise TypeError(f"log must be a ClickLog, got {type(log).__name__}")
    if log.n_sessions == 0:
        raise ValueError("the click log has no sessions")
    check_real(confidence, "confidence", min_value=0, max_value=1, include_min=False, include_max=False)
    if log.n_clicks == 0:
        # Every ranker would score 0 with a zero-width interval: the log says nothing about the ranker.
        raise ValueError(f"the click log has no clicks ({log.n_sessions} sessions): {kind.upper()} cannot "
                         "estimate anything from it (every ranker would get 0 with a zero-width interval)")
    X, W, w = session_contributions(log, scores_or_ranker, metric=metric, propensity=propensity, **metric_params)
    n = log.n_sessions
    if kind == "ips":
        value = X.mean()
        stderr = X.std(ddof=1) / np.sqrt(n) if n > 1 else np.inf
    else:
        if W.sum() == 0:
            raise ValueError("the click log has no clicks: SNIPS is undefined")
        value = X.sum() / W.sum()
        # Delta method for a ratio of means.
        resid = X - value * W
        stderr = np.sqrt(np.sum(resid**2) * n / max(n - 1, 1)) / W.sum() if n > 1 else np.inf
    z = stats.norm.ppf(0.5 + confidence / 2)
    ess = w.sum() ** 2 / np.sum(w**2) if w.size else 0.0
    name = metric if isinstance(metric, str) else getattr(metric, "__name__", "custom")
    return Estimate(float(value), float(stderr), float(value - z * stderr), float(value + z * stderr),
                    confidence, n, int(w.size), float(ess), float(w.max()) if w.size else 0.0, kind, name)


def ips_estimate(log: ClickLog, scores_or_ranker, *, metric="dcg", propensity=None, confidence=0.95,
                 **metric_params) -> Estimate:
    """IPS estimate of ``metric`` for a ranker (object with ``predict``) or scores per data-set row.

    A log without any click is a ``ValueError``: every ranker would get 0 with a zero-width interval,
    a certainty the log does not give (as SNIPS, which is undefined there).

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks, PositionBasedClickModel
    >>> data = make_ranking(n_queries=50, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(eta=1, eps_minus=0), 20, random_state=0)
    >>> est = ips_estimate(log, data.X[:, 0], metric="dcg")
    >>> est.ci_low <= est.value <= est.ci_high
    True
    """
    return _estimate("ips", log, scores_or_ranker, metric, propensity, confidence, metric_params)


def snips_estimate(log: ClickLog, scores_or_ranker, *, metric="dcg", propensity=None, confidence=0.95,
                   **metric_params) -> Estimate:
    """SNIPS estimate (metric per relevant document) of ``metric``; see the module docstring."""
    return _estimate("snips", log, scores_or_ranker, metric, propensity, confidence, metric_params)


class _LogScorer:
    """A scikit-learn scorer ``scorer(estimator, log, y=None)`` from a click log."""

    def __init__(self, kind, metric, propensity, metric_params):
        self.kind, self.metric, self.propensity, self.metric_params = kind, metric, propensity, metric_params

    def __call__(self, estimator, X, y=None):
        if not isinstance(X, ClickLog):
            raise ValueError(f"IPS/SNIPS scorers need a ClickLog as X, got {type(X).__name__} (for NDCG@10 on "
                             "labelled data use the estimator's score, e.g. search.best_estimator_.score(test))")
        est = _estimate(self.kind, X, estimator, self.metric, self.propensity, 0.95, self.metric_params)
        return -est.value if self.metric in LOWER_IS_BETTER else est.value

    def __repr__(self):
        return f"{self.kind}_scorer(metric={self.metric!r}, propensity={self.propensity!r})"


def ips_scorer(metric="dcg", propensity=None, **metric_params):
    """Scorer for ``GridSearchCV``/``cross_validate`` on click logs: the IPS estimate (greater is better;
    average rank is negated)."""
    return _LogScorer("ips", metric, propensity, metric_params)


def snips_scorer(metric="dcg", propensity=None, **metric_params):
    """Scorer for ``GridSearchCV``/``cross_validate`` on click logs: the SNIPS estimate (greater is better;
    average rank is negated).

    Examples
    --------
    >>> from sklearn.model_selection import GroupKFold, cross_val_score
    >>> # cross_val_score(est, log, groups=log.groups, cv=GroupKFold(3), scoring=snips_scorer("dcg"))
    """
    return _LogScorer("snips", metric, propensity, metric_params)


# ----------------------------------------------------------------------------- validation report

@dataclass
class ValidationReport:
    """IPS/SNIPS estimates of several rankers on one validation log, beside the truth when known.

    ``rows`` holds one dict per ranker with, per metric, the IPS and SNIPS
    :class:`Estimate` and (when full labels were given) the true value of
    what each estimator targets: the per-session mean for IPS, the
    per-relevant-document mean for SNIPS.
    """

    rows: list
    metrics: tuple
    confidence: float
    n_sessions: int
    n_clicks: int
    propensity: str

    def best(self, metric: str = "dcg", estimator: str = "snips") -> str:
        """Name of the ranker with the best estimate (highest; lowest for average rank)."""
        values = [r[metric][estimator].value for r in self.rows]
        pick = int(np.argmin(values) if metric in LOWER_IS_BETTER else np.argmax(values))
        return self.rows[pick]["name"]

    def to_markdown(self) -> str:
        pct = int(round(self.confidence * 100))
        lines = [f"Validation log: {self.n_sessions} sessions, {self.n_clicks} clicks; propensities {self.propensity}; "
                 f"{pct}% normal confidence intervals.", ""]
        for metric in self.metrics:
            direction = "lower is better" if metric in LOWER_IS_BETTER else "higher is better"
            has_truth = any("true" in r[metric] for r in self.rows)
            header = f"| ranker | IPS {metric} | {pct}% CI | SNIPS {metric} | {pct}% CI | ESS | max 1/q |"
            if has_truth:
                header += " true (per session) | true (per relevant doc) |"
            lines += [f"**{metric}** ({direction})", "", header, "|" + "---|" * (header.count("|") - 1)]
            for r in self.rows:
                ips, snips = r[metric]["ips"], r[metric]["snips"]
                line = (f"| {r['name']} | {ips.value:.4f} | [{ips.ci_low:.4f}, {ips.ci_high:.4f}] | {snips.value:.4f} | "
                        f"[{snips.ci_low:.4f}, {snips.ci_high:.4f}] | {snips.ess:.0f} | {snips.max_weight:.1f} |")
                if has_truth:
                    t = r[metric].get("true", {})
                    line += f" {t.get('ips', float('nan')):.4f} | {t.get('snips', float('nan')):.4f} |"
                lines.append(line)
            best = self.best(metric)
            lines += ["", f"Best by SNIPS {metric}: **{best}**", ""]
        return "\n".join(lines)

    def to_html(self) -> str:
        """A minimal HTML page of the report (tables as preformatted Markdown)."""
        import html

        return f"<html><body><pre>{html.escape(self.to_markdown())}</pre></body></html>"

    def plot(self, path=None, metric: str = "dcg"):
        """Error-bar figure of IPS and SNIPS with their intervals (and the truth when known)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        names = [r["name"] for r in self.rows]
        x = np.arange(len(names))
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
        for ax, kind in zip(axes, ("ips", "snips")):
            est = [r[metric][kind] for r in self.rows]
            vals = np.array([e.value for e in est])
            err = np.array([[e.value - e.ci_low for e in est], [e.ci_high - e.value for e in est]])
            ax.errorbar(x, vals, yerr=err, fmt="o", capsize=4, label=f"{kind.upper()} estimate")
            truth = [r[metric].get("true", {}).get(kind) for r in self.rows]
            if all(t is not None for t in truth):
                ax.plot(x, truth, "x", color="k", label="true value")
            ax.set_xticks(x, names, rotation=30, ha="right")
            ax.set_title(f"{kind.upper()} {metric}")
            ax.legend(fontsize=8)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
            plt.close(fig)
        return fig


def validation_report(rankers: dict, log: ClickLog, *, propensity=None, metrics=("dcg", "avg_rank"),
                      confidence: float = 0.95, true_relevance=None) -> ValidationReport:
    """Estimate every ranker on a validation click log: what a user reads to pick ``C``.

    Parameters
    ----------
    rankers : dict name -> fitted ranker (``predict``) or scores per data-set row
    log : ClickLog of the validation queries
    true_relevance : array (n_docs,), optional
        Click-relevance of every data-set row when it is known (simulation):
        ``P(click | examined)``, e.g. binarised labels for a noiseless click
        model. The report then shows the true value each estimator targets.

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=40, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> report = validation_report({"f0": data.X[:, 0], "f1": data.X[:, 1]}, log)
    >>> report.best("dcg") in ("f0", "f1")
    True
    """
    if not isinstance(rankers, Mapping) or len(rankers) == 0:
        raise ValueError(f"rankers must be a non-empty dict of name -> ranker or scores, got {rankers!r:.80}")
    if isinstance(metrics, str) or len(metrics) == 0:
        raise ValueError(f"metrics must be a non-empty sequence of metric names, got {metrics!r}")
    model = as_propensity_model(propensity)
    rows = []
    for name, ranker in rankers.items():
        row = {"name": name}
        for metric in metrics:
            row[metric] = {
                "ips": ips_estimate(log, ranker, metric=metric, propensity=model, confidence=confidence),
                "snips": snips_estimate(log, ranker, metric=metric, propensity=model, confidence=confidence),
            }
            if true_relevance is not None:
                row[metric]["true"] = true_values(log, ranker, true_relevance, metric=metric)
        rows.append(row)
    return ValidationReport(rows, tuple(metrics), confidence, log.n_sessions, log.n_clicks, repr(model))


def true_values(log: ClickLog, scores_or_ranker, relevance, *, metric="dcg", **metric_params) -> dict:
    """What IPS and SNIPS estimate on ``log``, computed from the known click-relevance of every row.

    ``ips``: mean over the log's sessions of ``sum_y m(rank(y)) c(y)``;
    ``snips``: ``sum_sessions sum_y m(rank(y)) c(y) / sum_sessions sum_y c(y)``,
    where ``c`` is ``relevance`` (e.g. ``P(click | examined)``).
    """
    data = log.data
    c = np.asarray(relevance, dtype=np.float64)
    if c.shape != (data.n_docs,):
        raise ValueError(f"relevance has shape {c.shape}, expected ({data.n_docs},)")
    if not np.all(np.isfinite(c)):
        raise ValueError(f"relevance holds a non-finite value at row {np.flatnonzero(~np.isfinite(c))[0]}")
    scores = _scores_for_log(log, scores_or_ranker)
    ranks = rank_within_queries(scores, data.query_offsets)
    m = metric_weight(metric, **metric_params)(ranks)
    per_query_metric = np.bincount(data.query_index, m * c, minlength=data.n_queries)
    per_query_rel = np.bincount(data.query_index, c, minlength=data.n_queries)
    sessions = log.session_query
    return {"ips": float(per_query_metric[sessions].mean()),
            "snips": float(per_query_metric[sessions].sum() / max(per_query_rel[sessions].sum(), 1e-300))}
