"""At what log size do "pbm" and "harvest" recover theta_r / theta_1 within 10 % on raw logs?

    python -m experiments.benchmarks.bench_raw_recovery [--sizes 10000,30000,...] [--seeds 3] [--drift 1.0] [--queries 1000]

Simulated raw logs (:func:`click_sim.raw.simulate_raw_events`: ``--queries`` queries, 1,000 by default, with
Zipf-like frequencies, 10 results per page, theta_r = 1/r, attractiveness ~ Beta(1, 3), rankings that drift
between sessions by Gumbel noise of scale ``--drift``; string query ids, uint64 document ids, no
logger column, rows shuffled) are loaded with ``ClickLog.from_events`` and both methods are run
without bootstrap. For every size and seed the script prints the largest relative error of
theta_r / theta_1 over positions 2-10, and at the end the smallest size at which every seed of a
method is within 10 % at every position (and stays so at every larger size tried).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def errors(n_sessions: int, seed: int, drift: float, n_queries: int = 1000) -> dict:
    """Largest relative error of each method's theta_r / theta_1 on one simulated raw log."""
    from click_sim.raw import simulate_raw_events
    from counterfactual_ltr import ClickLog, estimate_propensities

    frame, truth = simulate_raw_events(n_sessions, n_queries=n_queries, drift=drift, shuffle=True, random_state=seed)
    log = ClickLog.from_events(frame, session="session")
    out = {}
    for method in ("pbm", "harvest"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                est = estimate_propensities(log, method, n_bootstrap=0)
            except ValueError:
                out[method] = np.inf
                continue
        out[method] = float(np.max(np.abs(est.relative_ * np.arange(1, 11) - 1)))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="3000,10000,30000,100000,300000,1000000")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--drift", type=float, default=1.0)
    p.add_argument("--queries", type=int, default=1000, help="distinct queries (Zipf-like frequencies)")
    args = p.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    worst = {m: [] for m in ("pbm", "harvest")}
    print(f"{'sessions':>9} {'rows':>10}  max |rel. error| over seeds: pbm  harvest   (CPU s)")
    for n in sizes:
        start = time.process_time()
        runs = [errors(n, seed, args.drift, args.queries) for seed in range(args.seeds)]
        for m in worst:
            worst[m].append(max(r[m] for r in runs))
        print(f"{n:>9} {10 * n:>10}  {worst['pbm'][-1]:>33.3f} {worst['harvest'][-1]:>8.3f}   "
              f"({time.process_time() - start:.1f})")
    for m, values in worst.items():
        ok = np.array(values) <= 0.10
        first = next((sizes[i] for i in range(len(sizes)) if ok[i:].all()), None)
        print(f"{m}: within 10 % at every position 2-10 for all {args.seeds} seeds from "
              + (f"{first:,} sessions ({10 * first:,} rows)" if first else "no size tried"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
