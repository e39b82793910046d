"""Paired comparison of rankers on the same logged sessions: is the candidate better than the baseline?

Every estimator is a ratio of sums over sessions, ``sum_i X_i / sum_i B_i``
(``B_i = 1`` for the means IPS, clipped IPS, DR and policy-aware; ``B_i = W_i``
for SNIPS). The difference candidate - baseline on the same sessions is then
``sum_i (X_i^c - X_i^b) / sum_i B_i``: for SNIPS both share the denominator
``W`` (it does not depend on the ranker), so the difference is one ratio, not
a difference of two independent ratios.

Inference is over **queries**, the independent units (sessions of one query
share its documents and relevance): with ``D_q``, ``B_q`` the query's sums,

* the interval is ``diff -+ t_{G-1} se`` with the delta-method (linearised
  ratio) standard error ``se^2 = G/(G-1) sum_q (D_q - diff B_q)^2 / (sum_q B_q)^2``
  over the ``G`` queries, and the two-sided p-value is from the same ``t``;
* the bootstrap interval is BCa (bias-corrected and accelerated, Efron 1987)
  over queries resampled with replacement (the ratio is recomputed on each
  resample; the acceleration comes from the leave-one-query-out jackknife);
* the **lower bound** on the improvement (the difference, negated for metrics
  where lower is better) is the Student-t bound of Thomas et al.'s
  high-confidence policy improvement (HCPI, ICML 2015) at the interval's level:
  ``improvement - t_{1 - alpha/2, G-1} se``, the improvement-side end of the
  two-sided interval (a one-sided bound at ``1 - alpha/2``), so that "the bound
  clears 0" and "better" are one statement. It holds when the queries are
  independent draws from the traffic the decision is about, the estimate is
  approximately normal (central limit over queries; check the effective sample
  size) and the estimator is unbiased (IPS, DR, policy-aware; SNIPS is
  consistent, clipped IPS biased by at most its ``bias_bound``).

**Four verdicts.** "better" or "worse" when the interval excludes 0, "no
difference found" when it does not, and "cannot tell" when the estimate rests
on what the log cannot show, whatever the interval says (:class:`TrustRules`:
too small an effective sample size, metric mass on documents the log never
showed, one click or one query carrying the weight, clicks weighted by
propensities at positions with too few clicks). ``Comparison.reasons`` says why.

The intervals target the value over the population of queries the log's
queries were drawn from; over the log's own queries alone they are conservative.
Several candidates against one baseline are corrected by **Bonferroni**: each
interval, p-value and lower bound at level ``1 - (1 - confidence) / m``, so all
``m`` hold together with probability at least ``confidence`` and a verdict
("better": the corrected interval excludes 0) never contradicts its p-value
(Holm would be more powerful for the p-values, but has no matching intervals).

``baseline="logging"`` compares with the logged rankings themselves, whose
metric of clicks is observed on-policy, without weighting; the candidate is then
estimated on the same quantity, the value of clicks
(:mod:`~counterfactual_ltr.evaluation.click_value`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._validation import check_bool, check_int, check_probability, check_real
from ..ids import format_id
from ..logs.clicklog import ClickLog
from ..metrics import LOWER_IS_BETTER
from ..examination.propensity_models import affine_parts, is_session_dependent, resolve_propensity
from . import click_value
from .offpolicy import (BOOTSTRAP_BLOCKS, ESTIMATORS, Estimate, EstimateWarning, _finish, _metric_name, _need_features,
                        _omega, _scores_for_log, _session_terms, _setup, _unshown_mass)

__all__ = ["Comparison", "TrustRules", "compare_rankers", "value_label"]

#: warn when a comparison rests on fewer queries than this (the t approximation is then rough)
MIN_QUERIES = 20
#: at most this many resamples re-estimate an estimated propensity (each recomputes every ranker's terms)
PROPAGATED_REPLICATES = 200


@dataclass(frozen=True)
class TrustRules:
    """When a comparison rests on what the log cannot show: its verdict is then "cannot tell".

    Each rule looks at the candidate's estimate on the log; any one that fails
    turns the verdict into "cannot tell" with the rule's reason, whatever the
    interval says (the interval assumes what the rule finds doubtful).

    Parameters
    ----------
    min_ess : float, default 100
        Smallest effective sample size ``(sum w)^2 / sum w^2`` of the click
        weights ``w = 1 / propensity``: below it a handful of clicks decide.
    max_unshown_mass : float, default 0.05
        Largest share of the candidate's metric mass ``sum |omega|`` on
        documents the log never showed for their query: IPS-type estimates
        cannot see them, so a candidate that promotes them is extrapolated; and
        (except for the policy-aware estimate, which accounts for it) the
        largest share on documents the log's sessions did not show, session by
        session, as when more candidates than shown rotate through a cut list:
        IPS with position propensities alone under-counts them.
    max_click_share : float, default 0.05
        Largest share of the summed click weights carried by one click.
    max_query_share : float, default 0.25
        Largest share of the summed click weights carried by one query.
    min_position_clicks : int, default 30
        Positions with fewer clicks than this have a thinly supported propensity
        (an estimate there moves with a few clicks) ...
    max_thin_share : float, default 0.10
        ... and their clicks may carry at most this share of the summed click weights.

    Notes
    -----
    The defaults and the Monte Carlo that checks them (how often "better" is
    called for a candidate that is not better, and coverage of the interval or
    "cannot tell") are in ``docs/evaluation-notes.md``.

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=30, n_docs=(20, 20), random_state=0)
    >>> top10 = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0, max_shown=10)
    >>> c = compare_rankers(top10, -data.X[:, 0], data.X[:, 0], n_bootstrap=0)   # promotes never-shown documents
    >>> c.verdict, "never showed" in c.reasons[0]
    ('cannot tell', True)
    >>> compare_rankers(top10, -data.X[:, 0], data.X[:, 0], n_bootstrap=0,
    ...                 rules=TrustRules(max_unshown_mass=1.0, min_ess=0)).verdict
    'worse'
    """

    min_ess: float = 100.0
    max_unshown_mass: float = 0.05
    max_click_share: float = 0.05
    max_query_share: float = 0.25
    min_position_clicks: int = 30
    max_thin_share: float = 0.10

    def __post_init__(self):
        check_real(self.min_ess, "TrustRules.min_ess", min_value=0.0)
        for name in ("max_unshown_mass", "max_click_share", "max_query_share", "max_thin_share"):
            check_real(getattr(self, name), f"TrustRules.{name}", min_value=0.0, max_value=1.0)
        check_int(self.min_position_clicks, "TrustRules.min_position_clicks", min_value=0)

    def doubts(self, estimate, query_share: float, thin: tuple, unseen: float = 0.0) -> tuple:
        """The reasons (plain sentences with the numbers) why ``estimate`` cannot be trusted; empty if none.

        Parameters
        ----------
        estimate : Estimate
            The candidate's estimate on the log (its ESS, largest click share, unshown mass).
        query_share : float
            The largest share of the click weights in one query.
        thin : tuple (float, list of int)
            The click weights' share at positions with fewer than
            ``min_position_clicks`` clicks, and those positions.
        unseen : float, default 0.0
            The candidate's metric mass the sessions did not show, session by session.

        Returns
        -------
        tuple of str
        """
        out = []
        if estimate.ess < self.min_ess:
            out.append(f"effective sample size {estimate.ess:.1f} < {self.min_ess:g}: a few clicks decide")
        if estimate.unshown_mass > self.max_unshown_mass:
            out.append(f"{estimate.unshown_mass:.1%} of the candidate's metric mass is on documents the log never "
                       f"showed (> {self.max_unshown_mass:.0%}): the log cannot tell how good they are")
        elif unseen > self.max_unshown_mass:
            out.append(f"{unseen:.1%} of the candidate's metric mass is on documents its queries' sessions did not "
                       f"show (> {self.max_unshown_mass:.0%}; the list was cut below the candidates): IPS with "
                       "position propensities under-counts them; the policy-aware estimate needs the logging policy")
        if estimate.max_weight_share > self.max_click_share:
            out.append(f"one click carries {estimate.max_weight_share:.1%} of the click weights "
                       f"(> {self.max_click_share:.0%})")
        if query_share > self.max_query_share:
            out.append(f"one query carries {query_share:.1%} of the click weights (> {self.max_query_share:.0%})")
        share, positions = thin
        if share > self.max_thin_share:
            where = ", ".join(str(k) for k in positions[:5]) + (", ..." if len(positions) > 5 else "")
            out.append(f"{share:.1%} of the click weights (> {self.max_thin_share:.0%}) are at positions with fewer "
                       f"than {self.min_position_clicks} clicks ({where}), where the propensity is thinly supported")
        return tuple(out)


@dataclass(frozen=True)
class Comparison:
    """Candidate minus baseline on the same sessions, with a paired interval, a p-value and a lower bound.

    ``difference`` is candidate - baseline in the metric's units; ``improvement``
    is the same with the sign that makes "better" positive (negated for average
    rank, where lower is better), and ``lower_bound`` is the lower end of the
    interval of the improvement (``improvement_interval[0]``): ``lower_bound > 0``
    and the verdict "better" are one statement. Made by :func:`compare_rankers`.

    Parameters
    ----------
    candidate, baseline : str
        Names of the two rankers (``"logging policy"`` for the logged rankings).
    metric : str
        Name of the metric.
    estimator : str
        Name of the estimator (a key of :data:`~counterfactual_ltr.evaluation.ESTIMATORS`).
    value : str
        ``"relevance"``: the metric over click-relevance, what the estimators
        target; ``"clicks"``: the metric of clicks (what an online test measures).
    difference : float
        Estimate of candidate - baseline.
    stderr : float
        Its standard error over queries (delta method).
    ci_low, ci_high : float
        Paired Student-t interval ``difference -+ t se`` at the corrected level; with an estimated
        propensity's error propagated, widened to hold the percentile interval of the resamples
        that re-draw it (so not symmetric about ``difference``; infinite where more of its
        replicates failed than a tail holds, and the verdict is then "cannot tell").
    boot_low, boot_high : float or None
        Paired BCa bootstrap interval over queries (``None`` without bootstrap).
    p_value : float
        Two-sided p-value of "no difference", Bonferroni-adjusted (``min(1, m p)``).
    lower_bound : float
        The lower end of the interval of ``improvement``, ``improvement_interval[0]``
        (``ci_low``, or ``-ci_high`` where lower is better): ``improvement - t se`` at the
        two-sided corrected level, a one-sided bound at ``1 - alpha/2`` (HCPI's Student-t
        bound, Thomas et al. 2015, at the interval's level), or lower where the propensity's
        replicates widen the interval.
    confidence : float
        The level asked for, in (0, 1), before the correction.
    candidate_estimate, baseline_estimate : Estimate
        Each ranker's own estimate on the log (session-level intervals).
    unpaired_stderr : float
        Standard error of the difference if the two estimates were independent:
        ``sqrt(se_c^2 + se_b^2)`` over queries, what ignoring the pairing costs.
    n_queries : int
        Number of distinct queries in the log (the independent units).
    n_comparisons : int, default 1
        Number of candidates compared with the same baseline (Bonferroni's ``m``).
    higher_is_better : bool, default True
        Orientation of the metric.
    warnings : tuple of str, default ()
        Reasons not to trust the comparison.
    doubts : tuple of str, default ()
        Why the verdict is "cannot tell" (see :class:`TrustRules`); empty otherwise.
    propensity_uncertainty : str, default "treated as known"
        Whether the propensity's estimation error is in ``stderr`` and the
        interval, and how (re-estimated on each resample of the queries, or its
        own replicates from another log).
    stderr_known_propensity : float or None, default None
        The delta-method standard error with the propensity treated as known,
        where ``stderr`` includes its estimation error.

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=60, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0)
    >>> c = compare_rankers(log, data.X[:, 1], data.X[:, 0], estimator="ips", random_state=0)
    >>> c.ci_low <= c.difference <= c.ci_high and c.lower_bound <= c.improvement
    True
    >>> c.verdict in ("better", "worse", "no difference found")
    True
    """

    candidate: str
    baseline: str
    metric: str
    estimator: str
    value: str
    difference: float
    stderr: float
    ci_low: float
    ci_high: float
    boot_low: float | None
    boot_high: float | None
    p_value: float
    lower_bound: float
    confidence: float
    candidate_estimate: Estimate
    baseline_estimate: Estimate
    unpaired_stderr: float
    n_queries: int
    n_comparisons: int = 1
    higher_is_better: bool = True
    warnings: tuple = ()
    doubts: tuple = ()
    propensity_uncertainty: str = "treated as known"
    stderr_known_propensity: float | None = None

    @property
    def improvement(self) -> float:
        """The difference signed so that positive means the candidate is better."""
        return self.difference if self.higher_is_better else -self.difference

    @property
    def improvement_interval(self) -> tuple[float, float]:
        """The interval of :attr:`improvement`: ``(ci_low, ci_high)``, negated and swapped where lower is better."""
        return (self.ci_low, self.ci_high) if self.higher_is_better else (-self.ci_high, -self.ci_low)

    @property
    def verdict(self) -> str:
        """``"better"``, ``"worse"``, ``"no difference found"`` or ``"cannot tell"``; :attr:`reasons` says why.

        "cannot tell" when :attr:`doubts` holds a reason (see :class:`TrustRules`),
        else whether the interval excludes 0, and on which side.
        """
        if self.doubts:
            return "cannot tell"
        if self.ci_low > 0 or self.ci_high < 0:
            return "better" if (self.ci_low > 0) == self.higher_is_better else "worse"
        return "no difference found"

    @property
    def reasons(self) -> tuple:
        """Why the verdict is what it is: the doubts for "cannot tell", else what the interval shows."""
        if self.doubts:
            return self.doubts
        low, high = self.improvement_interval
        pct = _percent(self.confidence)
        where = f"the {pct} interval of the improvement, [{_signed(low)}, {_signed(high)}],"
        if self.verdict == "no difference found":
            return (f"{where} contains 0",)
        return (f"{where} {'is above' if low > 0 else 'is below'} 0",)

    @property
    def clears_zero(self) -> bool:
        """Whether the lower bound on the improvement is above 0 (safe to ship at the stated confidence)."""
        return bool(self.lower_bound > 0)

    def log_size_needed(self, power: float = 0.8) -> float:
        """How many times this log it takes to find a true difference of the estimated size.

        With the standard error shrinking as one over the square root of the queries logged,
        a difference ``d`` with standard error ``se`` on this log is found (the corrected
        two-sided interval excludes 0) with probability ``power`` on ``f`` times as much log,
        ``f = ((z_{1 - alpha / (2 m)} + z_power) se / |d|)^2``, ``alpha = 1 - confidence`` and
        ``m`` the comparisons corrected for. Why "no difference found" can go with a real gain:
        a gain far below the interval's half-width needs many times the log. ``inf`` for
        ``d = 0``; below 1 where this log suffices.

        Parameters
        ----------
        power : float in (0, 1), default 0.8
            The probability of finding the difference wanted.

        Returns
        -------
        float

        Examples
        --------
        >>> from click_sim import make_ranking, simulate_clicks
        >>> data = make_ranking(n_queries=60, random_state=0)
        >>> log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0)
        >>> c = compare_rankers(log, data.X[:, 1], data.X[:, 0], estimator="ips", random_state=0)
        >>> c.log_size_needed() > 0
        True
        """
        power = check_probability(power, "power", include_zero=False, include_one=False)
        if self.difference == 0 or not np.isfinite(self.stderr):
            return float("inf")
        alpha = (1.0 - self.confidence) / max(self.n_comparisons, 1)
        z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
        return float((z * self.stderr / abs(self.difference)) ** 2)

    def summary(self) -> str:
        """One plain sentence: the difference, its interval and p-value, the verdict and the lower bound.

        Returns
        -------
        str
        """
        pct = _percent(self.confidence)
        corrected = f", Bonferroni over {self.n_comparisons}" if self.n_comparisons > 1 else ""
        what = value_label(self.metric, self.value)
        low, high = self.improvement_interval
        sign = "" if self.higher_is_better else " (improvement: baseline minus candidate, lower is better)"
        head = (f"{self.candidate} vs {self.baseline}, {what} ({_LABELS.get(self.estimator, self.estimator)}){sign}: "
                f"{_signed(self.improvement)} [{_signed(low)}, {_signed(high)}] ({pct} CI{corrected}), "
                f"p {_p(self.p_value)}")
        head += f"; {self.propensity_uncertainty}"
        if self.doubts:
            return f"{head}: cannot tell, because " + "; ".join(self.doubts) + f". {self.what_would_tell()}"
        if self.verdict == "no difference found":
            verdict = f"no difference found at {pct}"
        else:
            verdict = self.verdict
        bound = (f"the lower bound on the improvement, {_signed(self.lower_bound)}, "
                 + ("clears 0" if self.clears_zero else "does not clear 0"))
        tell = f" {self.what_would_tell()}" if self.verdict == "no difference found" else ""
        return f"{head}: {verdict}; {bound}.{tell}"

    def what_would_tell(self) -> str:
        """What would turn "cannot tell" or "no difference found" into a verdict, in one sentence.

        Returns
        -------
        str
            The log size :meth:`log_size_needed` gives for the estimated difference, or why the
            log's size is not what stands in the way.

        Examples
        --------
        >>> from click_sim import make_ranking, simulate_clicks
        >>> data = make_ranking(n_queries=60, random_state=0)
        >>> log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0)
        >>> c = compare_rankers(log, data.X[:, 1], data.X[:, 0], estimator="ips", random_state=0)
        >>> c.what_would_tell().startswith(("About", "This log", "No log"))
        True
        """
        if not np.isfinite(self.stderr):
            return ("No log size can be named: the interval is unbounded (the propensity's replicates failed, or "
                    "too few clicks); a propensity the log identifies would tell first.")
        factor = self.log_size_needed()
        if not np.isfinite(factor):
            return "No log size would tell: the estimated difference is 0."
        if factor <= 1:
            return ("This log is large enough for a difference of this size (log_size_needed "
                    f"{factor:.2g}): " + ("what stands in the way are the reasons above." if self.doubts
                                          else "the interval is near 0."))
        return (f"About {factor:.3g} times this log (log_size_needed, 80 % power) would find a difference of the "
                "estimated size" + (", once the reasons above are met." if self.doubts else "."))


def value_label(metric: str, value: str) -> str:
    """The one label of a compared quantity, the same in every output.

    Parameters
    ----------
    metric : str
        The metric's name.
    value : {"clicks", "relevance"}
        The metric of clicks, or the metric over click-relevance.

    Returns
    -------
    str

    Examples
    --------
    >>> value_label("dcg", "clicks"), value_label("avg_rank", "relevance")
    ('dcg of clicks', 'avg_rank over click-relevance')
    """
    return f"{metric} of clicks" if value == "clicks" else f"{metric} over click-relevance"


_LABELS = {"ips": "IPS", "snips": "SNIPS", "clipped_ips": "clipped IPS", "dr": "DR", "policy_aware": "policy-aware"}


def _percent(confidence: float) -> str:
    """A level as a percentage, in three figures or as many more as keep a level below 1 from reading 100%."""
    for digits in range(3, 12):
        text = f"{confidence * 100:.{digits}g}"
        if confidence >= 1 or float(text) < 100:
            break
    return f"{text}%"


def _signed(x: float) -> str:
    """Four decimals with a sign (more significant digits below 0.001); no "-0.0000"."""
    if not np.isfinite(x):
        return "+inf" if x > 0 else "-inf"
    if x == 0 or abs(x) < 5e-13:
        return "0"
    return f"{x:+.4f}" if abs(x) >= 1e-3 else f"{x:+.2g}"


def _p(p: float) -> str:
    return f"= {p:.2g}" if p >= 1e-4 else "< 0.0001"


# ----------------------------------------------------------------------------- per-session terms


def _ranker_terms(setup, log, ranker, metric, metric_params, value):
    """``(X, W, w, bias_bound, unshown)`` of one ranker: relevance value or value of clicks."""
    if value == "relevance":
        omega = _omega(log, ranker, metric, metric_params)
        X, W, w, bias = _session_terms(log, omega, setup.model, rho=setup.rho, rhat=setup.rhat, clip=setup.clip)
    else:
        scores = _scores_for_log(log, ranker)
        X, W, w, bias, omega = click_value.click_terms(setup, log, scores, metric, metric_params)
    return X, W, w, bias, _unshown_mass(log, omega, setup.shown), _unseen_mass(log, omega)


def _unseen_mass(log, omega) -> float:
    """Share of the metric mass ``|omega|`` that the log's sessions did not show, session by session.

    ``sum_q n_q sum_d |omega_d| (1 - f_d) / sum_q n_q sum_d |omega_d|`` with ``f_d`` the share of
    its query's ``n_q`` sessions that showed document ``d``: 0 when every session shows every
    candidate, the never-shown mass when each document is shown always or never (a fixed top-k
    cut), and more when a drifting cut shows documents only in some sessions, where IPS with
    position propensities alone under-counts them (the policy-aware estimate's case).
    """
    data = log.data
    sessions = np.bincount(log.session_query, minlength=data.n_queries).astype(np.float64)
    shown = np.bincount(log.docs, minlength=data.n_docs)
    per_row_sessions = sessions[data.query_index]
    f = np.divide(shown, per_row_sessions, out=np.zeros(data.n_docs), where=per_row_sessions > 0)
    mass = np.abs(omega)
    total = float(sessions @ np.bincount(data.query_index, mass, minlength=data.n_queries))
    seen = float(sessions @ np.bincount(data.query_index, mass * np.minimum(f, 1.0), minlength=data.n_queries))
    return 1.0 - seen / total if total > 0 else 0.0


@contextmanager
def whose(name: str):
    """A ``ValueError`` about a ranker's scores (non-finite, wrong shape) prefixed with the ranker's name."""
    try:
        yield
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None


def _degenerate(log, ranker) -> bool:
    """Whether ``ranker`` gives every document of every logged query the same score (it ranks by row order)."""
    scores = _scores_for_log(log, ranker)
    data = log.data
    queries = np.unique(log.session_query)
    rows = data.rows_of(queries)
    q = data.query_index[rows]
    first = scores[data.query_offsets[:-1]][q]
    return bool(np.all(scores[rows] == first))


# ----------------------------------------------------------------------------- inference over queries


def _by_query(log, *session_values):
    """Sums of each per-session array over the sessions of each logged query (queries without sessions dropped)."""
    _, codes = np.unique(log.session_query, return_inverse=True)
    G = int(codes.max()) + 1
    return [np.bincount(codes, weights=v, minlength=G) for v in session_values]


def _delta_stderr(A, B, value) -> float:
    """Delta-method standard error of ``sum A / sum B`` over the clusters (queries)."""
    G = len(A)
    if G < 2:
        return np.inf
    resid = A - value * B
    return float(np.sqrt(np.sum(resid**2) * G / (G - 1)) / abs(B.sum()))


def _resample_counts(G, n_bootstrap, rng):
    """How often each of ``G`` units is drawn in each of ``n_bootstrap`` resamples (units: queries or blocks)."""
    return rng.multinomial(G, np.full(G, 1.0 / G), size=n_bootstrap).astype(np.float64)


def _blocks(A_list, B, rng):
    """Queries summed into ``BOOTSTRAP_BLOCKS`` random blocks when there are more (sums of i.i.d. units stay i.i.d.)."""
    G = len(B)
    if G <= BOOTSTRAP_BLOCKS:
        return A_list, B
    block = rng.permutation(G) % BOOTSTRAP_BLOCKS
    return ([np.bincount(block, weights=A, minlength=BOOTSTRAP_BLOCKS) for A in A_list],
            np.bincount(block, weights=B, minlength=BOOTSTRAP_BLOCKS))


def _bca(A, B, counts, levels):
    """BCa quantiles of ``sum A / sum B`` at ``levels`` from resample ``counts`` (rows: resamples; cols: units)."""
    value = A.sum() / B.sum()
    den = counts @ B
    ok = den != 0
    boot = (counts[ok] @ A) / den[ok]
    if boot.size == 0:
        return [None] * len(levels)
    if np.ptp(boot) == 0:
        return [float(boot[0])] * len(levels)
    below = (np.count_nonzero(boot < value) + 0.5 * np.count_nonzero(boot == value)) / boot.size
    below = np.clip(below, 0.5 / boot.size, 1 - 0.5 / boot.size)
    z0 = stats.norm.ppf(below)
    # Acceleration from the leave-one-unit-out jackknife of the ratio.
    rest = B.sum() - B
    keep = rest != 0
    jack = (A.sum() - A[keep]) / rest[keep]
    spread = jack.mean() - jack
    denom = 6.0 * np.sum(spread**2) ** 1.5
    accel = float(np.sum(spread**3) / denom) if denom > 0 else 0.0
    z = stats.norm.ppf(np.asarray(levels, dtype=np.float64))
    adjusted = stats.norm.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z)))
    return [float(x) for x in np.quantile(boot, adjusted)]


@dataclass(frozen=True)
class _Paired:
    difference: float
    stderr: float
    unpaired: float
    n_queries: int
    known: float | None = None        # the standard error with the propensity treated as known, when stderr is not
    replicated: tuple | None = None   # the percentile interval over resamples that re-draw the propensity


def _differences(Ac, Ab):
    """Per-query ``Ac - Ab``, with differences at the level of rounding set to 0 (the same ranking twice)."""
    D = Ac - Ab
    D[np.abs(D) <= 1e-12 * (np.abs(Ac) + np.abs(Ab))] = 0.0
    return D


def _paired(Ac, Ab, B) -> _Paired:
    D = _differences(Ac, Ab)
    diff = D.sum() / B.sum()
    se_c = _delta_stderr(Ac, B, Ac.sum() / B.sum())
    se_b = _delta_stderr(Ab, B, Ab.sum() / B.sum())
    return _Paired(float(diff), _delta_stderr(D, B, diff), float(np.hypot(se_c, se_b)), len(B))


def _t_inference(p: _Paired, confidence: float, m: int, higher_is_better: bool):
    """Bonferroni-corrected ``(ci_low, ci_high, p_value, lower_bound)`` from the t distribution with G - 1 df."""
    alpha = (1.0 - confidence) / m
    df = max(p.n_queries - 1, 1)
    sign = 1.0 if higher_is_better else -1.0
    if not np.isfinite(p.stderr):
        return -np.inf, np.inf, 1.0, -np.inf
    if p.stderr == 0:
        p_raw = 1.0 if p.difference == 0 else 0.0
        return p.difference, p.difference, min(1.0, m * p_raw), sign * p.difference
    half = stats.t.ppf(1 - alpha / 2, df) * p.stderr
    p_raw = 2 * stats.t.sf(abs(p.difference) / p.stderr, df)
    low, high = p.difference - half, p.difference + half
    if p.replicated is not None:       # skewed or failing propensity replicates: the interval holds theirs too
        low, high = min(low, p.replicated[0]), max(high, p.replicated[1])
        if low <= 0 <= high:           # and the p-value agrees with it
            p_raw = max(p_raw, (1.0 - confidence) / m)
    lower = sign * p.difference - (p.difference - low if sign > 0 else high - p.difference)   # the interval's end
    return low, high, float(min(1.0, m * p_raw)), float(lower)


# ----------------------------------------------------------------------------- the comparison


def _as_candidates(candidate) -> tuple[dict, bool]:
    """``({name: ranker}, single)``: one ranker (or score array), or a non-empty mapping of several."""
    if isinstance(candidate, Mapping):
        if len(candidate) == 0:
            raise ValueError("candidate is an empty mapping: give a ranker, scores, or {name: ranker, ...}")
        return {str(k): v for k, v in candidate.items()}, False
    if isinstance(candidate, str):
        raise ValueError(f"candidate must be a ranker, scores or a mapping of them, got the string {candidate!r} "
                         "(only the baseline may be 'logging')")
    return {"candidate": candidate}, True


def compare_rankers(log: ClickLog, candidate, baseline="logging", *, estimator="snips", metric="dcg",
                    propensity=None, confidence=0.95, n_bootstrap=2000, random_state=None, clip=0.1,
                    relevance_model=None, logging_policy=None, n_folds=2, value=None, rules=None,
                    propagate_propensity=True, **metric_params):
    """Candidate minus baseline estimated on the same sessions: paired interval, p-value, lower bound.

    The formulas, the bound and its assumptions are in the module docstring: Student-t and
    BCa-bootstrap intervals over queries (delta method for the ratio estimators), a two-sided
    p-value, and the lower end of the interval of the improvement, the lower confidence bound of
    Thomas et al.'s high-confidence policy improvement (ICML 2015); safe deployment in
    counterfactual learning to rank is discussed by Gupta et al. (SIGIR 2023). Several candidates
    are corrected by Bonferroni.

    Parameters
    ----------
    log : ClickLog
        The logged sessions both rankers are estimated on.
    candidate : ranker, array of shape (n_docs,), or mapping name -> ranker or scores
        The ranker(s) that might replace the baseline: a fitted ranker (its
        ``predict``), scores per data-set row, or several by name.
    baseline : "logging", ranker or array of shape (n_docs,), default "logging"
        ``"logging"``: the logged rankings themselves, compared on the value of
        clicks, observed on-policy for them (see
        :mod:`~counterfactual_ltr.evaluation.click_value`); a ranker or scores:
        compared on the metric over click-relevance that the estimators target.
    estimator : str, default "snips"
        A key of :data:`~counterfactual_ltr.evaluation.ESTIMATORS`:
        ``"ips"``, ``"snips"``, ``"clipped_ips"``, ``"dr"`` or ``"policy_aware"``.
    metric : str or callable, default "dcg"
        Metric; see :func:`~counterfactual_ltr.metrics.metric_weight`. For
        ``"avg_rank"`` lower is better, which ``improvement`` and ``lower_bound`` account for.
    propensity : None, float or propensity model, default None
        Examination model of the log (a number: its ``eta``); ``None``: the one the rankers carry,
        else ``PositionBasedPropensity(1.0)`` (:func:`~counterfactual_ltr.examination.propensity_models.resolve_propensity`).
    confidence : float in (0, 1), default 0.95
        Level of the two-sided intervals, whose lower end is the bound (Bonferroni for several candidates).
    n_bootstrap : int >= 0, default 2000
        Bootstrap resamples of the queries for the BCa interval, and of the
        sessions for each ranker's own estimate (0: no bootstrap intervals).
        Fewer than ``2 / alpha`` (``alpha = (1 - confidence) / n_candidates``;
        40 for one 95 % interval) is a ``ValueError``: no replicate would fall
        beyond an end of the interval. Fewer than ``10 / alpha`` warns.
    random_state : None, int or numpy Generator, default None
        Seed of the bootstraps (and of DR's folds).
    clip : float in (0, 1], default 0.1
        Propensity floor of ``"clipped_ips"``.
    relevance_model : optional
        Relevance model of ``"dr"``, as :func:`~counterfactual_ltr.evaluation.fit_relevance` takes it.
    logging_policy : object with ``position_probabilities(data)``, optional
        The logging policy for ``"policy_aware"`` and ``"dr"`` (default: ``log.logging_policy``).
    n_folds : int >= 2, default 2
        Folds of queries of DR's cross-fitted relevance model.
    value : None, "clicks" or "relevance", default None
        The metric of clicks (observed for the logged rankings) or over click-relevance (what the
        estimators target); ``None``: ``"clicks"`` against ``"logging"``, else ``"relevance"``.
        Where the metric of clicks is the same for every ranking (avg_rank at eta = 1) it warns.
    rules : TrustRules, optional
        When the verdict is "cannot tell" (default ``TrustRules()``).
    propagate_propensity : bool, default True
        With an estimated propensity, put its estimation error into the interval, p-value and
        bound: re-estimated (or, from another log, drawn from its replicates) on each of
        ``min(n_bootstrap, PROPAGATED_REPLICATES)`` resamples of the queries; the standard error
        is the larger of the delta method's and the replicates' spread
        (``Comparison.propensity_uncertainty`` says which). ``False``: treated as known.
    **metric_params
        Parameters of the metric: ``k`` for ``"prec@k"``, ``p`` for ``"rbp"``.

    Returns
    -------
    Comparison or dict of name -> Comparison
        One :class:`Comparison` for one candidate; a dict in the mapping's order
        for several (Bonferroni over them).

    Raises
    ------
    ValueError
        If the log has no sessions or no clicks, the estimator is unknown, the
        scores do not have one finite value per data-set row, or a parameter
        is out of range.

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=60, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0)
    >>> both = compare_rankers(log, {"f1": data.X[:, 1], "f2": data.X[:, 2]}, random_state=0)
    >>> sorted(both), both["f1"].n_comparisons, both["f1"].baseline, both["f1"].value
    (['f1', 'f2'], 2, 'logging policy', 'clicks')
    >>> print(both["f1"].summary())      # doctest: +ELLIPSIS
    f1 vs logging policy, dcg of clicks (SNIPS): ... (95% CI, Bonferroni over 2), p = ...
    """
    _need_features(log, "compare_rankers")
    refuse_single_query(log, "compare_rankers")
    candidates, single = _as_candidates(candidate)
    result = _compare(log, candidates, baseline, "logging policy" if _is_logging(baseline) else "baseline",
                      estimator=estimator, metric=metric, propensity=propensity, confidence=confidence,
                      n_bootstrap=n_bootstrap, random_state=random_state, clip=clip, relevance_model=relevance_model,
                      logging_policy=logging_policy, n_folds=n_folds, metric_params=metric_params, value=value,
                      rules=rules, propagate_propensity=check_bool(propagate_propensity, "propagate_propensity"))
    return result["candidate"] if single else result


def refuse_single_query(log, caller: str, alternative: str = "") -> None:
    """ValueError when the log's sessions are of one query: a paired comparison's interval is over queries.

    The sessions of one query share its documents and its relevance, so they are not independent
    draws of the difference; the interval, the p-value and the bound resample queries, and one
    query gives no spread (an infinite standard error) to build them from.
    """
    queries = np.unique(log.session_query)
    if queries.size == 1:
        raise ValueError(f"{caller}: the log has a single query ({format_id(log.query_ids[queries[0]])}): a "
                         "comparison's interval is over queries (the sessions of one query are not independent "
                         "draws), so one query cannot give one; use a log of many queries (20 or more)"
                         + (f", {alternative}" if alternative else ""))


def _is_logging(baseline) -> bool:
    if isinstance(baseline, str):
        if baseline != "logging":
            raise ValueError(f"baseline must be 'logging', a ranker or scores, got the string {baseline!r}")
        return True
    return False


def _baseline(setup, log, baseline, metric, metric_params, value, W, estimate):
    """Per-session terms and Estimate of the baseline: a ranker, or the logged rankings (``baseline`` None)."""
    ratio = setup.kind == "snips"
    if baseline is None and value == "clicks":      # observed: no weighting
        X = click_value.logged_terms(log, metric, metric_params)
        return X, estimate("on_policy_snips" if ratio else "on_policy", X, W, np.ones(log.n_clicks))
    if baseline is None:                              # the logged rankings' own IPS, each session's alpha
        X, w = click_value.logged_relevance_terms(log, metric, metric_params, setup.model)
        return X, estimate("logged_snips" if ratio else "logged_ips", X, W, w)
    with whose("the baseline"):
        X, _, w, bias, unshown, _ = _ranker_terms(setup, log, baseline, metric, metric_params, value)
    return X, estimate(setup.kind, X, W, w, bias, unshown)


def _compare(log, candidates: dict, baseline, baseline_name: str, *, estimator, metric, propensity, confidence,
             n_bootstrap, random_state, clip, relevance_model, logging_policy, n_folds, metric_params,
             setup=None, value=None, rules=None, propagate_propensity=True) -> dict:
    """Comparisons of every named candidate with ``baseline`` (Bonferroni over them); ``setup`` may be shared."""
    rules = TrustRules() if rules is None else rules
    if not isinstance(rules, TrustRules):
        raise ValueError(f"rules must be a TrustRules, got {type(rules).__name__}")
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; choose from {sorted(ESTIMATORS)}")
    confidence = check_real(confidence, "confidence", min_value=0.0, max_value=1.0, include_min=False,
                            include_max=False)
    n_bootstrap = check_int(n_bootstrap, "n_bootstrap", min_value=0)
    _check_replicates(n_bootstrap, confidence, len(candidates))
    logging = _is_logging(baseline)
    value = ("clicks" if logging else "relevance") if value is None else value
    if value not in ("clicks", "relevance"):
        raise ValueError(f"value must be 'clicks', 'relevance' or None, got {value!r}")
    if setup is None:
        propensity = resolve_propensity(propensity, *candidates.values(), *([] if logging else [baseline]))[0]
        setup = _setup(estimator, log, propensity, clip=clip if estimator == "clipped_ips" else None,
                       relevance_model=relevance_model, logging_policy=logging_policy, n_folds=n_folds,
                       random_state=random_state)
    if value == "clicks" and is_session_dependent(setup.model):
        raise ValueError(f"value='clicks' needs the examination of every rank a candidate could use, which "
                         f"{setup.model!r} (a propensity per shown result, given the clicks above it) does not give: "
                         "compare on value='relevance'")
    ratio = estimator == "snips"
    label = _metric_name(metric) + (" of clicks" if value == "clicks" else "")
    common = dict(ratio=ratio, n_bootstrap=n_bootstrap, random_state=random_state)

    def estimate(kind, X, W, w, bias=0.0, unshown=0.0):
        return _finish(kind, log, label, X, W, w, confidence, bias_bound=bias, unshown=unshown,
                       extra_warnings=setup.messages if kind == estimator else (), **common)

    terms = {}
    for name, r in candidates.items():
        with whose("the candidate" if list(candidates) == ["candidate"] else f"candidate {name!r}"):
            terms[name] = _ranker_terms(setup, log, r, metric, metric_params, value)
    W = next(iter(terms.values()))[1]          # the same for every ranker: it does not depend on the ranking
    Xb, base = _baseline(setup, log, baseline if not logging else None, metric, metric_params, value, W, estimate)
    notes = [f"{baseline_name} ranks every document equal"] if not logging and _degenerate(log, baseline) else []
    if value == "clicks" and click_value.ranking_free(metric, metric_params, setup.model, log):
        notes.append(f"the {_metric_name(metric)} of clicks is the same for every ranking under {setup.model!r} "
                     "(rank weight times examination is constant): no comparison on it can find a difference; "
                     "compare on value='relevance'")
    B_sessions = W if ratio else np.ones(log.n_sessions)
    Ab, B = _by_query(log, Xb, B_sessions)
    if B.sum() == 0:
        raise ValueError("the click log has no clicks: SNIPS is undefined")
    higher = _metric_name(metric) not in LOWER_IS_BETTER
    m = len(candidates)
    paired = {}
    for name, (X, _, w, bias, unshown, _) in terms.items():
        paired[name] = (_paired(_by_query(log, X)[0], Ab, B), estimate(estimator, X, W, w, bias, unshown))
    boot = _bootstrap_bounds(log, terms, Ab, B, confidence, m, n_bootstrap, random_state)
    how, spread = "treated as known", {}
    if propagate_propensity and n_bootstrap:
        spread, how, boot_prop = _propagated(setup, log, candidates, baseline if not logging else None, metric,
                                             metric_params, value, ratio, confidence, m, n_bootstrap, random_state)
        if spread:
            boot = boot_prop
            paired = {name: (_Paired(p.difference, max(p.stderr, spread[name]), p.unpaired, p.n_queries,
                                     known=p.stderr, replicated=boot_prop[name]), est)
                      for name, (p, est) in paired.items()}
    (W_q,) = _by_query(log, W)
    query_share = float(np.abs(W_q).max() / np.abs(W_q).sum()) if np.abs(W_q).sum() > 0 else 0.0
    # Thinly clicked positions are a doubt about a propensity treated as known; once its replicates are in
    # the interval, the interval already says how much they move the answer.
    propagated = bool(spread)
    thin = (0.0, []) if propagated else _thin_positions(log, setup.model, rules.min_position_clicks)
    out = {}
    for name, (p, cand_est) in paired.items():
        ci_low, ci_high, p_value, lower = _t_inference(p, confidence, m, higher)
        unbounded = () if np.isfinite(ci_low) and np.isfinite(ci_high) else (
            f"the interval is unbounded: {how}" if propagated else "the interval is unbounded",)
        messages = list(notes)
        if _degenerate(log, candidates[name]):
            messages.append(f"{name} ranks every document equal (all scores tie): its estimate is that of the "
                            "data set's row order")
        if p.n_queries < MIN_QUERIES:
            messages.append(f"only {p.n_queries} queries: the interval over queries is rough (fewer than {MIN_QUERIES})")
        for message in messages:
            warnings.warn(f"compare_rankers: {message}", EstimateWarning, stacklevel=3)
        out[name] = Comparison(name, baseline_name, _metric_name(metric), estimator, value, p.difference, p.stderr,
                               ci_low, ci_high, *boot.get(name, (None, None)), p_value, lower, confidence,
                               cand_est, base, p.unpaired, p.n_queries, m, higher, tuple(messages),
                               unbounded + rules.doubts(cand_est, query_share, thin,
                                                        terms[name][5] if estimator != "policy_aware" else 0.0),
                               how, p.known)
    return out


def _thin_positions(log, model, min_clicks: int) -> tuple:
    """``(share, positions)``: the click weights' share at positions with fewer than ``min_clicks`` clicks.

    Only for an estimated propensity (one with a ``method_`` other than
    ``"given"``): a given one is known at every position, however few clicks it has.
    """
    if getattr(model, "method_", "given") == "given":
        return 0.0, []
    items = np.flatnonzero(log.clicks)
    if items.size == 0:
        return 0.0, []
    pos = log.positions[items]                           # as recorded: the positions propensities are read at
    alpha, _ = affine_parts(model, np.arange(1, int(pos.max()) + 1))
    w = 1.0 / alpha[pos - 1]
    counts = np.bincount(pos, minlength=int(pos.max()) + 1)
    thin = np.flatnonzero((counts > 0) & (counts < min_clicks))
    share = float(w[np.isin(pos, thin)].sum() / w.sum())
    return share, [int(k) for k in thin]


# A BCa bound rests on the replicates beyond it: fewer than this many in each tail only warns.
MIN_TAIL_REPLICATES = 5


def _check_replicates(n_bootstrap: int, confidence: float, m: int) -> None:
    """Enough resamples for the stated interval: ``n_bootstrap * alpha / 2 >= 1`` (else refused), ``>= 5`` (else warned).

    ``alpha = (1 - confidence) / m`` is each comparison's two-sided level after Bonferroni. With
    fewer than ``2 / alpha`` replicates not one falls beyond an end of the interval, whose bounds are
    then the extreme replicates (one replicate: a zero-width interval), whatever the data.
    """
    if n_bootstrap == 0:
        return
    alpha = (1.0 - confidence) / m
    least = int(np.ceil(2.0 / alpha - 1e-9))
    level = f"{_percent(confidence)} BCa interval" + (f" (Bonferroni over {m}: {_percent(1 - alpha)} each)"
                                                     if m > 1 else "")
    if n_bootstrap < least:
        raise ValueError(f"n_bootstrap={n_bootstrap} is too few resamples for a {level}: at least {least} put one "
                         f"replicate beyond each end (fewer give the extreme replicates as its bounds); use "
                         f"{max(2000, MIN_TAIL_REPLICATES * least)} or more, or 0 for no bootstrap interval")
    if n_bootstrap * alpha / 2 < MIN_TAIL_REPLICATES:
        warnings.warn(f"n_bootstrap={n_bootstrap}: the {level} rests on fewer than {MIN_TAIL_REPLICATES} replicates "
                      f"beyond each end; its bounds are noisy (use {max(2000, MIN_TAIL_REPLICATES * least)} or more)",
                      EstimateWarning, stacklevel=4)


def _bootstrap_bounds(log, terms, Ab, B, confidence, m, n_bootstrap, random_state) -> dict:
    """BCa interval of every candidate's difference, from the same resamples of the queries."""
    if n_bootstrap == 0:
        return {}
    names = list(terms)
    D = [_differences(_by_query(log, terms[name][0])[0], Ab) for name in names]
    rng = np.random.default_rng(random_state)
    D, B = _blocks(D, B, rng)
    counts = _resample_counts(len(B), n_bootstrap, rng)
    alpha = (1.0 - confidence) / m
    return {name: tuple(_bca(d, B, counts, [alpha / 2, 1 - alpha / 2])) for name, d in zip(names, D)}


def _propagated(setup, log, candidates, baseline, metric, metric_params, value, ratio, confidence, m, n_bootstrap,
                random_state):
    """``(spread, how, boot)``: the differences over resamples that re-draw the propensity too.

    Each of ``min(n_bootstrap, PROPAGATED_REPLICATES)`` resamples of the queries gets its own
    replicate of the estimated propensity (:func:`~counterfactual_ltr.propensity.uncertainty.replicate_models`).
    ``boot`` maps each candidate to the percentile interval of its difference at the corrected
    level, ``spread`` to the standard deviation its central replicates imply; a failed replicate
    counts beyond both ends (:func:`~counterfactual_ltr.propensity.uncertainty.percentile_interval`).
    Empty ``spread`` when the propensity is given or cannot be replicated (``how`` says why). DR's
    relevance model and the policy-aware expected examination stay those of the full fit.
    """
    from dataclasses import replace

    from ..propensity.uncertainty import percentile_interval, percentile_spread, replicate_models

    queries, codes = np.unique(log.session_query, return_inverse=True)
    G = queries.size
    n_rep = min(n_bootstrap, PROPAGATED_REPLICATES)
    rng = np.random.default_rng(random_state)
    counts = _resample_counts(G, n_rep, rng)                       # (n_rep, G)
    weights = np.zeros((n_rep, log.n_queries))
    weights[:, queries] = counts
    replicates = replicate_models(setup.model, log, weights, random_state=rng)
    if replicates.models is None:
        return {}, f"treated as known ({replicates.how})", {}
    diffs = {name: np.full(n_rep, np.nan) for name in candidates}
    for b, model_b in enumerate(replicates.models):
        if model_b is None:
            continue
        setup_b = replace(setup, model=model_b)
        terms = {name: _ranker_terms(setup_b, log, r, metric, metric_params, value) for name, r in candidates.items()}
        W = next(iter(terms.values()))[1]
        if baseline is None and value == "clicks":
            Xb = click_value.logged_terms(log, metric, metric_params)
        elif baseline is None:
            Xb = click_value.logged_relevance_terms(log, metric, metric_params, setup_b.model)[0]
        else:
            Xb = _ranker_terms(setup_b, log, baseline, metric, metric_params, value)[0]
        Ab, Bq = _by_query(log, Xb, W if ratio else np.ones(log.n_sessions))
        den = counts[b] @ Bq
        for name, (X, *_) in terms.items():
            D = _differences(_by_query(log, X)[0], Ab)
            diffs[name][b] = (counts[b] @ D) / den if den != 0 else np.nan
    alpha = (1.0 - confidence) / m
    spread = {name: percentile_spread(d) for name, d in diffs.items()}
    boot = {name: percentile_interval(d, 1.0 - alpha) for name, d in diffs.items()}
    failed = {name: int(np.sum(~np.isfinite(d))) for name, d in diffs.items()}
    source = ("re-estimated on each" if replicates.how == "re-estimated"
              else "drawn from its replicates on its own log, for each")
    how = f"propensity {source} of {n_rep} resamples of the queries"
    worst = max(failed.values())
    if worst:
        how += (f" ({worst} of {n_rep} replicates failed: the log does not pin the propensity down there; they count "
                "beyond both ends of the interval)")
    return spread, how, boot
