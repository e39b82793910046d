"""Timing of propensity estimation from about one million sessions (target: under 10 s per method).

    python -m experiments.benchmarks.bench_propensity [--sessions 1000000] [--repeats 3] [--quick]

On MQ2008 Fold1 train (471 queries, full result lists, ~20 documents per session), three
production rankers (RankSVM on different 1% subsets) serve the sessions and 25% of them have
position 1 swapped with a position in 2..10. Timed: ``estimate_propensities`` with each method at
``max_position=10`` and the default ``n_bootstrap=200``. ``"em"`` is timed twice: on the
three-ranker log's sessions without intervention, and on a log of the same size from one
Plackett-Luce ranker (the first production ranker at temperature 0.3). The simulations are not
timed. Best of ``--repeats`` runs; use ``OMP_NUM_THREADS=1`` on a shared machine. ``--quick``:
50,000 sessions, one run.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def main(argv=None):
    from click_sim import (PositionBasedClickModel, StochasticRanker, SwapIntervention, simulate_clicks,
                           train_production_ranker)
    from counterfactual_ltr.propensity import estimate_propensities

    from experiments._common import load_fold

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--sessions", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    sessions, repeats = (50_000, 1) if args.quick else (args.sessions, args.repeats)
    train, _, _ = load_fold(1)
    rankers = [train_production_ranker(train, 0.01, random_state=s) for s in range(3)]
    passes = max(1, round(sessions / train.n_queries))
    started = time.perf_counter()
    log = simulate_clicks(train, rankers, PositionBasedClickModel(1.0, 0.1, 1.0), passes, 0,
                          intervention=SwapIntervention(0.25, max_position=10))
    print(f"simulated {log.n_sessions} sessions, {log.n_items} shown documents, {log.n_clicks} clicks "
          f"in {time.perf_counter() - started:.1f} s (not part of the timings)", flush=True)
    truth = 1.0 / np.arange(1, 11)
    one_ranker = simulate_clicks(train, StochasticRanker(rankers[0], 0.3), PositionBasedClickModel(1.0, 0.1, 1.0),
                                 passes, 1)
    cases = [("swap", log, 200), ("harvest", log, 200), ("trust_em", log, 200), ("em", log, 200),
             ("em", one_ranker, 200)]
    for method, data, n_bootstrap in cases:
        best = cpu = float("inf")
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = estimate_propensities(data, method, n_bootstrap=n_bootstrap, random_state=0)
            best = min(best, time.perf_counter() - t0)
            cpu = min(cpu, time.process_time() - c0)
        err = float(np.max(np.abs(est.relative_ / truth - 1)))
        what = "one PL ranker" if data is one_ranker else "3 rankers"
        print(f"{method:8s} {what:13s} sessions={data.n_sessions:8d} n_bootstrap={n_bootstrap:3d}  {best:6.2f} s "
              f"({cpu:6.2f} s CPU)  "
              f"(max rel error at positions 1-10: {err:.3f})", flush=True)


if __name__ == "__main__":
    main()
