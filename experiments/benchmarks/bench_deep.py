"""Benchmark: Deep PropDCG (200 sigmoid units, batches of 1000 documents) on MQ2008 Fold1 clicks.

Prints the seconds per training epoch and the peak memory of ``fit`` for logs of 10 and 100
passes over the training queries. Target (issue #7): one epoch over the aggregated 100-pass
log under 2 s; memory independent of the number of passes (the log is aggregated into one
IPS weight per document before training).

python -m experiments.benchmarks.bench_deep [--quick] [--epochs N] [--passes 10 100]

``--quick`` uses synthetic data (500 queries, 46 features) instead of MQ2008.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np


def production_ranker(train, seed: int):
    """RankSVM on 1% of the training queries; a least-squares ranker if the SVM solver is unavailable."""
    from click_sim import train_production_ranker

    try:
        return train_production_ranker(train, fraction=0.01, random_state=seed), "RankSVM on 1% of the queries"
    except ImportError:  # counterfactual_ltr.solvers not there yet
        rng = np.random.default_rng(seed)
        queries = rng.choice(train.n_queries, size=max(1, round(0.01 * train.n_queries)), replace=False)
        sub = train.subset(np.sort(queries))
        w = np.linalg.lstsq(sub.X, sub.y.astype(float), rcond=None)[0]
        return (lambda X: X @ w), "least squares on 1% of the queries (solver missing)"


def main(argv=None):
    from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
    from counterfactual_ltr.estimators import DeepPropDCG

    from experiments._common import load_fold, mq2008_dir, save_results

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--passes", type=int, nargs="+", default=[10, 100])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args(argv)
    started = time.time()
    if args.quick or mq2008_dir() is None:
        train = make_ranking(n_queries=500, n_docs=(5, 40), n_features=46, random_state=args.seed)
        name = "synthetic (500 queries, 46 features)"
    else:
        train = load_fold(1)[0]
        name = "MQ2008 Fold1 train"
    ranker, ranker_name = production_ranker(train, args.seed)
    click_model = PositionBasedClickModel(1.0, 0.1, 1.0)
    print(f"data: {name}: {train}; production ranker: {ranker_name}")
    settings = dict(hidden_layer_sizes=(200,), activation="sigmoid", batch_size=1000, alpha=1e-6,
                    learning_rate=1e-3, max_epochs=args.epochs)
    rows = []
    for passes in args.passes:
        log = simulate_clicks(train, ranker, click_model, n_passes=passes, random_state=args.seed)
        t0 = time.perf_counter()
        log.aggregate()
        agg_seconds = time.perf_counter() - t0
        model = DeepPropDCG(random_state=args.seed, **settings)
        t0 = time.perf_counter()
        model.fit(log)
        seconds = time.perf_counter() - t0
        tracemalloc.start()
        log.aggregate()
        _, agg_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        DeepPropDCG(random_state=args.seed, **settings).fit(log)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        epoch = np.asarray(model.epoch_seconds_)
        row = {"passes": passes, "sessions": log.n_sessions, "clicks": log.n_clicks, "log_mb": log.nbytes / 2**20,
               "train_queries": model.n_train_queries_, "fit_seconds": seconds, "aggregate_seconds": agg_seconds,
               "epoch_seconds_median": float(np.median(epoch)), "epoch_seconds_max": float(epoch.max()),
               "epoch_seconds": epoch, "batches_per_epoch": model.t_ / model.n_iter_,
               "aggregate_peak_mb": agg_peak / 2**20, "fit_peak_mb": peak / 2**20}
        rows.append(row)
        print(f"passes={passes:4d} sessions={log.n_sessions:6d} clicks={log.n_clicks:6d} (log {row['log_mb']:.1f} MB) "
              f"| epoch {row['epoch_seconds_median']:.3f} s median, {row['epoch_seconds_max']:.3f} s max "
              f"({row['batches_per_epoch']:.0f} batches, {model.n_train_queries_} queries with clicks); "
              f"fit {seconds:.2f} s for {model.n_iter_} epochs incl. aggregation ({agg_seconds:.3f} s) "
              f"| peak memory: fit {row['fit_peak_mb']:.1f} MB, of which aggregating the log "
              f"{row['aggregate_peak_mb']:.1f} MB", flush=True)
    verdict = all(r["epoch_seconds_max"] < 2.0 for r in rows)
    print(f"target: < 2 s per epoch -> {'met' if verdict else 'NOT met'}")
    if not args.no_save:
        path = save_results("bench_deep" + ("_quick" if args.quick else ""), {"rows": rows},
                            {"data": name, "production_ranker": ranker_name, "estimator": settings,
                             "seed": args.seed, "click_model": repr(click_model),
                             "timing": "epoch_seconds_ of the fitted model (training pass of each epoch); peak "
                                       "memory by tracemalloc in a second, identical fit (and of log.aggregate alone)"}, started=started)
        print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
