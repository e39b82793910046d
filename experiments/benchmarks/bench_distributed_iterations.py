"""Newton iterations of the distributed fit, with and without the finisher, against the in-memory fit.

    python -m experiments.benchmarks.bench_distributed_iterations

The data of ``tests/test_distributed.py`` (``make_ranking(n_queries=60)``, three partitions on a
``LocalCluster`` of 2 processes, a log of 3 passes); for ``tol`` in 1e-4, 1e-6, 1e-9:
``SVMPropRank(C=30, propensity=0.8, solver_tol=tol)`` on the clicks and ``RankSVM(C=1, tol=tol)``
on the graded labels. "without": the finisher switched off in the distributed fit only.
"""

from __future__ import annotations

import warnings

import numpy as np


def _data(client):
    import dask.dataframe as dd
    import pandas as pd

    from click_sim import make_ranking, simulate_clicks
    from counterfactual_ltr import RankingDataset, aggregate_clicks

    data = make_ranking(n_queries=60, random_state=0)
    frame = pd.DataFrame(data.X, columns=[f"f{k}" for k in range(data.n_features)])
    frame.insert(0, "query", [f"q{k}" for k in data.query_index])
    frame.insert(1, "doc", [f"d{k}" for k in range(data.n_docs)])
    frame["label"] = data.y
    ddata = RankingDataset.from_dask(dd.from_pandas(frame, npartitions=3), query="query", doc="doc",
                                     features=[f"f{k}" for k in range(data.n_features)], label="label", client=client)
    mem, mq, md = ddata.to_dataset()
    log = simulate_clicks(mem, mem.X[:, 0], n_passes=3, random_state=0)
    lf = log.to_frame()
    rows = lf["doc"].to_numpy()
    lf["qid"], lf["doc"] = mq[mem.qid[rows]], md[rows]
    return ddata, mem, log, aggregate_clicks(dd.from_pandas(lf, npartitions=2), ddata, engine="dask")


def main() -> None:
    from dask.distributed import Client, LocalCluster

    from counterfactual_ltr.estimators.distributed_fit import fit_linear
    from counterfactual_ltr.solvers.distributed_newton import Traffic
    from counterfactual_ltr.estimators import RankSVM, SVMPropRank
    from counterfactual_ltr.estimators.svm import click_pairs
    from counterfactual_ltr.solvers import finisher

    warnings.simplefilter("ignore")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=50) as cluster, Client(cluster) as client:
        ddata, mem, log, agg = _data(client)
        due = finisher.Finisher.due
        learners = [("SVMPropRank C=30", lambda tol: SVMPropRank(C=30.0, propensity=0.8, solver_tol=tol), agg, log),
                    ("RankSVM C=1", lambda tol: RankSVM(C=1.0, tol=tol), ddata, mem)]
        for name, make, dist_source, mem_source in learners:
            for tol in (1e-4, 1e-6, 1e-9):
                ref = make(tol).fit(mem_source)
                row = []
                for on in (True, False):
                    finisher.Finisher.due = due if on else (lambda self, *args: False)
                    traffic = Traffic()
                    try:
                        est = fit_linear(make(tol), dist_source, click_pairs, traffic=traffic)
                    finally:
                        finisher.Finisher.due = due
                    rel = abs(est.objective_ - ref.objective_) / abs(ref.objective_)
                    row.append(f"{int(np.sum(est.n_iter_)):3d} it, {traffic.round_trips:4d} round trips, rel diff {rel:.1e}")
                print(f"{name:17s} tol {tol:.0e}: memory {int(np.sum(ref.n_iter_)):3d} it | distributed with finisher "
                      f"{row[0]} | without {row[1]}")


if __name__ == "__main__":
    main()
