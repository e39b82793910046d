"""A real log's size as it comes: read raw rows with string ids from Parquet, build the log, fit "pbm" and "harvest".

    python -m experiments.benchmarks.bench_raw_logs [--rows 10e6] [--dir DIR] [--keep] [--bootstrap 0]

1. Writes ``--rows`` raw rows (``--rows / 10`` result pages of 10) simulated by
   :func:`click_sim.raw.simulate_raw_events` (``--queries`` queries, default 1,000, of 10 documents,
   Zipf-like frequencies, drifting rankings, theta_r = 1/r) to
   one Parquet file, every id a string: page ids ``s123``, query ids ``q17_ab``, document ids the
   decimal strings of 64-bit integers beyond 2**63. (Not timed.)
2. In a fresh child process, times each step in CPU and wall seconds: ``pandas.read_parquet``,
   ``ClickLog.from_events(frame, session="session")``, ``estimate_propensities(log, "pbm")`` and
   ``(log, "harvest")`` (``--bootstrap`` replicates, default 0: the point estimates), and prints
   the child's peak resident memory (``ru_maxrss``: the whole process, interpreter included) and
   the largest error of theta_r / theta_1 against the truth.

3. With ``--aggregate``, in another fresh process: a feature table of the log's distinct (query,
   document) pairs (one feature; not timed), then ``aggregate_clicks(path, data,
   session="session")`` streamed in batches of ``--batch`` rows (pages spread over temporary files
   by a hash of the page id) against the in-memory ``from_events(...).with_data(data).aggregate()``
   of step 2's log: time, the process's peak memory, and whether the two tables are equal.

Targets (issue 27): under 60 s and 4 GB for 10 M rows on the project's 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def write_log(path: str, rows: int, queries: int, seed: int = 0) -> None:
    """The simulated raw log with string ids, as one Parquet file."""
    from click_sim.raw import simulate_raw_events

    frame, _ = simulate_raw_events(rows // 10, n_queries=queries, random_state=seed)
    frame["doc"] = frame["doc"].astype(str)
    frame.to_parquet(path, index=False)


def measure(path: str, bootstrap: int) -> dict:
    """Time every step on the file (run in a fresh process)."""
    import warnings

    import pandas as pd

    from counterfactual_ltr import ClickLog, estimate_propensities

    times = {}

    def timed(name, fn):
        cpu, wall = time.process_time(), time.perf_counter()
        out = fn()
        times[name] = {"cpu_s": round(time.process_time() - cpu, 2), "wall_s": round(time.perf_counter() - wall, 2)}
        return out

    frame = timed("read_parquet", lambda: pd.read_parquet(path))
    log = timed("from_events", lambda: ClickLog.from_events(frame, session="session"))
    del frame
    errors = {}
    for method in ("pbm", "harvest"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = timed(method, lambda: estimate_propensities(log, method, n_bootstrap=bootstrap, random_state=0))
        errors[method] = round(float(np.max(np.abs(est.relative_ * np.arange(1, 11) - 1))), 4)
    total = {k: round(sum(t[k] for t in times.values()), 2) for k in ("cpu_s", "wall_s")}
    return {"rows": log.n_items, "pages": len(log), "queries": log.n_queries, "pairs": log.n_rows,
            "steps": times, "total": total, "max_rel_error": errors,
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}


def measure_aggregate(path: str, batch: int) -> dict:
    """The streamed raw aggregate of the file against nothing else in the process (run in a fresh one)."""
    import pandas as pd
    import pyarrow.parquet as pq

    from counterfactual_ltr import RankingDataset, aggregate_clicks

    pairs = pd.concat([b.to_pandas().drop_duplicates() for b in  # batch by batch: the log is never whole here
                       pq.ParquetFile(path).iter_batches(batch_size=1 << 20, columns=["query", "doc"])])
    pairs = pairs.drop_duplicates()
    data = RankingDataset.from_frame(pairs.assign(f=np.arange(len(pairs), dtype=np.float64)), query="query",
                                     doc="doc", features=["f"])
    del pairs
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    cpu, wall = time.process_time(), time.perf_counter()
    agg = aggregate_clicks(path, data, session="session", batch_size=batch)
    out = {"cpu_s": round(time.process_time() - cpu, 2), "wall_s": round(time.perf_counter() - wall, 2),
           "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
           "rss_before_gb": round(base, 2), "pages": agg.n_sessions, "table_rows": int(agg.table[0].size)}
    import hashlib

    out["table_sha256"] = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in agg.table)).hexdigest()
    if os.environ.get("BENCH_COMPARE_IN_MEMORY"):
        from counterfactual_ltr import ClickLog

        ref = ClickLog.from_events(pd.read_parquet(path), session="session").with_data(data).aggregate()
        out["equal_to_in_memory"] = bool(ref.equals(agg))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=float, default=10e6)
    p.add_argument("--dir", default=None, help="folder of the Parquet file (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the file")
    p.add_argument("--bootstrap", type=int, default=0)
    p.add_argument("--queries", type=int, default=1000, help="distinct queries (10 documents each)")
    p.add_argument("--aggregate", action="store_true", help="also time the streamed raw aggregate (step 3)")
    p.add_argument("--batch", type=int, default=1 << 20, help="rows per batch of the streamed aggregate")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-aggregate", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.bootstrap)))
        return 0
    if args.child_aggregate:
        print(json.dumps(measure_aggregate(args.child_aggregate, args.batch)))
        return 0
    folder = args.dir or tempfile.mkdtemp(prefix="raw_logs_")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"raw_{int(args.rows)}_{args.queries}.parquet")
    try:
        if not os.path.exists(path):
            start = time.perf_counter()
            write_log(path, int(args.rows), args.queries)
            print(f"wrote {path} ({os.path.getsize(path) / 2**20:.0f} MiB) in {time.perf_counter() - start:.0f} s")
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        out = subprocess.run([sys.executable, "-m", "experiments.benchmarks.bench_raw_logs", "--child", path,
                              "--bootstrap", str(args.bootstrap)], capture_output=True, text=True, env=env, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        if args.aggregate:
            out = subprocess.run([sys.executable, "-m", "experiments.benchmarks.bench_raw_logs", "--child-aggregate", path,
                                  "--batch", str(args.batch)], capture_output=True, text=True, env=env, check=True)
            result["aggregate"] = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{result['rows']:,} rows, {result['pages']:,} pages, {result['queries']:,} queries, "
          f"{result['pairs']:,} (query, document) pairs; bootstrap replicates: {args.bootstrap}")
    for name, t in result["steps"].items():
        print(f"  {name:<13} CPU {t['cpu_s']:>7.2f} s   wall {t['wall_s']:>7.2f} s")
    print(f"  {'total':<13} CPU {result['total']['cpu_s']:>7.2f} s   wall {result['total']['wall_s']:>7.2f} s"
          f"   (target < 60 s)")
    print(f"  peak resident memory of the process: {result['peak_rss_gb']:.2f} GB (target < 4 GB)")
    print(f"  largest |theta_r/theta_1 error| at positions 2-10: {result['max_rel_error']}")
    if "aggregate" in result:
        a = result["aggregate"]
        print(f"aggregate_clicks(path, features, session='session', batch_size={args.batch:,}): CPU {a['cpu_s']:.2f} s, "
              f"wall {a['wall_s']:.2f} s; {a['pages']:,} pages, {a['table_rows']:,} (row, position) counts")
        print(f"  peak resident memory {a['peak_rss_gb']:.2f} GB ({a['rss_before_gb']:.2f} GB with the feature table "
              f"loaded, before the aggregate)" + (f"; equal to the in-memory join: {a['equal_to_in_memory']}"
                                                  if "equal_to_in_memory" in a else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
