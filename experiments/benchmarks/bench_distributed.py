"""SVM PropRank on a feature table larger than any one Dask worker's memory, against the in-memory fit.

    python -m experiments.benchmarks.bench_distributed [--gb 4] [--features 100] [--workers 4] [--memory-limit 1.5GB]
                                            [--partitions 40] [--solver-tol 1e-6] [--no-memory-fit] [--quick]

1. A synthetic feature table of ``--gb`` GB (float64: 10 documents per query, ``--features``
   columns, ids as int64) is generated partition by partition on a ``LocalCluster`` of
   ``--workers`` processes (1 thread each) with ``--memory-limit`` each: larger than every
   worker's limit, smaller than their sum. Each partition holds whole queries
   (``RankingDataset.from_dask(..., shuffle=False)``), so nothing is shuffled. A click log (one
   session per query, position-based clicks with eta = 1 on the labels) is generated alongside
   and reduced per partition with ``aggregate_clicks(..., engine="dask")``.
2. ``SVMPropRank(C=1)`` is fitted on the distributed aggregate; printed: the time per Newton
   iteration, the bytes the driver sent and gathered per iteration (pickled sizes of every
   ``d``-vector and scalar; the table never moves), the bytes the workers sent each other
   (their ``transfer_outgoing_bytes_total``), the workers' peak memory against their limit.
3. After the cluster is closed, the same table and log are built in this process and fitted in
   memory (``--no-memory-fit`` skips it); printed: its time, its objective and the relative
   difference of the objectives.

``--quick``: a 40 MB table on 2 workers (CI-sized; the "larger than a worker" check is then not
met and says so).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

DOCS_PER_QUERY = 10


def _partition_frames(k, rows, d, seed=0):
    """Partition ``k``: its feature frame and its click log (whole queries; deterministic in ``k``)."""
    import pandas as pd

    rng = np.random.default_rng([seed, k])
    n_q = rows // DOCS_PER_QUERY
    X = rng.standard_normal((n_q * DOCS_PER_QUERY, d))
    hidden = np.random.default_rng(seed).standard_normal(d)
    signal = X @ hidden / np.sqrt(d) + 0.5 * rng.standard_normal(X.shape[0])
    y = np.digitize(signal, [0.5, 1.5]).astype(np.int64)
    qid = np.repeat(np.arange(n_q, dtype=np.int64) + k * n_q, DOCS_PER_QUERY)
    doc = np.arange(X.shape[0], dtype=np.int64) + k * rows
    table = pd.DataFrame(X, columns=[f"f{c}" for c in range(d)], copy=False)
    table.insert(0, "query", qid)
    table.insert(1, "doc", doc)
    table["label"] = y
    # the log: each query shown once in a random order, clicks at rate (y > 0) / rank
    order = np.argsort(rng.random((n_q, DOCS_PER_QUERY)), axis=1) + np.arange(n_q)[:, None] * DOCS_PER_QUERY
    shown = order.ravel()
    position = np.tile(np.arange(1, DOCS_PER_QUERY + 1), n_q)
    click = rng.random(shown.size) < (y[shown] > 0) / position
    log = pd.DataFrame({"session": qid[shown], "qid": qid[shown], "doc": doc[shown], "position": position,
                        "click": click})
    return table, log


def _table(k, rows, d):
    return _partition_frames(k, rows, d)[0]


def _log(k, rows, d):
    return _partition_frames(k, rows, d)[1]


def _frames(n_parts, rows, d):
    import dask
    import dask.dataframe as dd

    meta_t, meta_l = (f.iloc[:0] for f in _partition_frames(0, DOCS_PER_QUERY, d))
    table = dd.from_delayed([dask.delayed(_table)(k, rows, d) for k in range(n_parts)], meta=meta_t)
    log = dd.from_delayed([dask.delayed(_log)(k, rows, d) for k in range(n_parts)], meta=meta_l)
    return table, log


def _distributed(args, rows, features):
    import dask
    from dask.distributed import Client, LocalCluster

    from counterfactual_ltr import RankingDataset, aggregate_clicks
    from counterfactual_ltr.estimators.distributed_fit import fit_linear
    from counterfactual_ltr.solvers.distributed_newton import Traffic
    from counterfactual_ltr.estimators import SVMPropRank
    from counterfactual_ltr.estimators.svm import click_pairs

    # No spilling to disk (the table must fit in the workers' memory, not on their disks) and no
    # pausing (a paused worker that cannot spill never frees memory: the run stalls, as measured with
    # pause at 0.9 of 0.8 GB); a worker above 98 % of its limit is restarted. Long comm timeouts: a dozen
    # workers on two loaded cores answer slowly (the client's link timed out at the default 30 s).
    with dask.config.set({"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False,
                          "distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": 0.98,
                          "distributed.comm.timeouts.connect": "300s", "distributed.comm.timeouts.tcp": "600s"}):
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               memory_limit=args.memory_limit, dashboard_address=None, silence_logs=40)
        client = Client(cluster)
        limit = min(w.memory_limit for w in cluster.scheduler.workers.values())
        table, log = _frames(args.partitions, rows, features)
        t0 = time.perf_counter()
        data = RankingDataset.from_dask(table, query="query", doc="doc", features=[f"f{c}" for c in range(features)],
                                        label="label", shuffle=False, client=client)
        agg = aggregate_clicks(log, data, engine="dask")
        setup = time.perf_counter() - t0
        table_bytes = data.n_docs * features * 8
        print(f"table: {data.n_docs:,} rows x {features} features = {table_bytes / 2**30:.2f} GiB float64 in "
              f"{data.n_partitions} partitions; {args.workers} workers x {limit / 2**30:.2f} GiB limit "
              f"(table / one worker's limit = {table_bytes / limit:.1f}, / all = {table_bytes / (limit * args.workers):.2f})")
        print(f"built on the workers (features, pairs' source, log reduced) in {setup:.1f} s; "
              f"{agg.n_sessions:,} sessions, {agg.n_clicks:,} clicks")
        sent_before = sum(client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total).values())
        cpu_before = sum(client.run(time.process_time).values())
        traffic = Traffic()
        t0 = time.perf_counter()
        model = fit_linear(SVMPropRank(C=1.0, solver_tol=args.solver_tol), agg, click_pairs, traffic=traffic)
        seconds = time.perf_counter() - t0
        cpu = sum(client.run(time.process_time).values()) - cpu_before
        peer = sum(client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total).values()) - sent_before
        peak = max(client.run(_rss).values())
        n_iter = int(np.sum(model.n_iter_))
        print(f"distributed fit: {seconds:.1f} s wall ({cpu:.1f} s CPU on the workers), {n_iter} Newton iterations, "
              f"{seconds / max(n_iter, 1):.2f} s per iteration, {traffic.round_trips} round trips; "
              f"objective {model.objective_:.10g}, gap {model.duality_gap_:.3g}, converged {model.converged_}")
        per_iter = traffic.total() / max(n_iter, 1)
        d_bytes = 8 * features * data.n_partitions
        print(f"traffic per Newton iteration: {per_iter / 1e3:.1f} kB driver<->workers "
              f"(= {per_iter / d_bytes:.1f} x d x partitions x 8 bytes), {peer / max(n_iter, 1) / 1e3:.1f} kB "
              f"between workers; table {table_bytes / 1e9:.2f} GB never sent")
        print(f"largest worker resident memory after the fit: {peak / 2**30:.2f} GiB (limit {limit / 2**30:.2f} GiB)")
        client.close()
        cluster.close()
    return model, seconds, table_bytes, limit


def _rss():
    import psutil

    return psutil.Process().memory_info().rss


def _in_memory(args, rows, features, dist_model):
    import pandas as pd

    from counterfactual_ltr import ClickLog, RankingDataset
    from counterfactual_ltr.estimators import SVMPropRank

    frames = [_partition_frames(k, rows, features) for k in range(args.partitions)]
    table = pd.concat([f[0] for f in frames], ignore_index=True)
    log = pd.concat([f[1] for f in frames], ignore_index=True)
    del frames
    data = RankingDataset(table[[f"f{c}" for c in range(features)]].to_numpy(), table["label"].to_numpy(),
                          table["query"].to_numpy())
    log["doc"] = log["doc"].to_numpy() - 0          # document ids are the rows in this table
    del table
    clicks = ClickLog.from_frame(log, data)
    t0, c0 = time.perf_counter(), time.process_time()
    model = SVMPropRank(C=1.0, solver_tol=args.solver_tol).fit(clicks)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    rel = abs(dist_model.objective_ - model.objective_) / abs(model.objective_)
    print(f"in-memory fit (one process): {seconds:.1f} s wall ({cpu:.1f} s CPU), {int(np.sum(model.n_iter_))} "
          f"iterations, objective {model.objective_:.10g}; distributed - in-memory: {rel:.2e} relative")
    return seconds


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=4.0)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--memory-limit", default="1.5GB")
    parser.add_argument("--partitions", type=int, default=40)
    parser.add_argument("--solver-tol", type=float, default=1e-6)
    parser.add_argument("--no-memory-fit", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.gb, args.workers, args.partitions, args.memory_limit = 0.04, 2, 4, "1GB"
    rows = int(args.gb * 1e9 / (8 * args.features) / args.partitions) // DOCS_PER_QUERY * DOCS_PER_QUERY
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    model, seconds, table_bytes, limit = _distributed(args, rows, args.features)
    if table_bytes <= limit:
        print(f"NOTE: the table ({table_bytes / 2**30:.2f} GiB) fits in one worker's limit: not the large-table check")
    if not args.no_memory_fit:
        memory_seconds = _in_memory(args, rows, args.features, model)
        print(f"distributed / in-memory wall time: {seconds / memory_seconds:.2f}")


if __name__ == "__main__":
    main()
