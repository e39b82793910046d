"""Monte Carlo of the verdicts on raw logs shaped like a real one: is a candidate that is not better called better?

Prints figures; not a test. What it measures (the must-hold of the issue): on simulated raw logs,
with the propensity estimated from each log by a method (``auto``, others by name, and ``true``,
the simulation's exact examination given as known), a truly-not-better candidate is called
"better" in at most 5 % of logs; the interval covers the true difference or the verdict is
"cannot tell" in at least 90 % of (log, candidate) pairs; the ideal ranking, where all candidates
are shown and the drift is 0.3 or more, is called "better" in at least 75 % of logs (100 % with
the true propensities).

The logs. Each is drawn by ``click_sim.raw.simulate_raw_events`` with the log's seed: ``--queries``
queries (300) with popularity ``1 / (k + 10)``, ``--pages`` result pages (2,000) of 10 results,
attractiveness ``alpha ~ Beta(1, 3)``, examination ``theta_r = (1 / r) ** eta`` (``--eta``, 1.2,
passed as ``theta=``), each page ranking the query's ``n_candidates`` documents (10: all shown; 20:
10 shown) by ``log alpha + drift * Gumbel`` (``--drifts``, 0.1 0.3 1.0), i.e. a Plackett-Luce
logger with weights ``alpha ** (1 / drift)``. The log is loaded with ``ClickLog.from_events``,
joined by id to a feature table (``f0 = log alpha``, ``f1`` = a fixed standard Gumbel per
(query, document), drawn from the log's seed), its propensity is estimated from the log itself
(``estimate_propensities(raw, method, n_bootstrap=0, random_state=seed)``, library defaults
otherwise; ``--min-clicks`` passes that option, which the old version of this script set to 1)
and two candidates are compared with the logged rankings, each on its own
(``compare_rankers(..., baseline="logging", estimator=--estimator, n_bootstrap=--bootstrap)``,
DCG of clicks, 95 %; an estimated propensity's error propagated as the library does by default):

* ``null``, the hardest truly-not-better candidate: ``f0 + s * f1`` with ``s`` the smallest scale
  whose exact true difference against the logger is <= 0 (a grid of ``--grid`` scales, doubled
  until one is <= 0, then bisection between the last grid scale above 0 and the first at or
  below it);
* ``ideal``: ``f0``, the ideal ranking (better than the logger by a margin that grows with drift).

The exact truth. The estimand of the comparison is the value of clicks ``V(q) = sum_{r <= 10}
m(r) theta_r alpha(d_r)`` (``m`` the DCG weight), averaged over queries with their popularity
``pi``: IPS targets ``sum_q pi_q (V_c(q) - V_log(q))``, SNIPS the same divided by
``sum_q pi_q A(q)`` (``A`` the logger's expected summed attractiveness of the shown documents,
SNIPS's denominator). A candidate's ``V_c`` is exact (its ranking is fixed). The logger's ``V_log``
and ``A`` are expectations over its Plackett-Luce rankings: exact with 10 candidates (a recursion
over the subsets already placed, vectorised over queries); with 20, by a Rao-Blackwellised Monte
Carlo (``--truth-draws`` rankings per query, vectorised: at each rank the *expected*
attractiveness of the next document given the ranks above, so only the prefix is random). It is
the same for every candidate scale (common random numbers), and its standard error is printed
beside the margins (0 where exact), with the null closest to 0.

Per setting (drift, candidates) a table has one row per method (``true`` beside the estimates):

* ``null->better``: share of logs, among those whose null's true difference is <= 0, where the
  null is called "better" (issue: at most 5 %);
* ``cov-or-cannot``: share of (log, candidate) pairs where the interval covers the true difference
  or the verdict is "cannot tell" (at least 90 %);
* ``ideal->better``: share of logs where the ideal is called "better" (at least 75 % where all
  candidates are shown and drift >= 0.3; 100 % with ``true``);
* verdict counts better/worse/no difference found/cannot tell of both candidates; ``fail``: logs
  whose estimate (or comparison) raised a ValueError (both verdicts then "cannot tell"; the first
  messages are printed under the table, with the commonest reasons for the library's own "cannot tell");
  ``warned``: logs whose estimate warned, by warning class;
* the mean true differences, the mean chosen ``s``, and CPU seconds per log of the method
  (estimate + both comparisons; the simulation and truth are timed apart).

Then per method and setting the mean estimated propensity curve against the true one, and, for
``auto``, which estimate it chose. The command (about the issue's full size)::

    python -m experiments.benchmarks.bench_verdict_calibration --methods true,harvest,pbm,auto \\
        --logs 8 --jobs 2

takes about 3.5 minutes on 2 cores (``--logs 24``: about 9.5; "pbm" is the slowest method, about
5 CPU s per log, its estimate re-fitted on each of the comparison's resamples). ``--method pbm``
(the old single-method option) still works, as one method. Tests: ``tests/test_bench_verdict_calibration.py``.
"""

from __future__ import annotations

import argparse
import re
import time
import warnings
from collections import Counter

import numpy as np

VERDICTS = ("better", "worse", "no difference found", "cannot tell")
CANDIDATES = ("null", "ideal")


# ----------------------------------------------------------------------------- the exact truth

def _gain(theta, n_shown):
    """``m(r) theta_r``: DCG weight times examination at positions ``1..n_shown``."""
    theta = np.asarray(theta, dtype=np.float64)[:n_shown]
    return theta / np.log2(np.arange(2, n_shown + 2))


def _popularity(n_queries):
    pi = 1.0 / (np.arange(n_queries) + 10.0)
    return pi / pi.sum()


def logger_value(alpha, theta, drift, n_shown, rng, n_draws=2000, chunk=200):
    """Per query: the drifting logger's expected ``V_log`` and ``A``, and their Monte Carlo variances.

    The logger ranks by ``log alpha + drift * Gumbel``: Plackett-Luce with log-weights
    ``log alpha / drift``. Each drawn ranking contributes, at each rank ``r``, the expected
    attractiveness of the document placed there given the ranks above (the weighted mean of the
    ones left), which is unbiased and has far less variance than the drawn document's. ``drift = 0``
    is exact (one ranking). Returns ``V, A, var_V_mean, var_A_mean, cov_mean`` (per query; the
    variances are of the means over the draws).
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    Q, M = alpha.shape
    L = int(n_shown)
    gain = _gain(theta, L)
    if drift == 0:
        top = np.argsort(-np.log(alpha), axis=1, kind="stable")[:, :L]
        a = np.take_along_axis(alpha, top, axis=1)
        z = np.zeros(Q)
        return a @ gain, a.sum(1), z, z, z
    logw = np.log(alpha) / drift
    logw -= logw.max(axis=1, keepdims=True)
    sum_v = np.zeros(Q)
    sum_a = np.zeros(Q)
    sq_v = np.zeros(Q)
    sq_a = np.zeros(Q)
    cross = np.zeros(Q)
    done = 0
    while done < n_draws:
        D = min(chunk, n_draws - done)
        noisy = logw[:, None, :] + rng.gumbel(size=(Q, D, M))
        order = np.argsort(-noisy, axis=2)                             # (Q, D, M)
        w = np.exp(np.take_along_axis(np.broadcast_to(logw[:, None, :], noisy.shape), order, axis=2))
        a = np.take_along_axis(np.broadcast_to(alpha[:, None, :], noisy.shape), order, axis=2)
        sw = np.cumsum(w[:, :, ::-1], axis=2)[:, :, ::-1][:, :, :L]     # weight left at rank r
        swa = np.cumsum((w * a)[:, :, ::-1], axis=2)[:, :, ::-1][:, :, :L]
        with np.errstate(invalid="ignore", divide="ignore"):
            expected = np.where(sw > 0, swa / sw, a[:, :, :L])           # E[alpha at r | ranks above]
        v = expected @ gain                                             # (Q, D)
        s = expected.sum(2)
        sum_v += v.sum(1)
        sum_a += s.sum(1)
        sq_v += (v * v).sum(1)
        sq_a += (s * s).sum(1)
        cross += (v * s).sum(1)
        done += D
    n = float(n_draws)
    V, A = sum_v / n, sum_a / n
    denom = n * max(n - 1.0, 1.0)
    return (V, A, (sq_v - n * V * V) / denom, (sq_a - n * A * A) / denom, (cross - n * V * A) / denom)


#: Up to this many candidates per query the logger's expectation is exact (a recursion over subsets).
EXACT_MAX_CANDIDATES = 12


def logger_value_exact(alpha, theta, drift, n_shown):
    """Per query: the drifting logger's ``V_log`` and ``A`` exactly, by recursion over the placed subsets.

    ``f(S) = sum_{j not in S} P(j next | S) (g_|S| alpha_j + f(S + j))`` with the Plackett-Luce
    ``P(j next | S) = w_j / sum_{i not in S} w_i``, ``w = alpha ** (1 / drift)``, and ``f = 0``
    once ``n_shown`` are placed; ``V_log = f({})`` (``g`` the DCG weight times examination; ``g = 1``
    gives ``A``). Vectorised over queries; ``2 ** M`` subsets, so for few candidates ``M`` only.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    Q, M = alpha.shape
    L = int(n_shown)
    gain = _gain(theta, L)
    if drift == 0:
        V, A, *_ = logger_value(alpha, theta, 0.0, L, None)
        return V, A
    logw = np.log(alpha) / drift
    w = np.exp(logw - logw.max(axis=1, keepdims=True))                # (Q, M)
    masks = np.arange(1 << M)
    bits = (masks[None, :] >> np.arange(M)[:, None]) & 1               # (M, 2^M)
    size = bits.sum(0)
    left = w @ (1 - bits)                   # weight not yet placed, (Q, 2^M), summed (no cancellation)
    f_v = np.zeros((Q, 1 << M))
    f_a = np.zeros((Q, 1 << M))
    for k in range(L - 1, -1, -1):
        at_k = masks[size == k]
        for j in range(M):
            S = at_k[(at_k >> j) & 1 == 0]
            if S.size == 0:
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                p = np.where(left[:, S] > 0, w[:, j, None] / left[:, S], 1.0 / (M - k))
            f_v[:, S] += p * (gain[k] * alpha[:, j, None] + f_v[:, S | (1 << j)])
            f_a[:, S] += p * (alpha[:, j, None] + f_a[:, S | (1 << j)])
    return f_v[:, 0], f_a[:, 0]


class Truth:
    """The exact true difference of candidates against the drifting logger (``estimator`` units).

    ``ips``: ``sum_q pi_q (V_c(q) - V_log(q))``; ``snips``: that divided by ``sum_q pi_q A(q)``.
    The logger's part (shared by every candidate) is exact for at most ``EXACT_MAX_CANDIDATES``
    candidates per query (``logger_value_exact``), else by Monte Carlo (``logger_value``), whose
    standard error is ``se`` (0 where exact).
    """

    def __init__(self, alpha, theta, drift, n_shown, rng, *, n_draws=2000, estimator="ips"):
        self.alpha = np.asarray(alpha, dtype=np.float64)
        self.L = int(n_shown)
        self.gain = _gain(theta, self.L)
        self.pi = _popularity(self.alpha.shape[0])
        self.exact = drift == 0 or self.alpha.shape[1] <= EXACT_MAX_CANDIDATES
        if self.exact:
            V, A = logger_value_exact(self.alpha, theta, drift, self.L)
            var_v = var_a = cov = np.zeros_like(V)
        else:
            V, A, var_v, var_a, cov = logger_value(self.alpha, theta, drift, self.L, rng, n_draws)
        self.V_log, self.A = V, A
        self.scale = float(self.pi @ A) if estimator == "snips" else 1.0
        # s.e. of pi @ V_log (ips) or of the ratio's logger part, by the delta method (snips)
        pv = float(self.pi ** 2 @ var_v)
        if estimator == "snips":
            pa, pc = float(self.pi ** 2 @ var_a), float(self.pi ** 2 @ cov)
            r = float(self.pi @ V) / self.scale
            self.se = float(np.sqrt(max(pv - 2 * r * pc + r * r * pa, 0.0))) / self.scale
        else:
            self.se = float(np.sqrt(max(pv, 0.0)))

    def values(self, scores):
        """``V_c`` per query of scores ``(..., Q, M)`` (exact: the candidate's ranking is fixed)."""
        scores = np.asarray(scores, dtype=np.float64)
        top = np.argsort(-scores, axis=-1, kind="stable")[..., :self.L]
        a = np.take_along_axis(np.broadcast_to(self.alpha, scores.shape), top, axis=-1)
        return a @ self.gain

    def __call__(self, scores):
        """True difference of scores ``(Q, M)`` (a float) or ``(S, Q, M)`` (an array of S)."""
        diff = (self.values(scores) - self.V_log) @ self.pi / self.scale
        return float(diff) if np.ndim(diff) == 0 else diff


def _truth(sim, candidate_scores, drift, n_shown, rng, n_draws=2000, estimator="snips"):
    """Exact true difference of each candidate against the drifting logger (examination: ``sim["theta"]``)."""
    truth = Truth(sim["alpha"], sim["theta"], drift, n_shown, rng, n_draws=n_draws, estimator=estimator)
    return {name: truth(scores) for name, scores in candidate_scores.items()}


def hardest_null_scale(truth, f0, noise, *, grid=256, s_max=0.5, max_scale=1e3, rel_tol=1e-7):
    """Smallest ``s`` on a grid with ``truth(f0 + s noise) <= 0``, refined by bisection; ``(s, truth, s_below)``.

    The grid ``0..s_max`` (``grid`` points) is doubled until a scale is at or below 0; then the
    crossing between the last grid scale above 0 (``s_below``) and the first at or below it is
    bisected down to ``rel_tol * s_max``. ``(nan, nan, nan)`` if none up to ``max_scale``.
    """
    f0, noise = np.asarray(f0, dtype=np.float64), np.asarray(noise, dtype=np.float64)
    while s_max <= max_scale:
        scales = np.linspace(0.0, s_max, grid)
        t = np.concatenate([truth(f0 + s[:, None, None] * noise) for s in np.array_split(scales, 8)])
        hit = np.flatnonzero(t <= 0)
        if hit.size:
            i = hit[0]
            if i == 0:
                return 0.0, float(t[0]), float("nan")
            lo, hi, t_hi = scales[i - 1], scales[i], float(t[i])
            while hi - lo > rel_tol * s_max:
                mid = 0.5 * (lo + hi)
                t_mid = truth(f0 + mid * noise)
                if t_mid <= 0:
                    hi, t_hi = mid, t_mid
                else:
                    lo = mid
            return float(hi), t_hi, float(lo)
        s_max *= 2.0
    return float("nan"), float("nan"), float("nan")


# ----------------------------------------------------------------------------- one log

def _theta(eta, n_shown=10):
    """Examination at positions ``1..n_shown``: ``(1/r)^eta`` for a number, or the curve itself (``--theta``)."""
    if np.ndim(eta):
        theta = np.asarray(eta, dtype=np.float64)
        if theta.shape != (n_shown,) or not np.all((theta > 0) & (theta <= 1)):
            raise ValueError(f"--theta must give {n_shown} examination probabilities in (0, 1]")
        return theta
    return (1.0 / np.arange(1, n_shown + 1)) ** float(eta)


def _estimate(raw, method, theta, seed, min_clicks=None):
    """The propensity of ``method`` (``"true"``: the simulation's theta, given) and the warnings it gave."""
    from counterfactual_ltr import estimate_propensities
    from counterfactual_ltr.examination.propensity_models import TabularPropensity

    if method == "true":
        return TabularPropensity(theta), []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options = {} if min_clicks is None else {"min_clicks": min_clicks}
        model = estimate_propensities(raw, method, n_bootstrap=0, random_state=seed, **options)
    return model, [w.category.__name__ for w in caught]


def one_log(seed, *, pages, drift, n_candidates, methods=("auto", "true"), method=None, queries=300, eta=1.2,
            estimator="ips", n_bootstrap=200, truth_draws=2000, grid=256, min_clicks=None):
    """Simulate one log, find its hardest null, and compare both candidates under each method.

    Returns ``{"s", "s_below", "truth": {null, ideal}, "se", "sim_cpu", "methods": {method: {...}}}``;
    each method's entry has ``verdicts`` (name -> (verdict, ci_low, ci_high)), ``curve`` (the
    propensity at positions 1..10, or None), ``warnings`` (class names of the estimate's warnings),
    ``compare_warnings``, ``doubts`` (why "cannot tell", the start of each), ``failure`` (the ValueError's
    message or None), ``choice`` (auto's) and ``cpu``.
    """
    from click_sim.raw import simulate_raw_events
    from counterfactual_ltr import ClickLog, RankingDataset
    from counterfactual_ltr.evaluation import compare_rankers

    if method is not None:
        methods = (method,)
    t0 = time.process_time()
    theta = _theta(eta)
    frame, sim = simulate_raw_events(pages, n_queries=queries, n_shown=10, n_candidates=n_candidates, theta=theta,
                                     drift=drift, random_state=seed)
    Q, M = sim["alpha"].shape
    noise = np.random.default_rng([seed, 1]).gumbel(size=(Q, M))    # its own stream, not the simulation's
    f0 = np.log(sim["alpha"])
    truth = Truth(sim["alpha"], sim["theta"], drift, 10, np.random.default_rng([seed, 2]), n_draws=truth_draws,
                  estimator=estimator)
    s, t_null, s_below = hardest_null_scale(truth, f0, noise, grid=grid)
    null_scale = 0.0 if np.isnan(s) else s
    true_diff = {"null": t_null if not np.isnan(s) else truth(f0 + null_scale * noise), "ideal": truth(f0)}
    table = {"query": np.repeat(sim["query_ids"], M), "doc": sim["doc_ids"].ravel(), "f0": f0.ravel(),
             "f1": noise.ravel()}
    raw = ClickLog.from_events(frame, session="session")
    data = RankingDataset.from_frame(table, features=["f0", "f1"])
    log = raw.with_data(data, missing="drop_rows")
    scores = {"null": data.X[:, 0] + null_scale * data.X[:, 1], "ideal": data.X[:, 0]}
    out = {"s": s, "s_below": s_below, "truth": true_diff, "se": truth.se, "sim_cpu": time.process_time() - t0,
           "methods": {}}
    for name in methods:
        t1 = time.process_time()
        entry = {"verdicts": {c: ("cannot tell", np.nan, np.nan) for c in CANDIDATES}, "curve": None,
                 "warnings": [], "compare_warnings": [], "failure": None, "choice": None, "doubts": []}
        try:
            propensity, entry["warnings"] = _estimate(raw, name, theta, seed, min_clicks)
            entry["curve"] = np.asarray(propensity(np.arange(1, 11)), dtype=np.float64)
            entry["choice"] = getattr(propensity, "auto_choice_", None)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for c in CANDIDATES:
                    r = compare_rankers(log, scores[c], baseline="logging", estimator=estimator,
                                        propensity=propensity, n_bootstrap=n_bootstrap, random_state=seed)
                    entry["verdicts"][c] = (r.verdict, r.ci_low, r.ci_high)
                    entry["doubts"] += [re.sub(r"\d+(\.\d+)?", "#", d.split(":")[0])[:120] for d in r.doubts]
            entry["compare_warnings"] = [w.category.__name__ for w in caught]
        except ValueError as err:
            entry["failure"] = f"{type(err).__name__}: {err}"
            entry["verdicts"] = {c: ("cannot tell", np.nan, np.nan) for c in CANDIDATES}
        entry["cpu"] = time.process_time() - t1
        out["methods"][name] = entry
    return out


# ----------------------------------------------------------------------------- the report

def _limit_threads():
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)
    except ImportError:       # pragma: no cover
        pass


def _run(task):
    seed, kwargs = task
    return one_log(seed, **kwargs)


def _summary(rows, name):
    """One method's row of a setting's table, as a dict of printed cells."""
    entries = [r["methods"][name] for r in rows]
    null_ok = [e["verdicts"]["null"][0] for r, e in zip(rows, entries) if r["truth"]["null"] <= 0]
    false_better = np.mean([v == "better" for v in null_ok]) if null_ok else float("nan")
    covered = [v == "cannot tell" or (lo <= r["truth"][c] <= hi)
               for r, e in zip(rows, entries) for c, (v, lo, hi) in e["verdicts"].items()]
    power = np.mean([e["verdicts"]["ideal"][0] == "better" for e in entries])
    counts = {c: "/".join(str(sum(e["verdicts"][c][0] == k for e in entries)) for k in VERDICTS) for c in CANDIDATES}
    warned = Counter(w for e in entries for w in set(e["warnings"]))
    cwarned = Counter(w for e in entries for w in set(e["compare_warnings"]))
    warn = ", ".join(f"{k} {v}" for k, v in sorted(warned.items())) or "0"
    if cwarned:
        warn += "; compare: " + ", ".join(f"{k} {v}" for k, v in sorted(cwarned.items()))
    return {"method": name, "null->better": f"{false_better:.1%} of {len(null_ok)}",
            "cov-or-cannot": f"{np.mean(covered):.1%} of {len(covered)}", "ideal->better": f"{power:.1%}",
            "null verdicts": counts["null"], "ideal verdicts": counts["ideal"],
            "fail": str(sum(e["failure"] is not None for e in entries)), "warned (logs)": warn,
            "true null": f"{np.mean([r['truth']['null'] for r in rows]):+.5f}",
            "true ideal": f"{np.mean([r['truth']['ideal'] for r in rows]):+.5f}",
            "s": f"{np.nanmean([r['s'] for r in rows]):.4f}" if any(np.isfinite(r["s"]) for r in rows) else "none",
            "cpu s/log": f"{np.mean([e['cpu'] for e in entries]):.2f}"}


def _print_table(cells):
    keys = list(cells[0])
    width = {k: max(len(k), *(len(c[k]) for c in cells)) for k in keys}
    print("  " + " | ".join(k.ljust(width[k]) for k in keys))
    for c in cells:
        print("  " + " | ".join(c[k].ljust(width[k]) for k in keys))


def _methods(args):
    if args.method is not None:
        return [args.method]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods:
        raise SystemExit("--methods names no method")
    return methods


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", type=int, default=300, help="distinct queries (popularity 1 / (k + 10))")
    p.add_argument("--pages", type=int, default=2000, help="result pages (of 10 results) per log")
    p.add_argument("--eta", type=float, default=1.2, help="examination (1 / r) ** eta")
    p.add_argument("--theta", default=None,
                   help="examination at positions 1-10, comma-separated (a curve that is no power law); "
                        "overrides --eta")
    p.add_argument("--drifts", type=float, nargs="*", default=[0.1, 0.3, 1.0])
    p.add_argument("--candidates", type=int, nargs="*", default=[10, 20], help="candidates per query (10 shown)")
    p.add_argument("--logs", type=int, default=8, help="logs per setting")
    p.add_argument("--methods", default="auto,true",
                   help="comma-separated estimate_propensities methods; 'true': the simulation's theta, given")
    p.add_argument("--method", default=None, help="one method (the old option; overrides --methods)")
    p.add_argument("--estimator", default="ips", choices=("ips", "snips"))
    p.add_argument("--bootstrap", type=int, default=200, help="n_bootstrap of compare_rankers (>= 40)")
    p.add_argument("--truth-draws", type=int, default=2000, help="logger rankings per query of the exact truth")
    p.add_argument("--grid", type=int, default=256, help="scales on the hardest null's grid")
    p.add_argument("--min-clicks", type=int, default=None,
                   help="min_clicks option of estimate_propensities (default: the library's)")
    p.add_argument("--jobs", type=int, default=1, help="processes (over logs)")
    p.add_argument("--first-seed", type=int, default=0, help="seed of the first log of each setting")
    args = p.parse_args(argv)
    methods = _methods(args)
    seeds = list(range(args.first_seed, args.first_seed + args.logs))
    eta = args.eta if args.theta is None else tuple(float(v) for v in args.theta.split(","))
    theta = _theta(eta)
    shape = f"(1/r)^{args.eta:g} = " if args.theta is None else ""
    print(f"Simulated raw logs: {args.queries} queries (popularity 1/(k+10)), {args.pages} pages of 10 results, "
          f"alpha ~ Beta(1, 3), examination {shape}{np.round(theta, 3).tolist()}, ranking "
          f"log alpha + drift * Gumbel; {args.logs} logs per setting, seeds {seeds[0]}..{seeds[-1]} (the same in "
          f"every setting); propensity by {', '.join(methods)} from each log ('true': theta given; min_clicks "
          f"{'library default' if args.min_clicks is None else args.min_clicks}); "
          f"{args.estimator.upper()} DCG of clicks vs the logged rankings, 95 %, n_bootstrap {args.bootstrap}; "
          f"truth: the logger's expectation exact for <= {EXACT_MAX_CANDIDATES} candidates, else over "
          f"{args.truth_draws} rankings per query; null = f0 + s f1 at the smallest s with true "
          f"difference <= 0, ideal = f0", flush=True)
    settings = [(d, c) for d in args.drifts for c in args.candidates]
    kwargs = dict(pages=args.pages, methods=tuple(methods), queries=args.queries, eta=eta,
                  estimator=args.estimator, n_bootstrap=args.bootstrap, truth_draws=args.truth_draws, grid=args.grid,
                  min_clicks=args.min_clicks)
    tasks = [(seed, dict(kwargs, drift=d, n_candidates=c)) for d, c in settings for seed in seeds]
    if args.jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(args.jobs, initializer=_limit_threads)
        results = pool.map(_run, tasks)
    else:
        pool, results = None, map(_run, tasks)
    by_setting = {}
    try:
        for (drift, cands) in settings:
            rows = [next(results) for _ in seeds]
            by_setting[drift, cands] = rows
            s = np.array([r["s"] for r in rows])
            print(f"\ndrift {drift:g}, {cands} candidates (10 shown): null scale s = {np.nanmean(s):.4f} mean "
                  f"[{np.nanmin(s) if np.isfinite(s).any() else np.nan:.4f}, "
                  f"{np.nanmax(s) if np.isfinite(s).any() else np.nan:.4f}]"
                  f"{'' if np.isfinite(s).all() else f', none found in {int(np.sum(~np.isfinite(s)))} logs'}; "
                  f"true null {np.mean([r['truth']['null'] for r in rows]):+.6f}, "
                  f"ideal {np.mean([r['truth']['ideal'] for r in rows]):+.6f} "
                  f"(truth MC s.e. {np.mean([r['se'] for r in rows]):.1e}; the null closest to 0: "
                  f"{max(r['truth']['null'] for r in rows):+.2e}); "
                  f"simulation + truth {np.mean([r['sim_cpu'] for r in rows]):.2f} CPU s/log", flush=True)
            _print_table([_summary(rows, m) for m in methods])
            failures = [f"seed {seed}, {m}: {r['methods'][m]['failure']}" for seed, r in zip(seeds, rows)
                        for m in methods if r["methods"][m]["failure"]]
            for f in failures[:3]:
                print(f"  failure: {f}")
            if len(failures) > 3:
                print(f"  ... {len(failures) - 3} more failures")
            for m in methods:
                doubts = Counter(d for r in rows for d in r["methods"][m]["doubts"])
                if doubts:
                    print(f"  {m} 'cannot tell' because (verdicts): "
                          + "; ".join(f"{d} ({n})" for d, n in doubts.most_common(3)))
    finally:
        if pool is not None:
            pool.shutdown()
    print("\nverdict counts: better/worse/no difference found/cannot tell; null->better over logs whose null's true "
          "difference is <= 0; warned: logs whose estimate warned, by class")
    print(f"\nMean propensity curve at positions 1..10 (true: {' '.join(f'{v:.3f}' for v in theta)})")
    for m in methods:
        for (drift, cands), rows in by_setting.items():
            curves = [r["methods"][m]["curve"] for r in rows if r["methods"][m]["curve"] is not None]
            if not curves:
                print(f"  {m:8s} drift {drift:g}, {cands:2d} cands: no estimate")
                continue
            mean = np.mean(curves, axis=0)
            err = np.sqrt(np.mean((np.array(curves) - theta) ** 2))
            choice = Counter(r["methods"][m]["choice"] for r in rows if r["methods"][m]["choice"])
            chose = f"; chose {dict(choice)}" if choice else ""
            print(f"  {m:8s} drift {drift:g}, {cands:2d} cands: {' '.join(f'{v:.3f}' for v in mean)}  "
                  f"(rms error {err:.3f}{chose})")


if __name__ == "__main__":
    main()
