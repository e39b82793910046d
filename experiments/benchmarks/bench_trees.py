"""Benchmark: fit time of GBDTPropDCG against LightGBM's own lambdarank, same rows, trees and leaves.

Both fit the same rows -- the documents of the training queries with a click, from the log's
aggregate -- with the same number of trees, leaves, learning rate and rows per leaf, one thread,
``deterministic=True``: GBDTPropDCG on the propensity-weighted DCG bound (its custom objective
evaluated in NumPy every round), LightGBM's built-in lambdarank on the clicks as labels (the
clicked documents relevant, its objective in C++). CPU seconds (``time.process_time``) of the
whole ``fit`` / ``lightgbm.train`` call (data set construction included), in alternating paired
repeats; printed: the median of each and of the per-pair ratio, with its range. Target (issue
30, issue 42 for the list lengths): ratio at most 1.5. Also the objective's cost per round alone
(GBDTPropDCG's gradient and curvature over every pair; both objectives of the estimator).

Data (``--data``): MQ2008 Fold1's training queries (``CLTR_DATA``; skipped when absent), the
interaction data set of ``experiments.papers.trees``, and lists of exactly 10, 50 and 200 documents
per query (``make_ranking``, 46 features, 40,000 rows each: 4,000, 800 and 200 queries; a fifth of
that with ``--quick``), each with a 100-pass log from a production RankSVM on 1% of the queries
(eta = 1, eps- = 0.1, clicks on label >= 1: more clicked documents, hence more pairs, than the
experiment's label-2 clicks).

The softplus (the default) evaluates every pair; ``smoothing="huber"`` (band 0.5) comes from sorted
scores without pairs.

python -m experiments.benchmarks.bench_trees [--quick] [--repeats 5] [--trees 200] [--leaves 7 31 127]
                                  [--smoothing softplus huber] [--data mq2008 interactions 10 50 200]
"""

from __future__ import annotations

import itertools
import time
import warnings

import numpy as np


LIST_LENGTHS = (10, 50, 200)
# Queries per list length: 40,000 rows each (8,000 with --quick).
ROWS, QUICK_ROWS = 40_000, 8_000
DATA = ("mq2008", "interactions", *map(str, LIST_LENGTHS))


def data_sets(quick: bool, which=DATA):
    """``(name, training data)`` of the benchmark, those of ``which`` (MQ2008 only when ``CLTR_DATA`` holds it)."""
    from click_sim import make_ranking

    from experiments._common import load_fold, mq2008_dir
    from experiments.papers.trees import QUICK_SYNTHETIC, SYNTHETIC

    out = []
    if "mq2008" in which and mq2008_dir() is not None and not quick:
        out.append(("MQ2008 Fold1", load_fold(1)[0]))
    if "interactions" in which:
        out.append(("interactions (experiments.papers.trees)",
                    make_ranking(**(QUICK_SYNTHETIC if quick else SYNTHETIC), random_state=0)))
    for length in LIST_LENGTHS:
        if str(length) in which:
            n_queries = (QUICK_ROWS if quick else ROWS) // length
            out.append((f"{length}-document lists", make_ranking(n_queries=n_queries, n_docs=length, n_features=46,
                                                                 random_state=0)))
    return out


def aggregate_of(train, passes: int, seed: int = 0):
    from click_sim import PositionBasedClickModel, simulate_clicks, train_production_ranker

    production = train_production_ranker(train, fraction=0.01, random_state=seed)
    log = simulate_clicks(train, production, PositionBasedClickModel(1.0, 0.1, 1.0), n_passes=passes,
                          random_state=seed, relevance_threshold=1)
    return log.aggregate(1.0)


def time_pair(agg, rows, leaves: int, trees: int, smoothing: str = "softplus"):
    """CPU seconds of one GBDTPropDCG fit and one LightGBM lambdarank fit with the same settings."""
    import lightgbm

    from counterfactual_ltr.estimators import GBDTPropDCG

    common = {"learning_rate": 0.1, "num_leaves": leaves, "min_child_samples": 20, "smoothing": smoothing,
              "temperature": 1.0 if smoothing == "softplus" else 0.5}
    t0 = time.process_time()
    GBDTPropDCG(n_estimators=trees, random_state=0, **common).fit(agg)
    ours = time.process_time() - t0
    params = {"objective": "lambdarank", "learning_rate": 0.1, "num_leaves": leaves, "min_data_in_leaf": 20,
              "num_threads": 1, "deterministic": True, "force_row_wise": True, "verbose": -1, "seed": 0}
    t0 = time.process_time()
    lightgbm.train(params, lightgbm.Dataset(rows.X, (rows.W > 0).astype(float), group=np.diff(rows.pairs.offsets)),
                   num_boost_round=trees)
    theirs = time.process_time() - t0
    return ours, theirs


def objective_ms(rows, repeats: int = 20) -> dict:
    """Milliseconds of CPU per evaluation of each objective's gradient and curvature (random scores)."""
    from counterfactual_ltr.metrics import get_lambda
    from counterfactual_ltr.surrogates import SortedAnchorPairs

    s = np.random.default_rng(0).normal(size=rows.n_rows)
    lam = get_lambda("dcg")
    sorted_pairs = SortedAnchorPairs(rows.W, rows.pairs.offsets)
    out = {}
    for name, call in (("propdcg", lambda: rows.pairs.bound(s, lam, 1.0, 1.0, True)),
                       ("propdcg_huber", lambda: sorted_pairs.bound(s, lam, 1.0, 0.5, True)),
                       ("ips_lambdarank", lambda: rows.pairs.lambdarank(s, lam, 1.0, True))):
        call()
        t0 = time.process_time()
        for _ in range(repeats):
            call()
        out[name] = 1e3 * (time.process_time() - t0) / repeats
    return out


def main(argv=None):
    from counterfactual_ltr.estimators.gbdt import _TrainingRows

    from experiments._common import parser, save_results

    p = parser(__doc__)
    p.add_argument("--repeats", type=int, default=None, help="paired repeats (default 5; --quick 1)")
    p.add_argument("--trees", type=int, default=None, help="trees of every fit (default 200; --quick 20)")
    p.add_argument("--leaves", type=int, nargs="+", default=[7, 31, 127])
    p.add_argument("--smoothing", nargs="+", default=["softplus", "huber"], choices=["softplus", "huber"])
    p.add_argument("--passes", type=int, default=100)
    p.add_argument("--data", nargs="+", default=list(DATA), choices=DATA)
    args = p.parse_args(argv)
    started = time.time()
    repeats = args.repeats or (1 if args.quick else 5)
    trees = args.trees or (20 if args.quick else 200)
    results = []
    for name, train in data_sets(args.quick, args.data):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            agg = aggregate_of(train, args.passes)
        rows = _TrainingRows(agg, "softplus")
        cost = objective_ms(rows)
        print(f"{name}: {rows.n_rows} rows of {rows.n_queries} queries with clicks, {rows.pairs.n_pairs} pairs "
              f"({rows.pairs.n_pairs / rows.n_rows:.1f} per row); objective per round: " +
              ", ".join(f"{k} {v:.2f} ms" for k, v in cost.items()), flush=True)
        for leaves, smoothing in itertools.product(args.leaves, args.smoothing):
            pairs = [time_pair(agg, rows, leaves, trees, smoothing) for _ in range(repeats)]
            ours, theirs = np.array(pairs).T
            ratio = ours / theirs
            row = {"data": name, "rows": rows.n_rows, "pairs": rows.pairs.n_pairs, "leaves": leaves, "trees": trees,
                   "smoothing": smoothing, "ours_cpu_s": float(np.median(ours)),
                   "lightgbm_cpu_s": float(np.median(theirs)), "ratio_median": float(np.median(ratio)),
                   "ratio_min": float(ratio.min()), "ratio_max": float(ratio.max()), "objective_ms_per_round": cost,
                   "repeats": repeats, "target_met": bool(np.median(ratio) <= 1.5)}
            results.append(row)
            print(f"  {leaves:4d} leaves, {trees} trees, {smoothing:8s}: GBDTPropDCG {row['ours_cpu_s']:.2f} s, "
                  f"LightGBM lambdarank {row['lightgbm_cpu_s']:.2f} s, ratio {row['ratio_median']:.2f} (range "
                  f"{row['ratio_min']:.2f}-{row['ratio_max']:.2f}) "
                  f"{'<= 1.5' if row['target_met'] else '> 1.5: target missed'}", flush=True)
    settings = {"repeats": repeats, "trees": trees, "leaves": args.leaves, "passes": args.passes,
                "smoothing": args.smoothing, "huber band": 0.5, "data": args.data,
                "timer": "time.process_time, whole fit / lightgbm.train call, one thread",
                "target": "ratio <= 1.5", "quick": args.quick}
    path = save_results("bench_trees", {"rows": results}, settings, args.out, started)
    print(f"wrote {path}")
    return results


if __name__ == "__main__":
    main()
