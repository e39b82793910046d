"""Benchmark: propensity SVMs on long candidate lists and on sparse / correlated features.

Prints figures; not a test. For each feature kind (dense Gaussian, sparse in [0, 1],
correlated) and list length (candidates per query), a click log is simulated
(position-based clicks, eta = 1, on a random production ranking) with about the
same number of clicked documents at every length, and the estimators are fitted:

* SVM PropRank at relative duality gap ``--tol`` (one QP): time, Newton iterations,
  pairs path (explicit index arrays or implicit sorted-score sums), peak traced
  memory of the fit beyond the feature matrix (tracemalloc, separate run);
* SVM PropDCG with every CCP step: time, CCP steps, inner Newton iterations per step.

With ``--explicit`` the PropRank fit is repeated with the explicit pair path forced
(where the pairs fit in memory), to show where the implicit path starts to pay.

Targets (issue 18): 1,000 candidates and 20,000 clicked documents (20M pairs), d = 46:
PropRank to 1e-4 under 20 s and under 1 GB beyond X; 435 candidates and ~12K clicks:
PropDCG at C = 100 under 5 s; time grows at most like n log n in the list length.

python -m experiments.benchmarks.bench_long_lists [--quick] [--lengths 20 120 435 1000] [--kinds dense sparse correlated]
    [--clicked 20000] [--d 46] [--C 10] [--dcg-C 100] [--repeats 3] [--explicit] [--seed 0] [--exact-steps]

Run with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 on a shared machine and read the CPU
seconds. Figures measured with it (and what was tried on these problems): ``docs/solver-notes.md``.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings

import numpy as np

KINDS = {
    "dense": dict(density=1.0, correlation=0.0),
    "sparse": dict(density=0.3, correlation=0.0),
    "correlated": dict(density=1.0, correlation=0.7),
}


def make_log(n_docs, n_clicked, d, kind, random_state=0):
    """A click log over queries of ``n_docs`` candidates with about ``n_clicked`` clicked documents."""
    from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks

    model = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    # Clicked documents per query after 4 passes, from a pilot of 50 queries.
    pilot = make_ranking(n_queries=50, n_docs=n_docs, n_features=d, random_state=random_state, **KINDS[kind])
    rng = np.random.default_rng(random_state)
    per_query = max(1e-9, np.count_nonzero(simulate_clicks(pilot, rng.normal(size=pilot.n_docs), model, n_passes=4,
                                                           random_state=random_state).aggregate().weights) / 50)
    n_queries = max(1, int(round(n_clicked / per_query)))
    data = make_ranking(n_queries=n_queries, n_docs=n_docs, n_features=d, random_state=random_state + 1,
                        **KINDS[kind])
    production = np.random.default_rng(random_state + 2).normal(size=data.n_docs)
    return data, simulate_clicks(data, production, model, n_passes=4, random_state=random_state + 3)


def _best(fit, repeats):
    """Best wall time of ``repeats`` fits, and the CPU time of that fit (a busy machine inflates wall time)."""
    times = []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        est = fit()
        times.append((time.perf_counter() - t0, time.process_time() - c0))
    wall, cpu = min(times)
    return wall, cpu, est


def _peak_mib(fit):
    tracemalloc.start()
    fit()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def bench(n_docs, kind, args):
    import counterfactual_ltr.solvers.pairwise as solvers
    from counterfactual_ltr.estimators import SVMPropDCG, SVMPropRank

    t0 = time.perf_counter()
    data, log = make_log(n_docs, args.clicked, args.d, kind, random_state=args.seed)
    agg = log.aggregate()
    clicked = np.count_nonzero(agg.weights)
    lengths = data.query_lengths[data.query_index[agg.weights > 0]]
    pairs = int(np.sum(lengths - 1))
    nnz = np.count_nonzero(data.X) / data.X.size
    print(f"\n== {kind}, {n_docs} candidates/query: {data.n_queries} queries, {agg.n_clicks} clicks on "
          f"{clicked} documents, {pairs / 1e6:.2f}M pairs, d={args.d}, non-zeros {nnz:.0%}, "
          f"X {data.X.nbytes / 2**20:.0f} MiB (made in {time.perf_counter() - t0:.1f} s)", flush=True)
    path = "implicit" if pairs >= solvers._IMPLICIT_MIN_PAIRS_PER_ANCHOR * clicked else "explicit"
    rank = lambda: SVMPropRank(C=args.C, solver_tol=args.tol).fit(log)  # noqa: E731
    seconds, cpu, est = _best(rank, args.repeats)
    peak = _peak_mib(rank) if args.memory else float("nan")
    print(f"  PropRank C={args.C:g} tol={args.tol:g}: {seconds:6.2f} s (CPU {cpu:.2f} s)  iters={est.n_iter_[0]:3d}  path={path}  "
          f"peak {peak:.0f} MiB beyond X  gap={est.duality_gap_ / max(1, abs(est.objective_)):.1e}  "
          f"converged={est.converged_}", flush=True)
    row = dict(kind=kind, n_docs=n_docs, pairs=pairs, clicked=clicked, rank_s=cpu, rank_it=int(est.n_iter_[0]))
    if args.explicit and pairs <= 5e6:
        saved = solvers._IMPLICIT_MIN_PAIRS_PER_ANCHOR
        for name, value in (("explicit", np.inf), ("implicit", 0)):
            solvers._IMPLICIT_MIN_PAIRS_PER_ANCHOR = value
            try:
                t, cpu, e = _best(rank, args.repeats)
            finally:
                solvers._IMPLICIT_MIN_PAIRS_PER_ANCHOR = saved
            print(f"    forced {name:8s}: {t:6.2f} s (CPU {cpu:.2f} s)  iters={e.n_iter_[0]:3d}  P={e.objective_:.8g}")
            row[f"{name}_s"] = t
    if args.dcg_C:
        import counterfactual_ltr.estimators.svm as svm
        from counterfactual_ltr.metrics import ndcg

        # --exact-steps: also every CCP subproblem solved to its gap (no descent-only steps).
        for label, factor in [("", svm._CCP_DESCENT_FACTOR)] + [(" exact steps", 0.0)] * args.exact_steps:
            saved, svm._CCP_DESCENT_FACTOR = svm._CCP_DESCENT_FACTOR, factor
            try:
                seconds, cpu, est = _best(lambda: SVMPropDCG(C=args.dcg_C).fit(log), 1)
            finally:
                svm._CCP_DESCENT_FACTOR = saved
            quality = ndcg(data.X @ est.coef_, data.y, data.query_offsets, k=10)
            print(f"  PropDCG{label} C={args.dcg_C:g}: {seconds:6.2f} s (CPU {cpu:.2f} s)  CCP steps={est.n_ccp_iter_}  "
                  f"inner iterations={est.n_iter_.tolist()}  objective={est.objective_:.6f}  nDCG@10={quality:.4f}  "
                  f"solve s={np.round(est.solve_seconds_, 2).tolist()}", flush=True)
            row.setdefault("dcg_s", seconds)
            row.setdefault("dcg_steps", est.n_ccp_iter_)
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (CI)")
    p.add_argument("--lengths", type=int, nargs="*", default=[20, 120, 435, 1000])
    p.add_argument("--kinds", nargs="*", default=list(KINDS), choices=list(KINDS))
    p.add_argument("--clicked", type=int, default=20000, help="clicked documents (about)")
    p.add_argument("--d", type=int, default=46)
    p.add_argument("--C", type=float, default=10.0)
    p.add_argument("--dcg-C", type=float, default=100.0, help="0 skips SVM PropDCG")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--explicit", action="store_true", help="also time the forced explicit / implicit paths")
    p.add_argument("--no-memory", dest="memory", action="store_false")
    p.add_argument("--seed", type=int, default=0, help="random_state of the generated data and log")
    p.add_argument("--exact-steps", action="store_true",
                   help="also fit SVM PropDCG with every CCP subproblem solved to its gap (for comparison)")
    args = p.parse_args(argv)
    if args.quick:
        args.lengths, args.clicked, args.repeats = [20, 120], 500, 1
    warnings.simplefilter("always")
    rows = [bench(m, kind, args) for kind in args.kinds for m in args.lengths]
    print("\nTime against list length at fixed clicked documents (PropRank CPU seconds; t / (m log2 m) relative to the first):")
    for kind in args.kinds:
        mine = [r for r in rows if r["kind"] == kind]
        base = mine[0]["rank_s"] / (mine[0]["n_docs"] * np.log2(mine[0]["n_docs"]))
        cells = "  ".join(f"m={r['n_docs']}: {r['rank_s']:.2f} s ({r['rank_s'] / (r['n_docs'] * np.log2(r['n_docs'])) / base:.2f})"
                          for r in mine)
        print(f"  {kind:10s} {cells}")


if __name__ == "__main__":
    main()
