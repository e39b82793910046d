"""Benchmark: sparse, higher-dimensional data -- our RankSVM side by side with Joachims' svm_rank,
and the propensity SVMs' cost per Newton iteration on the Hessian-free path.

Prints figures; not a test. Run with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 on a shared machine.

Problem (issue 18, "a web-search sample"): 201 queries of 15 documents, d = 300 features of
which about a third are non-zero, all in [0, 1] (``make_ranking(density=0.32, sparse=True)``,
four grades), about 13.5K preference pairs on the full labels.

1. RankSVM on the full labels at C = 1 and 10 (``--C``), to a relative duality gap of 1e-4
   (``--tol``): best of ``--repeats`` fits, wall and CPU seconds, Newton iterations and the
   solver path (``newton``: dense d x d Hessian; ``newton_cg``: Hessian-free), for the
   sparse (CSR) X the data set keeps and for the same X dense, each path forced.
2. With ``--svm-rank PATH`` (a built ``svm_rank_learn``; nothing here downloads or builds
   it), the same problem written as an SVMlight file and solved by svm_rank at the same
   C. svm_rank minimises ``0.5||w||^2 + (C/n) sum_q sum_{pairs of q} xi`` with ``n`` the
   number of queries, which is RankSVM's objective with the same C; its weights are read
   from the model file and our exact objective is evaluated at them, so the two final
   objectives are compared on one formula. svm_rank's time is its own "Runtime in
   cpu-seconds" (learning only) and the wall time of the process (reading included).
   ``--svm-rank-eps`` sets its ``-e`` values (default 0.001, its own default, and 1e-4).
3. With ``--propensity`` (default on; ``--no-propensity`` skips), a click log on the
   same kind of data (280 queries of 15 documents, 30 passes: about 40K click pairs) and SVM
   PropRank / SVM PropDCG at C = 0.1 .. 100 on both paths: time, Newton iterations and
   CPU milliseconds per Newton iteration (the Hessian-free path's gain is per iteration;
   the CCP's iteration counts are another piece of work).

4. With ``--wide``: RankSVM where no dense Hessian fits -- 2,500 queries of 20 documents,
   d = 20,000 features, 0.25 % non-zero (2.5M non-zeros; the d x d Hessian alone would take
   3.2 GB, the dense X 8 GB) at C = 1 and 10 (``make_wide``).

python -m experiments.benchmarks.bench_svm_rank [--svm-rank /path/to/svm_rank_learn] [--C 1 10]
    [--tol 1e-4] [--repeats 5] [--no-propensity] [--prop-C 0.1 1 10 100] [--wide] [--quick]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
import warnings
from contextlib import contextmanager

import numpy as np


def make_problem(random_state=0, n_queries=201):
    """The issue's sparse sample, synthetic: 201 x 15 documents, d = 300, 32 % non-zero in [0, 1]."""
    from click_sim import make_ranking

    return make_ranking(n_queries=n_queries, n_docs=15, n_features=300, n_levels=4,
                        level_shares=(0.5, 0.25, 0.15, 0.1), density=0.32, random_state=random_state, sparse=True)


def make_wide(n_queries=2500, n_docs=20, d=20000, density=0.0025, random_state=0):
    """Very wide sparse data: CSR X with ``density`` non-zeros uniform in [0, 1], three grades from a linear model."""
    import scipy.sparse as sp

    from counterfactual_ltr import RankingDataset

    rng = np.random.default_rng(random_state)
    n = n_queries * n_docs
    X = sp.random(n, d, density=density, format="csr", random_state=rng, data_rvs=rng.random)
    w = rng.standard_normal(d) / np.sqrt(d * density)
    latent = X @ w + 0.5 * rng.standard_normal(n)
    y = np.searchsorted(np.quantile(latent, [0.6, 0.85]), latent)
    return RankingDataset(X, y, np.repeat(np.arange(n_queries), n_docs), name="wide")


def wide(args):
    from counterfactual_ltr.estimators import RankSVM

    data = make_wide()
    i, _ = graded_pairs(data)
    print(f"\n== wide: {data.n_queries} queries, {data.n_docs} documents, d={data.n_features}, "
          f"{data.X.nnz} non-zeros ({data.X.nnz / (data.n_docs * data.n_features):.2%}), {i.size} pairs")
    for C in args.C:
        wall, cpu, est = _timed(lambda: RankSVM(C=C, tol=args.tol).fit(data), 1)
        print(f"  RankSVM C={C:<5g} {wall:6.2f} s wall  {cpu:6.2f} s CPU  iters={est.n_iter_:3d}  "
              f"{1e3 * cpu / max(1, est.n_iter_):6.1f} ms CPU/iter  P={est.objective_:.8g}  "
              f"rel gap={est.duality_gap_ / est.objective_:.1e}", flush=True)


def graded_pairs(data):
    from counterfactual_ltr._segments import within_query_pairs

    i, j = within_query_pairs(data.query_offsets)
    keep = data.y[i] > data.y[j]
    return i[keep], j[keep]


def rank_objective(data, w, C):
    """RankSVM's (and svm_rank's) primal objective at ``w``: 0.5||w||^2 + (C / n_queries) sum hinge."""
    i, j = graded_pairs(data)
    s = data.X @ w
    return 0.5 * float(w @ w) + C / data.n_queries * float(np.maximum(0.0, 1.0 - (s[i] - s[j])).sum())


def _timed(fit, repeats):
    """Best (wall, CPU) of ``repeats`` runs and the result of the last."""
    times, out = [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fit()
        times.append((time.perf_counter() - t0, time.process_time() - c0))
    wall = min(t[0] for t in times)
    cpu = min(t[1] for t in times)
    return wall, cpu, out


@contextmanager
def forced_method(method):
    """The SVM estimators' solver with ``method`` forced; yields the list of paths the solves took."""
    import counterfactual_ltr.estimators.svm as svm_module
    from counterfactual_ltr.solvers import solve_pairwise_hinge

    taken = []

    def solver(*args, **kwargs):
        res = solve_pairwise_hinge(*args, method=method, **kwargs)
        taken.append(res.method)
        return res

    saved = svm_module.solve_pairwise_hinge
    svm_module.solve_pairwise_hinge = solver
    try:
        yield taken
    finally:
        svm_module.solve_pairwise_hinge = saved


def ours(data, C, tol, repeats):
    """RankSVM on the full labels: CSR and dense X, each path."""
    from counterfactual_ltr.estimators import RankSVM

    rows = {}
    dense = type(data)(data.X.toarray(), data.y, data.qid)
    for label, d, method in (("CSR X, auto", data, "auto"), ("dense X, auto", dense, "auto"),
                             ("CSR X, newton_cg", data, "newton_cg"), ("dense X, newton_cg", dense, "newton_cg"),
                             ("dense X, newton", dense, "newton")):
        with forced_method(method) as taken:
            wall, cpu, est = _timed(lambda: RankSVM(C=C, tol=tol).fit(d), repeats)
        rows[label] = est.objective_
        print(f"  ours  {label:20s} {wall:6.3f} s wall  {cpu:6.3f} s CPU  iters={est.n_iter_:3d}  "
              f"path={taken[-1]:16s}  P={est.objective_:.8g}  rel gap={est.duality_gap_ / est.objective_:.1e}",
              flush=True)
    return rows["CSR X, auto"]


def svm_rank(path, data, C, eps_values, workdir):
    from sklearn.datasets import dump_svmlight_file

    train = os.path.join(workdir, "train.dat")
    if not os.path.exists(train):
        # svm_rank wants qids from 1 and increasing; values written as given (non-zeros only).
        dump_svmlight_file(data.X, data.y, train, query_id=data.qid + 1, zero_based=False)
    out = []
    for eps in eps_values:
        model = os.path.join(workdir, f"model_{C:g}_{eps:g}.dat")
        t0 = time.perf_counter()
        ru0 = os.times()
        run = subprocess.run([path, "-c", repr(float(C)), "-e", repr(float(eps)), train, model],
                             capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        ru1 = os.times()
        child_cpu = (ru1.children_user - ru0.children_user) + (ru1.children_system - ru0.children_system)
        learn_cpu = float(re.search(r"Runtime in cpu-seconds: ([0-9.]+)", run.stdout).group(1))
        iters = re.search(r"Number of iterations: (\d+)", run.stdout)
        w = read_svm_rank_model(model, data.n_features)
        P = rank_objective(data, w, C)
        out.append((eps, wall, child_cpu, learn_cpu, int(iters.group(1)) if iters else -1, P))
    return out


def read_svm_rank_model(path, d):
    """The linear weight vector of an svm_rank model file (one compacted support vector)."""
    with open(path) as fh:
        lines = [line for line in fh if line.strip()]
    w = np.zeros(d)
    for line in lines[11:]:                      # header: 11 lines, then "alpha*y idx:val ... #"
        tokens = line.split("#", 1)[0].split()
        alpha = float(tokens[0])
        for tok in tokens[1:]:
            k, v = tok.split(":")
            w[int(k) - 1] += alpha * float(v)
    return w


def propensity(args):
    from click_sim import simulate_clicks, train_production_ranker
    from counterfactual_ltr.estimators import SVMPropDCG, SVMPropRank

    data = make_problem(random_state=1, n_queries=args.prop_queries)
    production = train_production_ranker(data, fraction=0.05, random_state=0).predict(data)
    log = simulate_clicks(data, production, n_passes=args.passes, random_state=2)
    agg = log.aggregate()
    clicked = np.flatnonzero(agg.weights)
    pairs = int(np.sum(data.query_lengths[data.query_index[clicked]] - 1))
    print(f"\n== propensity SVMs: {data.n_docs} documents, {data.n_queries} queries, d={data.n_features}, "
          f"{data.X.nnz / (data.n_docs * data.n_features):.0%} non-zero, {args.passes} passes: "
          f"{agg.n_clicks} clicks on {clicked.size} documents, {pairs} click pairs", flush=True)
    dense = type(data)(data.X.toarray(), data.y, data.qid)
    dense_log = simulate_clicks(dense, production, n_passes=args.passes, random_state=2)   # the same log
    for C in args.prop_C:
        for Est, name in ((SVMPropRank, "PropRank"), (SVMPropDCG, "PropDCG")):
            for label, lg, method in (("CSR, auto", log, "auto"), ("dense, newton", dense_log, "newton")):
                with forced_method(method) as taken, warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    wall, cpu, est = _timed(lambda: Est(C=C).fit(lg), 1)
                label = f"{label.split(',')[0]}, {'/'.join(sorted(set(taken)))}"
                iters = np.atleast_1d(est.n_iter_)
                extra = f"  CCP steps={est.n_ccp_iter_}  inner={iters.tolist()}" if name == "PropDCG" else ""
                print(f"  {name:8s} C={C:<6g} {label:30s} {wall:6.2f} s wall  {cpu:6.2f} s CPU  Newton iters="
                      f"{int(iters.sum()):4d}  {1e3 * cpu / max(1, iters.sum()):6.1f} ms CPU/iter  "
                      f"P={est.objective_:.8g}{extra}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--svm-rank", help="path to a built svm_rank_learn binary (optional)")
    p.add_argument("--svm-rank-eps", type=float, nargs="*", default=[1e-3, 1e-4])
    p.add_argument("--C", type=float, nargs="*", default=[1.0, 10.0])
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--no-propensity", dest="prop", action="store_false")
    p.add_argument("--prop-C", type=float, nargs="*", default=[0.1, 1.0, 10.0, 100.0])
    p.add_argument("--prop-queries", type=int, default=280, help="280 queries x 15: about 40K click pairs")
    p.add_argument("--passes", type=int, default=30)
    p.add_argument("--wide", action="store_true", help="also RankSVM at d = 20,000 (sparse)")
    p.add_argument("--quick", action="store_true", help="one repeat, one C, small propensity run (CI)")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.C, args.prop_C, args.prop_queries, args.passes = 1, [1.0], [1.0], 40, 5
    print(f"load average {os.getloadavg()[0]:.2f} (2-core machine: CPU seconds are the figures to read)")
    data = make_problem()
    i, _ = graded_pairs(data)
    print(f"== RankSVM on full labels: {data.n_queries} queries, {data.n_docs} documents, d={data.n_features}, "
          f"{data.X.nnz / (data.n_docs * data.n_features):.0%} non-zero, {i.size} pairs, tol={args.tol:g}")
    with tempfile.TemporaryDirectory() as workdir:
        for C in args.C:
            print(f"C = {C:g}")
            P = ours(data, C, args.tol, args.repeats)
            if args.svm_rank:
                for eps, wall, child_cpu, learn_cpu, iters, P_ref in svm_rank(args.svm_rank, data, C,
                                                                              args.svm_rank_eps, workdir):
                    print(f"  svm_rank -e {eps:<8g} {wall:6.3f} s wall  {child_cpu:6.3f} s CPU (process)  "
                          f"{learn_cpu:5.2f} s CPU (its learning)  iters={iters:4d}  P(w_svm_rank)={P_ref:.8g}  "
                          f"ours - svm_rank = {(P - P_ref) / P_ref:+.2e} relative", flush=True)
    if args.prop:
        propensity(args)
    if args.wide:
        wide(args)


if __name__ == "__main__":
    main()
