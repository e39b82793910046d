"""Benchmark: ONNX Runtime scoring a 10,000-document batch with an exported 100-tree GBDTPropDCG, one thread.

Fits GBDTPropDCG (100 trees of at most 31 leaves) on MQ2008 Fold1 clicks (synthetic data with 46
features when MQ2008 is absent or with ``--quick``), exports it with the "onnx" tree writer and
times ``InferenceSession.run`` on 10,000 float32 documents with ``intra_op_num_threads=1``
(median of ``--repeats`` runs after one warm-up). Target (issue #54): under 50 ms. Also prints
the largest difference from ``model.predict`` on the batch.

python -m experiments.benchmarks.bench_export_trees [--quick] [--trees 100] [--docs 10000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv=None) -> dict:
    import onnxruntime
    from click_sim import make_ranking, simulate_clicks, train_production_ranker
    from counterfactual_ltr.estimators import GBDTPropDCG
    from counterfactual_ltr.export._trees import TREE_WRITERS

    from experiments._common import load_fold, mq2008_dir

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="synthetic data instead of MQ2008")
    p.add_argument("--trees", type=int, default=100)
    p.add_argument("--leaves", type=int, default=31)
    p.add_argument("--docs", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.quick or mq2008_dir() is None:
        train = make_ranking(n_queries=500, n_docs=(5, 40), n_features=46, random_state=args.seed)
        name = "synthetic (500 queries, 46 features)"
    else:
        train = load_fold(1)[0]
        name = "MQ2008 Fold1 train"
    log = simulate_clicks(train, train_production_ranker(train, random_state=args.seed), n_passes=5,
                          random_state=args.seed)
    model = GBDTPropDCG(n_estimators=args.trees, num_leaves=args.leaves, min_child_samples=5,
                        random_state=args.seed).fit(log)
    names = [f"f{j + 1}" for j in range(train.X.shape[1])]
    started = time.perf_counter()
    exported = TREE_WRITERS["onnx"](model, names)
    export_seconds = time.perf_counter() - started
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(exported, options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(args.seed)
    X = np.asarray(train.X, dtype=np.float64)[rng.integers(0, train.X.shape[0], args.docs)]
    X32 = X.astype(np.float32)
    feed = {"features": X32}
    scores = session.run(["score"], feed)[0][:, 0]        # warm-up
    times = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        session.run(["score"], feed)
        times.append(time.perf_counter() - t)
    leaves = sum(tree["num_leaves"] for tree in model.booster_.dump_model()["tree_info"])
    result = {"data": name, "trees": model.n_estimators_, "leaves": leaves, "docs": args.docs,
              "onnx_bytes": len(exported), "export_seconds": export_seconds,
              "median_ms": 1000 * float(np.median(times)), "min_ms": 1000 * float(np.min(times)),
              "max_abs_diff": float(np.abs(scores - model.predict(X)).max())}
    print(f"data: {name}; model: {result['trees']} trees, {leaves} leaves; ONNX {len(exported)} bytes, "
          f"written in {export_seconds:.2f} s")
    print(f"onnxruntime {onnxruntime.__version__}, 1 thread, {args.docs} documents: median "
          f"{result['median_ms']:.2f} ms, fastest {result['min_ms']:.2f} ms over {args.repeats} runs "
          f"(target < 50 ms: {'met' if result['median_ms'] < 50 else 'NOT met'})")
    print(f"largest |ONNX - model.predict| on the batch: {result['max_abs_diff']:.3g}")
    return result


if __name__ == "__main__":
    main()
