"""Paired comparisons on MQ2008: do compare_rankers' intervals and lower bounds hold over independent logs?

    python -m experiments paired_comparison            # 30 logs (the issue's check) and 200 more
    python -m experiments paired_comparison --quick    # 8 logs

Two production rankers (Ranking SVMs on 1 % and 10 % of MQ2008 Fold1's training
queries, the usual production ranker of Agarwal et al. 2019) are the baseline
(it also logs the clicks) and the candidate. The population is every MQ2008
query (S1-S5, 784); a log draws ``--queries`` of them at random with
replacement (each draw a query of its own) and shows each ``--sessions`` times
in the baseline's order, full lists, clicks from the position-based model
(eta = 1, eps- = 0.1, eps+ = 1). The truth is the population's value: the
metric over click-relevance for a ranker baseline, the metric of clicks for
``baseline="logging"``. Per log and estimator (SNIPS, IPS) it records whether
the paired Student-t and BCa intervals cover the true difference, whether the
one-sided lower bound on the improvement lies below the true improvement, and
the width of the paired interval against the unpaired one (the two rankers'
standard errors combined as if independent).

The intervals are over queries, so they are calibrated when queries are
independent draws, as here; ``--fixed-queries`` also re-logs the same 784
queries in every log (the truth is then the value over those queries), where
they are conservative.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from experiments._common import data_missing, figure_path, parser, pyplot, save_results

ESTIMATORS = ("snips", "ips")
BASELINES = ("ranker", "logging")


def population_data():
    """MQ2008 S1-S5 (the population of queries) and Fold1's training fold (where the rankers are trained)."""
    from experiments._common import load_fold
    from experiments.benchmarks.bench_topk import mq2008_all

    data = mq2008_all()
    if data is None:
        raise data_missing("MQ2008 (S1.txt-S5.txt)")
    return data, load_fold(1)[0]


def sampled_log(data, logger_scores, click_model, n_queries: int, sessions: int, rng):
    """A log of ``n_queries`` queries drawn with replacement (each draw a query of its own), ``sessions`` each.

    Returns the log and the rows of ``data`` its data set's rows come from.
    """
    from click_sim import RankingDataset, simulate_clicks

    drawn = rng.integers(0, data.n_queries, size=n_queries)
    rows = data.rows_of(drawn)
    qid = np.repeat(np.arange(n_queries), data.query_lengths[drawn])
    sub = RankingDataset(data.X[rows], data.y[rows], qid)
    return simulate_clicks(sub, logger_scores[rows], click_model, n_passes=sessions, random_state=rng), rows


def truths(data, candidate, logger, click_model) -> dict:
    """Population values (every query once) of the difference candidate - baseline, per estimator's target."""
    from click_sim import simulate_clicks
    from counterfactual_ltr.evaluation import true_click_values, true_values

    relevance = np.where(data.relevance() == 1, click_model.eps_plus, click_model.eps_minus)
    once = simulate_clicks(data, logger, click_model, n_passes=1, random_state=0)
    eta = click_model.eta
    rel_c, rel_b = true_values(once, candidate, relevance), true_values(once, logger, relevance)
    clk_c = true_click_values(once, candidate, relevance, propensity=eta)
    clk_b = true_click_values(once, "logging", relevance, propensity=eta)
    return {("ranker", e): rel_c[e] - rel_b[e] for e in ESTIMATORS} | \
           {("logging", e): clk_c[e] - clk_b[e] for e in ESTIMATORS}


def one_log(log, candidate, logger, click_model, truth, *, n_bootstrap, seed) -> dict:
    """Coverage, lower bound and widths of every (baseline, estimator) comparison on one log."""
    from counterfactual_ltr.evaluation import compare_rankers

    out = {}
    for base in BASELINES:
        for est in ESTIMATORS:
            c = compare_rankers(log, candidate, "logging" if base == "logging" else logger, estimator=est,
                                propensity=click_model.eta, n_bootstrap=n_bootstrap, random_state=seed)
            t = truth[(base, est)]
            out[f"{base}/{est}"] = {
                "difference": c.difference, "truth": t, "ci": [c.ci_low, c.ci_high], "boot": [c.boot_low, c.boot_high],
                "lower_bound": c.lower_bound, "stderr": c.stderr, "unpaired_stderr": c.unpaired_stderr,
                "covered_t": bool(c.ci_low <= t <= c.ci_high), "covered_bca": bool(c.boot_low <= t <= c.boot_high),
                "bound_holds": bool(c.lower_bound <= t), "clears_zero": c.clears_zero,
                "width_ratio": c.stderr / c.unpaired_stderr}
    return out


def monte_carlo(data, candidate, logger, click_model, *, n_logs, n_queries, sessions, n_bootstrap=1000, seed=0,
                fixed_queries=False) -> list:
    """Per-log records of :func:`one_log` over ``n_logs`` independent logs (seeds ``seed``, ``seed + 1``, ...)."""
    from click_sim import simulate_clicks

    truth = truths(data, candidate, logger, click_model)
    records = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # per-log diagnostics of small logs; the figures below are the point
        for k in range(n_logs):
            rng = np.random.default_rng(seed + k)
            if fixed_queries:
                log = simulate_clicks(data, logger, click_model, n_passes=sessions, random_state=rng)
                # Every query of the population, ``sessions`` times: the truth is the same.
                records.append(one_log(log, candidate, logger, click_model, truth, n_bootstrap=n_bootstrap,
                                       seed=seed + k))
            else:
                log, rows = sampled_log(data, logger, click_model, n_queries, sessions, rng)
                records.append(one_log(log, candidate[rows], logger[rows], click_model, truth,
                                       n_bootstrap=n_bootstrap, seed=seed + k))
    return records


def summarise(records) -> dict:
    """Coverage rates, lower-bound rate and the median paired/unpaired width ratio per comparison."""
    out = {}
    for key in records[0]:
        rows = [r[key] for r in records]
        n = len(rows)
        out[key] = {"n_logs": n,
                    "coverage_t": sum(r["covered_t"] for r in rows) / n,
                    "coverage_bca": sum(r["covered_bca"] for r in rows) / n,
                    "lower_bound_holds": sum(r["bound_holds"] for r in rows) / n,
                    "lower_bound_clears_zero": sum(r["clears_zero"] for r in rows) / n,
                    "width_ratio_median": float(np.median([r["width_ratio"] for r in rows])),
                    "width_ratio_max": float(np.max([r["width_ratio"] for r in rows])),
                    "mean_difference": float(np.mean([r["difference"] for r in rows])),
                    "truth": rows[0]["truth"]}
    return out


def _print(title, summary):
    print(title)
    print(f"  {'comparison':<16}{'coverage t':>12}{'coverage BCa':>14}{'bound holds':>13}"
          f"{'bound > 0':>11}{'paired/unpaired':>17}{'mean diff':>11}{'truth':>10}")
    for key, s in summary.items():
        print(f"  {key:<16}{s['coverage_t']:>12.1%}{s['coverage_bca']:>14.1%}{s['lower_bound_holds']:>13.1%}"
              f"{s['lower_bound_clears_zero']:>11.1%}"
              f"{s['width_ratio_median']:>17.2f}{s['mean_difference']:>11.4f}{s['truth']:>10.4f}")


def _plot(records, path, key="ranker/snips"):
    plt = pyplot()
    rows = [r[key] for r in records]
    fig, ax = plt.subplots(figsize=(9, 3.4))
    x = np.arange(len(rows))
    diff = np.array([r["difference"] for r in rows])
    ax.errorbar(x, diff, yerr=[diff - [r["ci"][0] for r in rows], [r["ci"][1] for r in rows] - diff], fmt="o",
                capsize=3, label="paired interval")
    half = np.array([1.96 * r["unpaired_stderr"] for r in rows])
    ax.errorbar(x + 0.3, diff, yerr=half, fmt="none", ecolor="0.7", capsize=2, label="unpaired interval")
    ax.plot(x, [r["lower_bound"] for r in rows], "^", color="C2", label="lower bound")
    ax.axhline(rows[0]["truth"], color="k", lw=1, label="true difference")
    ax.axhline(0, color="0.5", lw=0.5, ls=":")
    ax.set_xlabel("log")
    ax.set_ylabel(f"difference ({key})")
    ax.legend(fontsize=7, ncol=4, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    from click_sim import PositionBasedClickModel, train_production_ranker

    p = parser(__doc__.splitlines()[0])
    p.add_argument("--logs", type=int, default=None, help="logs of the second, larger run (default 200; quick 0)")
    p.add_argument("--queries", type=int, default=400, help="queries drawn per log")
    p.add_argument("--sessions", type=int, default=10, help="sessions per drawn query")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of the queries")
    p.add_argument("--fixed-queries", action="store_true", help="also re-log the same queries in every log")
    args = p.parse_args(argv)
    started = time.time()
    first = 8 if args.quick else 30
    more = (0 if args.quick else 200) if args.logs is None else args.logs
    data, train = population_data()
    logger = train_production_ranker(train, fraction=0.01, random_state=0).predict(data.X)
    candidate = train_production_ranker(train, fraction=0.10, random_state=1).predict(data.X)
    clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    options = dict(n_queries=args.queries, sessions=args.sessions, n_bootstrap=args.bootstrap)
    print(f"population: {data.n_queries} MQ2008 queries; a log draws {args.queries} x {args.sessions} sessions; "
          f"baseline (logger): Ranking SVM on 1% of Fold1 train, candidate: on 10%")
    records = monte_carlo(data, candidate, logger, clicks, n_logs=first, seed=0, **options)
    results = {"first_logs": summarise(records), "per_log": records}
    _print(f"{first} independent logs (seeds 0-{first - 1}):", results["first_logs"])
    if more:
        extra = monte_carlo(data, candidate, logger, clicks, n_logs=more, seed=1000, **options)
        results["more_logs"] = summarise(extra)
        _print(f"{more} more logs (seeds 1000-{1000 + more - 1}):", results["more_logs"])
    if args.fixed_queries:
        fixed = monte_carlo(data, candidate, logger, clicks, n_logs=first, seed=0, fixed_queries=True,
                            **options)
        results["fixed_queries"] = summarise(fixed)
        _print(f"{first} logs re-showing the same {data.n_queries} queries ({args.sessions} sessions each):",
               results["fixed_queries"])
    s = results["first_logs"]["ranker/snips"]
    results["must_hold"] = {"coverage_90_99": 0.90 <= s["coverage_t"] <= 0.99,
                            "paired_30pct_narrower": s["width_ratio_max"] <= 0.70,
                            "lower_bound_95": s["lower_bound_holds"] >= 0.95}
    print("must hold (SNIPS, ranker baseline, first logs):",
          ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in results["must_hold"].items()))
    settings = {"quick": args.quick, "logs": first, "more_logs": more, **options, "eta": 1.0, "eps_minus": 0.1,
                "eps_plus": 1.0, "population_queries": int(data.n_queries), "confidence": 0.95}
    path = save_results("paired_comparison", results, settings, args.out, started)
    if not args.no_plot:
        _plot(records, figure_path("paired_comparison", args.out))
    print(f"wrote {path}")
