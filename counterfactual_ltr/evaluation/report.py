"""Validation reports: every estimator's estimate of several rankers on one log, as tables and a figure.

What a user reads to choose between rankers (or a hyper-parameter such as
``C``): the estimates with their intervals and diagnostics, beside the true
values when the click-relevance is known (simulation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..clicklog import ClickLog
from ..metrics import LOWER_IS_BETTER
from ..propensity_models import as_propensity_model
from .offpolicy import ESTIMATORS, true_values
from .relevance import fit_relevance

__all__ = ["ValidationReport", "validation_report"]


_LABELS = {"ips": "IPS", "snips": "SNIPS", "clipped_ips": "clipped IPS", "dr": "DR", "policy_aware": "policy-aware"}


@dataclass
class ValidationReport:
    """Every estimator's estimate of several rankers on one validation log, with diagnostics.

    ``rows`` holds one dict per ranker: ``row[metric][estimator]`` is an
    :class:`Estimate` for every name in ``estimators`` and, when full labels
    were given, ``row[metric]["true"]`` the true value each estimator targets
    (``"ips"``: per session, which IPS, clipped IPS, DR and policy-aware
    estimate; ``"snips"``: per relevant document).

    Made by :func:`validation_report`; read it with :meth:`to_markdown`,
    :meth:`to_html`, :meth:`plot` or :meth:`best`.

    Parameters
    ----------
    rows : list of dict
        One dict per ranker: ``row["name"]`` its name and ``row[metric]`` a
        dict of estimator name -> :class:`Estimate` (and ``"true"`` -> the
        dict of :func:`~counterfactual_ltr.evaluation.true_values`, when known).
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

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=50, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0)
    >>> report = validation_report({"f0": data.X[:, 0], "f1": data.X[:, 1]}, log, metrics=("dcg",),
    ...                            estimators=("ips", "snips"), true_relevance=(data.y >= 1).astype(float),
    ...                            n_bootstrap=0)
    >>> report.rows[0]["name"], sorted(report.rows[0]["dcg"]), report.n_sessions
    ('f0', ['ips', 'snips', 'true'], 1000)
    >>> report.best("dcg", "ips") in ("f0", "f1")
    True
    >>> print(report.to_markdown().splitlines()[0])
    Validation log: 1000 sessions, ... clicks; propensities PositionBasedPropensity(eta=1.0); 95% normal ...
    """

    rows: list
    metrics: tuple
    confidence: float
    n_sessions: int
    n_clicks: int
    propensity: str
    estimators: tuple = ("ips", "snips")

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

    def _table(self, metric):
        """Header and rows (lists of strings) of one metric's table."""
        pct = int(round(self.confidence * 100))
        has_truth = any("true" in r[metric] for r in self.rows)
        header = ["ranker", "estimator", metric, f"{pct}% CI (normal)", f"{pct}% CI (bootstrap)", "ESS",
                  "max weight share", "unshown mass", "bias bound"] + (["true"] if has_truth else []) + ["warnings"]
        lines = []
        for r in self.rows:
            for kind in self.estimators:
                e = r[metric][kind]
                boot = "-" if e.boot_low is None else f"[{e.boot_low:.4f}, {e.boot_high:.4f}]"
                line = [r["name"], _LABELS.get(kind, kind), f"{e.value:.4f}", f"[{e.ci_low:.4f}, {e.ci_high:.4f}]",
                        boot, f"{e.ess:.0f}", f"{e.max_weight_share:.3f}", f"{e.unshown_mass:.3f}",
                        f"{e.bias_bound:.4f}"]
                if has_truth:
                    t = r[metric].get("true", {})
                    target = "snips" if kind == "snips" else "ips"
                    line.append(f"{t[target]:.4f}" if target in t else "-")
                line.append("; ".join(e.warnings) if e.warnings else "")
                lines.append(line)
        return header, lines

    def to_markdown(self) -> str:
        """The report as Markdown: one table per metric and the best ranker by SNIPS (else the first estimator)."""
        pct = int(round(self.confidence * 100))
        out = [f"Validation log: {self.n_sessions} sessions, {self.n_clicks} clicks; propensities {self.propensity}; "
               f"{pct}% normal and percentile-bootstrap intervals.", ""]
        for metric in self.metrics:
            direction = "lower is better" if metric in LOWER_IS_BETTER else "higher is better"
            header, lines = self._table(metric)
            out += [f"**{metric}** ({direction})", "", "| " + " | ".join(header) + " |",
                    "|" + "---|" * len(header)]
            out += ["| " + " | ".join(line) + " |" for line in lines]
            pick = "snips" if "snips" in self.estimators else self.estimators[0]
            out += ["", f"Best by {_LABELS.get(pick, pick)} {metric}: **{self.best(metric, pick)}**", ""]
        return "\n".join(out)

    def to_html(self) -> str:
        """The report as an HTML page: one table per metric."""
        import html

        parts = [f"<html><body><p>Validation log: {self.n_sessions} sessions, {self.n_clicks} clicks; "
                 f"propensities {html.escape(self.propensity)}.</p>"]
        for metric in self.metrics:
            header, lines = self._table(metric)
            parts.append(f"<h3>{html.escape(metric)}</h3><table border='1'><tr>"
                         + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in line) + "</tr>" for line in lines]
            parts.append("</table>")
        parts.append("</body></html>")
        return "\n".join(parts)

    def plot(self, path=None, metric: str = "dcg"):
        """Error-bar figure, one panel per estimator: normal and bootstrap intervals (and the truth when known).

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
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        names = [r["name"] for r in self.rows]
        x = np.arange(len(names))
        fig, axes = plt.subplots(1, len(self.estimators), figsize=(3.6 * len(self.estimators), 3.5), squeeze=False)
        for ax, kind in zip(axes[0], self.estimators):
            est = [r[metric][kind] for r in self.rows]
            vals = np.array([e.value for e in est])
            err = np.array([[e.value - e.ci_low for e in est], [e.ci_high - e.value for e in est]])
            ax.errorbar(x - 0.1, vals, yerr=err, fmt="o", capsize=4, label="estimate, normal CI")
            if all(e.boot_low is not None for e in est):
                berr = np.array([[e.value - e.boot_low for e in est], [e.boot_high - e.value for e in est]])
                ax.errorbar(x + 0.1, vals, yerr=np.maximum(berr, 0), fmt="s", capsize=4, label="bootstrap CI")
            target = "snips" if kind == "snips" else "ips"
            truth = [r[metric].get("true", {}).get(target) for r in self.rows]
            if all(t is not None for t in truth):
                ax.plot(x, truth, "x", color="k", label="true value")
            ax.set_xticks(x, names, rotation=30, ha="right")
            ax.set_title(f"{_LABELS.get(kind, kind)} {metric}")
            ax.legend(fontsize=7)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
            plt.close(fig)
        return fig


def validation_report(rankers: dict, log: ClickLog, *, propensity=None, metrics=("dcg", "avg_rank"),
                      confidence: float = 0.95, true_relevance=None, estimators=None, clip=0.1,
                      relevance_model=None, n_bootstrap=200, random_state=None) -> ValidationReport:
    """Estimate every ranker on a validation click log with every estimator: what a user reads to pick ``C``.

    Parameters
    ----------
    rankers : dict name -> fitted ranker (``predict``) or scores per data-set row
        The rankers compared, in the report's order.
    log : ClickLog
        The validation log (sessions of held-out queries).
    propensity : None, float or propensity model, default None
        Examination model of the log, as the estimators take it (``None``:
        ``PositionBasedPropensity(1.0)``; a number: its ``eta``).
    metrics : sequence of str, default ("dcg", "avg_rank")
        Metrics to estimate, names of
        :data:`~counterfactual_ltr.metrics.LAMBDA_WEIGHTS` without parameters.
    confidence : float in (0, 1), default 0.95
        Level of the normal and bootstrap intervals.
    true_relevance : array (n_docs,), optional
        Click-relevance of every data-set row when it is known (simulation):
        ``P(click | examined)``, e.g. binarised labels for a noiseless click
        model. The report then shows the true value each estimator targets.
    estimators : sequence of names of :data:`~counterfactual_ltr.evaluation.ESTIMATORS`, optional
        Default: all, ``"policy_aware"`` only when the log carries its logging policy.
    clip : float in (0, 1], default 0.1
        Propensity floor of clipped IPS.
    relevance_model : None, scikit-learn estimator, callable or array (n_docs,), default None
        Relevance model of DR (see :func:`~counterfactual_ltr.evaluation.fit_relevance`):
        fitted once, cross-fitted, and shared by every ranker.
    n_bootstrap : int >= 0, default 200
        Bootstrap resamples of the sessions per estimate (0: no bootstrap interval).
    random_state : None, int or numpy Generator, default None
        Seed of the bootstrap and of DR's folds.

    Returns
    -------
    ValidationReport
        Every ranker's estimate of every metric by every estimator (and the
        true values when ``true_relevance`` is given).

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
    """
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
    model = as_propensity_model(propensity)
    options = {"clipped_ips": {"clip": clip}, "dr": {}}
    if "dr" in estimators:
        options["dr"]["relevance_model"] = fit_relevance(log, relevance_model, propensity=model,
                                                         random_state=random_state)
    rows = []
    for name, ranker in rankers.items():
        row = {"name": name}
        for metric in metrics:
            row[metric] = {kind: ESTIMATORS[kind](log, ranker, metric=metric, propensity=model, confidence=confidence,
                                                  n_bootstrap=n_bootstrap, random_state=random_state,
                                                  **options.get(kind, {}))
                           for kind in estimators}
            if true_relevance is not None:
                row[metric]["true"] = true_values(log, ranker, true_relevance, metric=metric)
        rows.append(row)
    return ValidationReport(rows, tuple(metrics), confidence, log.n_sessions, log.n_clicks, repr(model), estimators)
