"""Large click logs: streamed (pyarrow) and Dask aggregation of a partitioned Parquet log, and the fit on it.

    python -m experiments.benchmarks.bench_aggregate [--rows 100e6] [--dir DIR] [--keep] [--quick]

(``--dir DIR --keep`` keeps the log; a later run with the same ``--dir`` re-measures the reads on it.)

1. Writes a synthetic partitioned log of at least ``--rows`` shown-document rows with
   :func:`click_sim.simulate_clicks_partitioned` (MQ2008 Fold1 train ranked by a least-squares
   ranker, eta = 1, eps- = 0.1, eps+ = 1; synthetic ``make_ranking`` data when MQ2008 is absent),
   100 passes per file (10 with --quick), in parallel processes.
2. Aggregates it with ``aggregate_clicks(engine="pyarrow")`` in a fresh child process, whose peak
   resident memory (``ru_maxrss``, the whole process: interpreter, NumPy, pyarrow, the data set)
   is printed with the throughput in rows per second.
3. Aggregates it with ``engine="dask"`` on a 2-worker ``LocalCluster`` (processes).
4. Checks both aggregates are identical and fits SVM PropDCG (C = 10) on the aggregate.

``--quick``: 2 million rows, for CI.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def _data():
    from experiments._common import load_fold, mq2008_dir

    if mq2008_dir() is not None:
        return load_fold(1)[0], "MQ2008 Fold1 train"
    from click_sim import make_ranking

    return make_ranking(n_queries=800, n_docs=(5, 30), random_state=0), "make_ranking(800 queries)"


def _child(directory: str) -> None:
    """Run in a fresh process: aggregate with pyarrow, print JSON with time and peak RSS."""
    from counterfactual_ltr import aggregate_clicks

    data, _ = _data()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    agg = aggregate_clicks(directory, data)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    np.save(os.path.join(directory, "..", "pyarrow_table.npy"), np.stack(agg.table))
    print(json.dumps({"seconds": seconds, "peak_rss_mb": peak / 1024, "rss_before_mb": before / 1024,
                      "rows": agg.n_impressions, "sessions": agg.n_sessions, "clicks": agg.n_clicks}))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=100e6)
    parser.add_argument("--dir", default=None, help="where to write the log (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the written log")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child)
        return {}
    from click_sim import simulate_clicks_partitioned
    from counterfactual_ltr import aggregate_clicks
    from counterfactual_ltr.estimators import SVMPropDCG
    from experiments.benchmarks.bench_data import least_squares_ranker

    rows_target = 2e6 if args.quick else args.rows
    data, label = _data()
    per_pass = int(data.query_lengths.sum())
    n_passes = int(np.ceil(rows_target / per_pass))
    root = args.dir or tempfile.mkdtemp(prefix="cltr_bench_aggregate_")
    directory = os.path.join(root, "log")
    print(f"{label}: {data.n_docs} rows x {n_passes} passes = {n_passes * per_pass / 1e6:.1f}M shown rows",
          flush=True)
    start = time.perf_counter()
    existing = sorted(glob.glob(os.path.join(directory, "*.parquet")))
    if existing:  # --dir of an earlier --keep run: measure the reads again without re-simulating
        files = existing
    else:
        files = simulate_clicks_partitioned(data, least_squares_ranker(data), n_passes=n_passes, random_state=0,
                                            path=directory, passes_per_partition=10 if args.quick else 100,
                                            engine="processes", n_workers=2)
    t_sim = time.perf_counter() - start
    size = sum(os.path.getsize(f) for f in files)
    print(f"  simulated and written in {t_sim:.1f} s: {len(files)} files, {size / 2**20:.0f} MiB", flush=True)

    child = subprocess.run([sys.executable, "-m", "experiments.benchmarks.bench_aggregate", "--child", directory],
                           capture_output=True, text=True, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    streamed = json.loads(child.stdout.strip().splitlines()[-1])
    rows = streamed["rows"]
    print(f"  pyarrow streamed: {streamed['seconds']:.1f} s, {rows / streamed['seconds'] / 1e6:.1f}M rows/s, "
          f"peak RSS of the process {streamed['peak_rss_mb']:.0f} MB "
          f"({streamed['rss_before_mb']:.0f} MB before reading)", flush=True)

    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster):
        start = time.perf_counter()
        agg = aggregate_clicks(directory, data, engine="dask")
        t_dask = time.perf_counter() - start
    print(f"  dask (2-worker LocalCluster): {t_dask:.1f} s, {rows / t_dask / 1e6:.1f}M rows/s", flush=True)
    same = np.array_equal(np.load(os.path.join(root, "pyarrow_table.npy")), np.stack(agg.table))
    print(f"  pyarrow and dask aggregates identical: {same}; {agg.n_sessions} sessions, {agg.n_clicks} clicks, "
          f"table of {agg.table[0].size} (doc, position) entries", flush=True)
    start = time.perf_counter()
    model = SVMPropDCG(C=10.0).fit(agg)
    t_fit = time.perf_counter() - start
    print(f"  SVM PropDCG (C=10) on the aggregate: {t_fit:.2f} s, {model.n_ccp_iter_} CCP iterations", flush=True)
    if not args.keep and args.dir is None:
        shutil.rmtree(root)
    return {"data": label, "rows": rows, "files": len(files), "bytes": size, "simulate_seconds": t_sim,
            "pyarrow": streamed, "dask_seconds": t_dask, "identical": bool(same), "fit_seconds": t_fit}


if __name__ == "__main__":
    main()
