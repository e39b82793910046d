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

python -m experiments.bench_long_lists [--quick] [--lengths 20 120 435 1000] [--kinds dense sparse correlated]
    [--clicked 20000] [--d 46] [--C 10] [--dcg-C 100] [--repeats 3] [--explicit] [--seed 0] [--exact-steps]

Run with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 on a shared machine.

Measured (2 cores shared with other jobs, load average 8-32, so CPU seconds are
the figures to read; ``--lengths 20 120 435 1000 --kinds dense --dcg-C 0
--repeats 1 --no-memory``, about 20,000 clicked documents each): PropRank CPU
0.81, 3.87, 7.96 and 17.73 s for 0.37M, 2.36M, 8.30M and 19.85M pairs, 10-11
Newton iterations each: time grows like the number of rows, well below
``m log m`` (t / (m log2 m) falls 1.00, 0.50, 0.22, 0.19). At 1,000 candidates
the peak traced memory of the fit is 364 MiB beyond X.

Issue 18, CCP of SVM PropDCG (2 cores shared, load average 5-6; CPU seconds; sparse d = 300,
15 candidates, about 36K pairs: ``--lengths 15 --kinds sparse --d 300 --clicked 2800
--C C --dcg-C C --repeats 1 --no-memory``):

* C = 10: PropRank 0.57 s (16 iterations); PropDCG 2.62 s, 16 CCP steps, inner
  iterations 3, 1, 4, 9, 22, 18, ..., 22 (flat after step 5).
* C = 100: PropRank 0.45 s (21 iterations); PropDCG 5.66 s, 15 CCP steps, inner
  iterations 9 -> 54 (before the path-following step: 9.81 s, 11 -> 146).
* 435 candidates, 11,417 clicked documents (4.95M pairs), d = 46, C = 100 (``--lengths 435
  --kinds dense --clicked 12000 --C 10 --dcg-C 100 --repeats 1 --no-memory``): PropRank
  (C = 10) 4.72 s, 9 iterations; PropDCG 24.8 s, 8 CCP steps, inner iterations 8, 7, 6,
  6, 12, 13, 12, 15; without the path-following step on long lists (same load) 35.1 s,
  9, 7, 7, 9, 15, 16, 17, 20. Target (under 5 s) not reached: about 0.3 s per Newton
  iteration at 570K rows, and the first, cold step alone costs ~4.7 s.
* Same command after the cheaper iteration (strong Wolfe line search with secant steps,
  band Hessian from enumerated pairs when the band is narrow, sampled Hessian on the cold
  start's first level, hinge sums of the last CCP objective reused; load average 1.9-2.2):
  PropRank (C = 10) 2.44 s CPU, 12 iterations; PropDCG 13.5 s CPU (13.7 s wall), 8 CCP
  steps, inner iterations 9, 8, 7, 7, 12, 13, 16, 16, solves 1.6, 1.0, 0.9, 1.1, 1.6, 1.9,
  2.3, 2.2 s. Target (under 5 s) still not reached. Per Newton step ~0.14 s CPU: ~2.6
  evaluations of the pair sums (sort with the last order as hint ~13 ms, aggregate ~17 ms,
  binary searches ~5 ms) and ``X u``, ``X^T g`` (~30 ms each, memory-bound at 200 MiB).
  The growth 9 -> 16 is the CCP's tighter asked gap (1e-4 -> 1.4e-5): one more smoothing
  level (mu = 3e-3) whose Newton steps after the path-following step are cut to t ~ 1e-2
  by the line search for about 6 steps. Tried without gain on those subproblems:
  Levenberg-Marquardt damping of the identity, a Hessian band widened to 3 or 10 mu after a
  short step, warm starts at mu = 0.01 or 0.003, shrinking mu by 0.3. Asking the later
  subproblems for 0.1 (not 0.01) of the CCP's last relative change takes 11.5 s CPU with
  inner iterations 9, 8, 7, 7, 8, 8, 9, 6 and a final objective 1.3e-5 (relative) higher; not
  made the default (it changes every PropDCG fit, MQ2008 included).
* Paired with main (after the s18b merge), same command, load average 3.0-3.6, CPU seconds:
  PropDCG C = 100 at 435 candidates 14.1 s (main 23.7 s), PropRank C = 10 2.51 s (main 4.50 s);
  ``--lengths 1000 --kinds dense --dcg-C 0 --repeats 1``: PropRank 8.93 s, 14 iterations
  (main 16.76 s, 9 iterations), peak traced memory 744 MiB beyond X on both (the 364 MiB
  above is an older figure; main measures 744 MiB today as well).
* After sampled band Hessians, syrk Gram sums and ``X^T g`` over changed rows (idle machine,
  one BLAS thread; CPU seconds vary by +-20 % between identical runs here): PropDCG C = 100
  at 435 candidates 12.3 s, same inner iterations 9, 8, 7, 7, 12, 13, 16, 16 (the cost per
  Newton step fell, not their number); sparse d = 300: PropDCG 0.27 s (C = 0.1, coef 0),
  0.03 s (C = 1), 1.76 s (C = 10), 3.57 s (C = 100, inner iterations 9 -> 54 as before),
  PropRank 0.24-0.42 s; ``--lengths 20 120 435 1000 --kinds dense --dcg-C 0 --repeats 1``:
  PropRank 0.54, 2.24, 4.71, 9.03 s, peak 108, 289, 577, 744 MiB beyond X; t / (m log2 m)
  1.00, 0.43, 0.20, 0.14. Targets still missed: sparse PropDCG at C = 100 (3 s) and 435
  candidates at C = 100 (5 s).
* After the finisher (exact interior-point solve over the pairs near the kink; see
  ``counterfactual_ltr.solvers``), same machine and settings: sparse d = 300, PropDCG 0.47 s
  (C = 0.1, coef 0), 0.04 s (C = 1), 1.51 s (C = 10, inner iterations 2, 1, 1, 2, 4, 8, 5,
  4, 2, ..., 3), 2.13 s (C = 100, 13 CCP steps, inner iterations 6, 10, 17, 14, 13, 11, 11,
  8, 9, 7, 8, 8, 5: no longer growing); PropRank 0.09-0.42 s. 435 candidates (implicit
  pairs) unchanged: 54-60K pairs lie within 0.03 of the kink at d = 46, too many for it.
* After the CCP's subproblem gap was put in the subproblem's own units (it followed the
  relative change of the CCP objective, about 5x the subproblem's objective at 435
  candidates, so late subproblems were asked 5x tighter gaps than meant), equal-length
  lists sorted without padding and the band Hessian's method chosen without an ``O(n)``
  pass; same machine and settings: 435 candidates, PropDCG C = 100 9.25 s (inner
  iterations 9, 8, 7, 7, 8, 8, 9, 14; 8 CCP steps as before), PropRank C = 10 2.12 s.
  Target (5 s) still missed. Sparse d = 300: PropDCG 0.45 s (C = 0.1, coef 0), 0.03 s
  (C = 1), 1.57 s (C = 10), 1.69 s (C = 100, inner iterations 6, 10, 17, 14, 13, 11, 11,
  8, 8, 7, 7, 6, 6); PropRank 0.08-0.34 s. ``--lengths 20 120 435 1000 --kinds dense
  --dcg-C 0 --repeats 1``: PropRank 0.44, 1.13, 4.16, 7.68 s, peak 108, 289, 578, 744 MiB
  beyond X; t / (m log2 m) 1.00, 0.27, 0.21, 0.15.
* After the CCP's later subproblems on long lists stop at descent (``min_decrease``: a
  tenth of the CCP's last decrease; 2-3 Newton steps instead of 7-14), per-query sorts by
  packed integer keys, one sort for the CCP objective and the training SNIPS, and the log
  counted from one sort of packed keys (idle machine, one BLAS thread, CPU seconds; identical
  runs vary by +-10-20 % here): 435 candidates, PropDCG C = 100 4.58, 4.71, 4.90, 5.13 and
  5.43 s in five runs of the same code (median 4.90 s; 9 CCP steps, inner iterations 9, 2,
  2, 2, 2, 2, 3, 2, 3; before: 9.25 s, 8 steps, 9, 8, 7, 7, 8, 8, 9, 14), final objective
  -901.968 against -902.148 with exact steps. Other logs of the same generator (seed,
  candidates, C; descent against exact steps, one run each, measured with a scratch loop over
  ``make_log``; ``--seed S --exact-steps`` now prints the same comparison): seed 1 5.45 s / 8.87 s, seed 2
  4.43 / 12.02 s, C = 10 4.35 / 13.03 s, 120 candidates 1.73 / 3.96 s, 1,000 candidates
  (5,000 clicks) 6.81 / 25.33 s; final objectives -1.3e-3 to +3.4e-3 relative from the
  exact-step CCP's (+1.2e-2 at 1,000 candidates, where both stop in a long tail: the exact
  CCP at ``tol = 1e-7`` goes on to 1.1 % below its own 1e-3 result at 435 candidates), and
  nDCG@10 of the fitted rankers on the generator's labels within +-0.013 (0.7838 / 0.7853,
  0.7909 / 0.7952, 0.8006 / 0.7925, 0.7858 / 0.7733, 0.6887 / 0.6865, 0.7669 / 0.7410).
  ``--lengths 20 120 435 1000 --kinds dense --dcg-C 0 --repeats 1``: PropRank 0.48, 1.58,
  4.42, 8.01 s, peak 289, 578, 616 MiB beyond X (120-1,000); t / (m log2 m) 1.00, 0.34,
  0.21, 0.14. Sparse d = 300 (short lists, unchanged path): PropDCG 0.05 s (C = 0.1, coef
  0), 1.11 s (C = 10), 1.66 s (C = 100); PropRank 0.08-0.32 s.
* After cold solves began their smoothing at mu = 0.1 margin (not margin: the first level
  was solved for little), and click pairs kept X itself when nearly every query has a click
  (same machine and settings): 435 candidates, 12K clicks, PropDCG C = 100 3.31, 3.44, 3.46,
  3.31 and 3.45 s in five runs (8 CCP steps, inner iterations 5, 2, 2, 2, 2, 2, 3, 2; final
  objective -901.027 against -901.968 before, a different CCP path), PropRank C = 10 1.28-1.42
  s (8 Newton steps, was 12); ``--seed 1 --exact-steps`` 3.86 s (-891.533, nDCG@10 0.7946)
  against 7.63 s with exact steps (-891.431, 0.7952), ``--seed 2`` 3.31 s (-887.737, 0.7996)
  against 10.15 s (-890.221, 0.7927); ``--kinds correlated`` 3.31 s, ``--kinds sparse``
  4.06 s (10 CCP steps). Sparse d = 300: PropDCG 0.05 s (C = 0.1, coef 0), 0.02 s (C = 1),
  1.15 s (C = 10), 2.00 s (C = 100; 16 CCP steps, inner iterations 4, 12, 16, 15, 12, 11,
  12, 11, 9, 6, 8, 6, 6, 7, 6, 6), 2.20 and 1.92 s at C = 100 with ``--seed 1`` and ``2``;
  PropRank 0.05-0.22 s. Default run (all kinds, 20-1,000 candidates, about 20K clicked
  documents): PropRank at 1,000 candidates 5.90 s dense, 4.87 s sparse, 5.39 s correlated,
  peak 616, 648 (was 1,156: a copy of X for 2 queries without clicks) and 596 MiB beyond X;
  t / (m log2 m) at 1,000 0.20, 0.19, 0.18 of that at 20.
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
