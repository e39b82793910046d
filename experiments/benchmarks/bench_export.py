"""ONNX Runtime's time to score a 10,000-document batch with an exported linear ranker, on one thread.

    python -m experiments.benchmarks.bench_export [--docs 10000] [--repeat 50]

Fits SVM PropDCG (C = 10, a StandardScaler folded into the export) on clicks simulated on MQ2008
Fold1 train (synthetic ``make_ranking`` data with 46 features when MQ2008 is absent), exports it
with ``counterfactual_ltr.export.export_model(model, "onnx")``, and times
``InferenceSession.run`` on ``--docs`` raw feature rows drawn from the data (one intra-op thread,
one inter-op thread, after a warm-up run). Prints one line: the median and the fastest of
``--repeat`` runs, and whether the median meets issue 54's target (under 50 ms).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

TARGET_MS = 50.0


def _data():
    from click_sim import make_ranking

    try:
        from click_sim import data_path, load_letor

        return load_letor(data_path("MQ2008/Fold1/train.txt")), "MQ2008 Fold1 train"
    except (OSError, ValueError):
        return make_ranking(n_queries=300, n_features=46, random_state=0), "synthetic data"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=50)
    args = p.parse_args(argv)
    import onnxruntime as ort
    from sklearn.preprocessing import StandardScaler

    from click_sim import simulate_clicks
    from counterfactual_ltr import SVMPropDCG
    from counterfactual_ltr.export import export_model

    data, source = _data()
    log = simulate_clicks(data, data.X[:, 0], n_passes=2, random_state=0)
    model = SVMPropDCG(C=10.0, preprocessor=StandardScaler()).fit(log)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(export_model(model, "onnx"), options, providers=["CPUExecutionProvider"])
    rows = np.random.default_rng(0).integers(0, data.n_docs, args.docs)
    batch = np.ascontiguousarray(data.X[rows], dtype=np.float32)
    session.run(["score"], {"features": batch})
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        session.run(["score"], {"features": batch})
        times.append((time.perf_counter() - start) * 1e3)
    median = float(np.median(times))
    print(f"ONNX Runtime {ort.__version__}, 1 thread, linear SVMPropDCG on {data.n_features} features ({source}): "
          f"{args.docs} documents in {median:.2f} ms (median of {args.repeat}; fastest {min(times):.2f} ms); "
          f"target < {TARGET_MS:.0f} ms: {'met' if median < TARGET_MS else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
