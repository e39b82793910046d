"""Off-policy estimators on MQ2008: seconds on a 1-million-session log, and spread over simulated logs.

    python -m experiments.benchmarks.bench_evaluation [--sessions 1000000] [--repeats 3] [--synthetic]
    python -m experiments.benchmarks.bench_evaluation --variance [--logs 200] [--log-sessions 2000]

Timing mode: simulates a 1M-session log of all of MQ2008 (S1-S5) with a
Plackett-Luce logger (temperature 1 over a production ranker's scores, top 10
shown; eta=1, eps-=0.1, eps+=1) and a full-list deterministic one, and prints
the best of ``--repeats`` wall-clock times of each estimator (200 bootstrap
resamples included) for a second ranker. DR's relevance-model fit (a
cross-fitted ridge regression) and the logging policy's position
probabilities (Monte Carlo over 2000 rankings per query, computed once per
policy and cached) are timed separately.

Variance mode: ``--logs`` independent logs of ``--log-sessions`` sessions from
the same Plackett-Luce logger; prints each estimator's mean, bias against the
full-information value, standard deviation over the logs and DR's standard
deviation relative to IPS's, policy-aware IPS's and SNIPS's (SNIPS targets
the per-relevant-document value, so its ratio is also given for the relative
spread std/mean).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def _setting(synthetic: bool):
    from click_sim import PositionBasedClickModel, train_production_ranker

    from experiments.benchmarks.bench_topk import bench_data

    data = bench_data(synthetic)
    production = train_production_ranker(data, fraction=0.01, random_state=0)
    target = train_production_ranker(data, fraction=0.05, random_state=1)
    clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    return data, production.predict(data.X), target.predict(data.X), clicks


def _truth(data, target, clicks):
    from counterfactual_ltr._segments import rank_within_queries
    from counterfactual_ltr.evaluation import metric_weight

    c = np.where(data.relevance() == 1, clicks.eps_plus, clicks.eps_minus)
    omega = metric_weight("dcg")(rank_within_queries(target, data.query_offsets))
    return float(np.bincount(data.query_index, omega * c, minlength=data.n_queries).mean()), c


def _best_time(fn, repeats):
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def timing(args):
    from click_sim import StochasticRanker, simulate_clicks
    from counterfactual_ltr.evaluation import ESTIMATORS, fit_relevance

    data, production, target, clicks = _setting(args.synthetic)
    n_passes = int(np.ceil(args.sessions / data.n_queries))
    print(f"data: {getattr(data, 'name', None) or 'synthetic'}: {data.n_queries} queries, {data.n_docs} rows; "
          f"{n_passes} passes = {n_passes * data.n_queries:,} sessions; best of {args.repeats} "
          f"(machine shared with other jobs)")
    truth, _ = _truth(data, target, clicks)
    logs = {}
    start = time.perf_counter()
    logs["Plackett-Luce logger, top 10"] = simulate_clicks(data, StochasticRanker(production, 1.0), clicks,
                                                           n_passes=n_passes, random_state=0, max_shown=10)
    logs["deterministic logger, full lists"] = simulate_clicks(data, production, clicks, n_passes=n_passes,
                                                               random_state=1)
    print(f"simulation of both logs: {time.perf_counter() - start:.1f} s; full-information DCG value {truth:.4f}")
    for name, log in logs.items():
        print(f"\n{name}: {log.n_sessions:,} sessions, {log.n_items:,} shown, {log.n_clicks:,} clicks")
        start = time.perf_counter()
        probs = log.logging_policy.position_probabilities(data)
        kind = "exact" if probs.n_samples is None else f"Monte Carlo, {probs.n_samples} rankings per query"
        print(f"  logging policy's position probabilities ({kind}; once per policy): "
              f"{time.perf_counter() - start:.2f} s")
        seconds, fit = _best_time(lambda: fit_relevance(log, random_state=0), 1)
        print(f"  DR relevance model fit (ridge, 2-fold cross-fitted; once per log): {seconds:.2f} s")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for kind, estimate in ESTIMATORS.items():
                kwargs = {"relevance_model": fit} if kind == "dr" else {}
                seconds, est = _best_time(lambda: estimate(log, target, metric="dcg", random_state=0, **kwargs),
                                          args.repeats)
                verdict = "ok" if seconds < 5 else "OVER 5 s"
                print(f"  {kind:13s} {seconds:6.2f} s  ({verdict})  value {est.value:.4f} "
                      f"[{est.ci_low:.4f}, {est.ci_high:.4f}], unshown mass {est.unshown_mass:.3f}")


def variance(args):
    from click_sim import StochasticRanker, simulate_clicks
    from counterfactual_ltr.evaluation import (dr_estimate, fit_relevance, ips_estimate, policy_aware_estimate,
                                               snips_estimate)
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.linear_model import Ridge

    data, production, target, clicks = _setting(args.synthetic)
    truth, c = _truth(data, target, clicks)
    per_log = int(np.ceil(args.log_sessions / data.n_queries))
    log = simulate_clicks(data, StochasticRanker(production, 1.0), clicks, n_passes=per_log * args.logs,
                          random_state=0, max_shown=10)
    size = per_log * data.n_queries
    models = {"DR (ridge)": Ridge(alpha=1.0)}
    if args.gbm:
        models["DR (gradient boosting)"] = HistGradientBoostingRegressor(max_iter=50, random_state=0)
    values = {k: [] for k in ["IPS", "policy-aware", "SNIPS", *models]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(args.logs):
            sub = log[i * size:(i + 1) * size]
            values["IPS"].append(ips_estimate(sub, target, n_bootstrap=0).value)
            values["policy-aware"].append(policy_aware_estimate(sub, target, n_bootstrap=0).value)
            values["SNIPS"].append(snips_estimate(sub, target, n_bootstrap=0).value)
            for name, model in models.items():
                fit = fit_relevance(sub, model, random_state=i)
                values[name].append(dr_estimate(sub, target, relevance_model=fit, n_bootstrap=0).value)
    print(f"data: {getattr(data, 'name', None) or 'synthetic'}; {args.logs} logs of {size} sessions, Plackett-Luce "
          f"logger (temperature 1), top 10 shown; full-information DCG value {truth:.4f} "
          f"(SNIPS targets the per-relevant-document value)")
    print(f"{'estimator':24s} {'mean':>8s} {'bias/se':>8s} {'std':>8s}")
    for name, v in values.items():
        v = np.asarray(v)
        se = v.std(ddof=1) / np.sqrt(len(v))
        bias = "" if name == "SNIPS" else f"{(v.mean() - truth) / se:8.2f}"
        print(f"{name:24s} {v.mean():8.4f} {bias:>8s} {v.std(ddof=1):8.4f}")
    std = {k: np.std(v, ddof=1) for k, v in values.items()}
    rel = {k: np.std(v, ddof=1) / np.mean(v) for k, v in values.items()}
    for name in models:
        print(f"{name}: std ratio vs IPS {std[name] / std['IPS']:.3f}, vs policy-aware "
              f"{std[name] / std['policy-aware']:.3f}, vs SNIPS {std[name] / std['SNIPS']:.3f} "
              f"(relative std ratio vs SNIPS {rel[name] / rel['SNIPS']:.3f})")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--synthetic", action="store_true", help="synthetic lists instead of MQ2008")
    p.add_argument("--variance", action="store_true", help="spread over simulated logs instead of timings")
    p.add_argument("--logs", type=int, default=200)
    p.add_argument("--log-sessions", type=int, default=2000)
    p.add_argument("--gbm", action="store_true", help="also DR with a gradient-boosting relevance model")
    args = p.parse_args(argv)
    variance(args) if args.variance else timing(args)


if __name__ == "__main__":
    main()
