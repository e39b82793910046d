"""Peak memory of a propensity estimate's bootstrap on a raw log with many queries.

    python -m experiments.benchmarks.bench_bootstrap_memory LOG.parquet [--method harvest] [--bootstrap 200]

LOG is a raw log with ``query``, ``doc``, ``position``, ``click`` and ``session`` columns (e.g. the
file ``python -m experiments.benchmarks.bench_raw_logs --rows 10e6 --queries 1000000 --dir DIR --keep``
writes). Loads it with ``ClickLog.from_events``, then runs ``estimate_propensities`` and prints
the CPU time, the process's peak resident memory before and after the estimate, and the interval's
lower ends. The bootstrap's query weights are drawn in blocks, so the estimate's peak should not
grow with ``--bootstrap``: run it at two values to see.
"""

from __future__ import annotations

import argparse
import resource
import time
import warnings


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("log")
    p.add_argument("--method", default="harvest")
    p.add_argument("--bootstrap", type=int, default=200)
    args = p.parse_args(argv)
    import pandas as pd

    from counterfactual_ltr import ClickLog, estimate_propensities

    log = ClickLog.from_events(pd.read_parquet(args.log), session="session")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    cpu = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimate_propensities(log, args.method, n_bootstrap=args.bootstrap, random_state=0)
    print(f"{args.method}, {args.bootstrap} bootstrap replicates, {log.n_queries:,} queries, {log.n_items:,} rows: "
          f"CPU {time.process_time() - cpu:.1f} s; peak resident memory {before:.2f} GB after loading, "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB after the estimate")
    if est.lower_ is not None:
        print("lower ends of the intervals:", est.lower_.round(3).tolist())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
