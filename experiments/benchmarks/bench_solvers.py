"""Benchmark: exact linear ranking-SVM solvers on synthetic click problems.

Prints figures; not a test. Targets (see counterfactual_ltr/solvers/):

* LETOR size (26,000 clicked documents x 40 candidates, 46 features, ~1M pairs):
  relative duality gap 1e-4 in under 10 s including set-up, for several C;
* Yahoo size (20,000 queries x 24 documents, 700 features, 175,000 clicks):
  1e-4 in under 15 s (issue 18), peak memory under twice the feature matrix;
* warm start after multiplying the weights by factors in [0.5, 2]: under half the cold time;
* the one-slack-per-pair cvxpy reference at a small size, and the ratio.

python -m experiments.benchmarks.bench_solvers [--quick] [--size letor|yahoo|all] [--method newton|bmrm|both]

Times are of a solve outside tracemalloc (which slows allocation-heavy code); the
memory figure comes from a second, traced solve. Run with ``OMP_NUM_THREADS=1
OPENBLAS_NUM_THREADS=1`` on a shared machine and read the CPU seconds. Figures measured
with it: ``docs/solver-notes.md``.
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
import warnings

import numpy as np

SIZES = {
    # n_queries, docs per query, features, click events, distinct clicked docs (None: from events)
    "letor": dict(n_queries=6500, m=40, d=46, n_clicks=26000, distinct=True),
    "yahoo": dict(n_queries=20000, m=24, d=700, n_clicks=175000, distinct=False),
    "quick-letor": dict(n_queries=500, m=40, d=46, n_clicks=2000, distinct=True),
    "quick-yahoo": dict(n_queries=400, m=24, d=100, n_clicks=3500, distinct=False),
}


def make_problem(n_queries, m, d, n_clicks, distinct, random_state=0):
    """Synthetic click problem: gaussian features, queries of ``m`` documents.

    Relevance = hidden linear model + noise; clicks fall on documents with
    probability increasing in relevance, each with an IPS-like weight in
    [1, 20], aggregated per document. ``distinct``: ``n_clicks`` distinct
    clicked documents (LETOR setting), else ``n_clicks`` click events.
    Returns ``X, i, j, c, n_clicked``: each clicked document ``i`` with weight
    ``W_i`` paired with every other candidate ``j`` of its query, ``c = W_i``.
    """
    rng = np.random.default_rng(random_state)
    n = n_queries * m
    X = rng.standard_normal((n, d))
    w_true = rng.standard_normal(d) / np.sqrt(d)
    rel = X @ w_true + 0.5 * rng.standard_normal(n)
    p = np.exp(2.0 * (rel - rel.max()))
    p /= p.sum()
    if distinct:
        docs = rng.choice(n, size=n_clicks, replace=False, p=p)
        W = np.zeros(n)
        W[docs] = rng.uniform(1, 20, size=n_clicks)
    else:
        docs = rng.choice(n, size=n_clicks, replace=True, p=p)
        W = np.bincount(docs, rng.uniform(1, 20, size=n_clicks), minlength=n)
    clicked = np.flatnonzero(W > 0)
    q = clicked // m
    # every clicked doc against the other m - 1 candidates of its query
    other = q[:, None] * m + np.arange(m)[None, :]
    i = np.repeat(clicked, m)
    j = other.ravel()
    keep = i != j
    return X, i[keep], j[keep], W[i[keep]], clicked.size


def _solve(method, X, i, j, c, C, tol, w0=None):
    from counterfactual_ltr.solvers import pairwise_hinge_oracle, solve_pairwise_hinge, solve_regularized

    if method == "newton":
        return solve_pairwise_hinge(X, i, j, c, C, tol=tol, w0=w0)
    return solve_regularized(pairwise_hinge_oracle(X, i, j, c), X.shape[1], C, tol=tol, w0=w0, max_iter=2000)


def _report(name, C, res, seconds, i, j, X, cpu):
    s = X @ res.coef
    viol = np.mean(s[i] - s[j] < 1.0)
    print(f"  {name:7s} C={C:<9.3g} {seconds:7.2f} s (CPU {cpu:.2f} s)  iters={res.n_iter:4d}  P={res.objective:.8g}  "
          f"rel gap={res.gap / max(1.0, abs(res.objective)):.1e}  converged={res.converged}  "
          f"pairs in/over margin={viol:.2f}  |w|={np.linalg.norm(res.coef):.3g}")


def bench_size(size, methods, C_values, tol, warm=True, memory=False):
    import counterfactual_ltr.solvers  # noqa: F401  (imported here: ~1.5 s CPU outside the timings)

    spec = SIZES[size]
    t0 = time.perf_counter()
    X, i, j, c, n_clicked = make_problem(**spec)
    print(f"\n== {size}: {spec['n_queries']} queries x {spec['m']} docs, d={spec['d']}, "
          f"{n_clicked} clicked docs, {i.size} pairs, X {X.nbytes / 2**20:.0f} MiB "
          f"(generated in {time.perf_counter() - t0:.1f} s)")
    rng = np.random.default_rng(1)
    for C_rel in C_values:
        C = C_rel / n_clicked                        # as the estimators scale C (C / n_clicks)
        for method in methods:
            t0, c0 = time.perf_counter(), time.process_time()
            res = _solve(method, X, i, j, c, C, tol)
            cold, cpu = time.perf_counter() - t0, time.process_time() - c0
            _report(method, C_rel, res, cold, i, j, X, cpu)
            if memory:
                # A second solve under tracemalloc, which slows allocation-heavy code (3 s here).
                tracemalloc.start()
                _solve(method, X, i, j, c, C, tol)
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                print(f"          peak traced memory during solve {peak / 2**20:.0f} MiB "
                      f"= {peak / X.nbytes:.2f} x X (X itself excluded); process max RSS "
                      f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB "
                      f"= {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / X.nbytes:.2f} x X")
            if warm:
                c2 = c * rng.uniform(0.5, 2.0, size=c.size)
                t0 = time.perf_counter()
                cold2 = _solve(method, X, i, j, c2, C, tol)
                t_cold = time.perf_counter() - t0
                t0 = time.perf_counter()
                warm2 = _solve(method, X, i, j, c2, C, tol, w0=res.coef)
                t_warm = time.perf_counter() - t0
                print(f"          reweighted x U[0.5,2]: cold {t_cold:.2f} s ({cold2.n_iter} it), warm {t_warm:.2f} s "
                      f"({warm2.n_iter} it), ratio {t_warm / t_cold:.2f}; |dP|/P="
                      f"{abs(warm2.objective - cold2.objective) / abs(cold2.objective):.1e}")


def bench_cvxpy(n_pairs=2000, d=46, C_rel=10.0, tol=1e-6):
    import cvxpy as cp

    from counterfactual_ltr.solvers import solve_pairwise_hinge

    X, i, j, c, n_clicked = make_problem(n_queries=80, m=40, d=d, n_clicks=n_pairs // 39 + 1, distinct=True)
    i, j, c = i[:n_pairs], j[:n_pairs], c[:n_pairs]
    C = C_rel / n_clicked
    t0 = time.perf_counter()
    w = cp.Variable(d)
    xi = cp.Variable(i.size)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * (c @ xi)),
                      [xi >= 0, xi >= 1.0 - (X[i] - X[j]) @ w])
    prob.solve(solver=cp.OSQP, eps_abs=1e-8, eps_rel=1e-8, max_iter=200000)
    t_cvx = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = solve_pairwise_hinge(X, i, j, c, C, tol=tol)
    t_ours = time.perf_counter() - t0
    print(f"\n== cvxpy reference (one slack per pair, OSQP eps 1e-8), {i.size} pairs, d={d}: {t_cvx:.2f} s, "
          f"P={prob.value:.8g}; solve_pairwise_hinge (tol {tol:g}) {t_ours:.3f} s, P={res.objective:.8g}; "
          f"ratio {t_cvx / t_ours:.0f}x")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (CI)")
    p.add_argument("--size", choices=["letor", "yahoo", "all"], default="all")
    p.add_argument("--method", choices=["newton", "bmrm", "both"], default="newton")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--C", type=float, nargs="*", default=None, help="C * n_clicked values")
    args = p.parse_args(argv)
    warnings.simplefilter("always")
    methods = ["newton", "bmrm"] if args.method == "both" else [args.method]
    sizes = ["letor", "yahoo"] if args.size == "all" else [args.size]
    for size in sizes:
        name = f"quick-{size}" if args.quick else size
        C_values = args.C or ([1.0, 10.0, 100.0] if size == "letor" else [10.0])
        bench_size(name, methods, C_values, args.tol, memory=(size == "yahoo"))
    bench_cvxpy(n_pairs=500 if args.quick else 2000)


if __name__ == "__main__":
    main()
