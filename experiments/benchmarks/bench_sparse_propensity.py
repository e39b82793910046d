"""How well do the propensity estimates recover examination on small raw logs whose rankings barely drift?

    python -m experiments.benchmarks.bench_sparse_propensity [--methods smooth,harvest,pbm] [--eta 1.2]
        [--pages 2000] [--queries 300] [--drifts 0.1,0.3,1] [--candidates 10,20] [--seeds 6]

Simulated raw logs (:func:`click_sim.raw.simulate_raw_events`: ``--queries`` queries with popularity
1/(k + 10), ``--pages`` pages of 10 results, attractiveness Beta(1, 3), examination ``(1/r)^eta``, the
logger's ranking drifting between pages by ``drift`` times Gumbel noise; ``candidates`` documents
per query of which 10 are shown) are loaded with ``ClickLog.from_events`` and every method
estimates theta_r / theta_1 with 200 bootstrap replicates (seed = the log's). Per setting and
method it prints the root-mean-square error of log theta over positions 1-10 and the mean error per
position, the share of (log, position 2-10) pairs whose 95 % interval covers the truth, how many logs
the method refused (``ValueError``) and the CPU seconds per estimate. Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def one_setting(method, *, eta, pages, queries, drift, candidates, seeds):
    """``(rmse, mean log error per position, coverage, refused, cpu per estimate)`` over ``seeds`` logs."""
    from click_sim.raw import simulate_raw_events
    from counterfactual_ltr import ClickLog, estimate_propensities

    theta = np.asarray(eta, dtype=np.float64) if np.ndim(eta) else np.arange(1, 11) ** -eta
    errors, covered, refused, cpu = [], [], 0, 0.0
    for seed in range(seeds):
        frame, _ = simulate_raw_events(pages, n_queries=queries, theta=theta, drift=drift, n_candidates=candidates,
                                       random_state=seed)
        log = ClickLog.from_events(frame, session="session")
        start = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                est = estimate_propensities(log, method, n_bootstrap=200, random_state=seed)
            except ValueError:
                refused += 1
                continue
            finally:
                cpu += time.process_time() - start
        errors.append(np.log(est.relative_ / theta))
        covered.append((est.lower_[1:] <= theta[1:]) & (theta[1:] <= est.upper_[1:]))
    if not errors:
        return np.nan, np.full(10, np.nan), np.nan, refused, cpu / seeds
    errors = np.array(errors)
    return (float(np.sqrt(np.mean(errors ** 2))), errors.mean(0), float(np.mean(covered)), refused, cpu / seeds)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--methods", default="smooth,harvest,pbm")
    p.add_argument("--eta", type=float, default=1.2)
    p.add_argument("--theta", default=None, help="examination at positions 1-10, comma-separated; overrides --eta")
    p.add_argument("--pages", type=int, default=2000)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--drifts", default="0.1,0.3,1")
    p.add_argument("--candidates", default="10,20", help="documents per query (10 shown)")
    p.add_argument("--seeds", type=int, default=6)
    args = p.parse_args(argv)
    eta = args.eta if args.theta is None else tuple(float(v) for v in args.theta.split(","))
    shape = f"(1/r)^{args.eta:g}" if args.theta is None else f"{list(eta)}"
    print(f"{args.queries} queries, {args.pages} pages, examination {shape}, seeds 0-{args.seeds - 1}, "
          "200 replicates; rmse of log theta over positions 1-10, coverage of positions 2-10 by the 95 % interval")
    print("drift | cands | method | rmse | coverage | refused | cpu s | mean log error by position")
    for drift in (float(v) for v in args.drifts.split(",")):
        for candidates in (int(v) for v in args.candidates.split(",")):
            for method in args.methods.split(","):
                rmse, bias, coverage, refused, cpu = one_setting(method, eta=eta, pages=args.pages,
                                                                 queries=args.queries, drift=drift,
                                                                 candidates=candidates, seeds=args.seeds)
                print(f"{drift:g} | {candidates} | {method} | {rmse:.3f} | {coverage:.1%} | {refused} | {cpu:.2f} | "
                      f"{np.round(bias, 2).tolist()}", flush=True)


if __name__ == "__main__":
    main()
