"""Benchmark: the price of constraints and the L1 path for the linear propensity SVMs (issue #15).

Prints figures; not a test. On MQ2008 Fold1 (100 passes of the position-based click model, eta = 1,
production ranker = RankSVM on 1% of the training queries):

1. SVM PropDCG unconstrained (``solver="auto"``: today's Newton path), then with monotone constraints
   on half the features, bounds, L1, elastic net and a cvxpy constraint: training time (best of
   ``--repeats``, runs interleaved), CCP and solver iterations, test avg DCG (mean over relevant test
   documents of 1/log2(1 + rank)), largest constraint violation, time ratio to unconstrained
   (target: monotone constraints under 10x);
2. the L1 path: number of non-zero weights against C (SVM PropDCG, ``penalty="l1"``);
3. LETOR size (``experiments.benchmarks.bench_solvers``' synthetic 26,000 clicked docs x 40 candidates, 46
   features, ~1M pairs): one constrained solve (monotone on half the features) to a relative gap
   1e-4 (target: under 30 s), beside the unconstrained Newton solve.

python -m experiments.benchmarks.bench_constraints [--quick] [--C 10] [--repeats 3] [--skip-letor | --letor-only]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def _violation(coef, fs):
    worst = max(float(np.max(fs.lower - coef)), float(np.max(coef - fs.upper)), 0.0)
    if fs.constraints is not None:
        import cvxpy as cp

        w = cp.Variable(coef.size)
        w.value = coef
        worst = max([worst] + [float(np.max(c.violation())) for c in fs.constraints(w)])
    return worst


def first_two_ordered(w):
    """A cvxpy constraint of the kind no box expresses: feature 0 weighs at least as much as feature 1."""
    return [w[0] >= w[1]]


def price_of_constraints(log, test, C, repeats, d):
    from counterfactual_ltr.estimators import SVMPropDCG

    from experiments._cltr import test_metrics

    half = [1] * (d // 2) + [0] * (d - d // 2)
    free = SVMPropDCG(C=C).fit(log)
    cap = 0.5 * float(np.abs(free.coef_).max())
    configs = {
        "unconstrained (auto: Newton)": {},
        "unconstrained, cutting plane": {"solver": "cutting_plane"},
        f"monotone +1 on features 0..{d // 2 - 1}": {"monotone_constraints": half},
        f"bounds |w| <= {cap:.3g} (half the free max)": {"bounds": (-cap, cap)},
        "penalty l1": {"penalty": "l1"},
        "penalty elasticnet (l1_ratio 0.5)": {"penalty": "elasticnet", "l1_ratio": 0.5},
        "cvxpy constraint w[0] >= w[1]": {"constraints": first_two_ordered},
    }
    times = {name: [] for name in configs}
    models = {}
    for _ in range(repeats):                       # interleaved: a shared machine's load hits all alike
        for name, kw in configs.items():
            t0 = time.perf_counter()
            models[name] = SVMPropDCG(C=C, **kw).fit(log)
            times[name].append(time.perf_counter() - t0)
    base = min(times["unconstrained (auto: Newton)"])
    print(f"\n== price of the constraints: SVM PropDCG, C={C:g}, best of {repeats} (interleaved)")
    print(f"  {'configuration':46s} {'seconds':>8s} {'x free':>7s} {'CCP':>4s} {'solver its':>10s} "
          f"{'test avgDCG':>11s} {'nonzero':>7s} {'violation':>9s}")
    for name, model in models.items():
        fs = model._feasible_set(d)
        dcg = test_metrics(model.predict(test.X), test)["avg_dcg"]
        print(f"  {name:46s} {min(times[name]):8.2f} {min(times[name]) / base:7.2f} {model.n_ccp_iter_:4d} "
              f"{int(np.sum(model.n_iter_)):10d} {dcg:11.4f} {np.count_nonzero(model.coef_):7d} "
              f"{_violation(model.coef_, fs):9.1e}")
    return models


def l1_path(log, test, C_grid):
    from counterfactual_ltr.estimators import SVMPropDCG

    from experiments._cltr import test_metrics

    print("\n== L1 path: SVM PropDCG, penalty='l1' (weights exactly 0 counted as zero)")
    print(f"  {'C':>8s} {'nonzero':>7s} {'seconds':>8s} {'test avgDCG':>11s}")
    for C in C_grid:
        t0 = time.perf_counter()
        model = SVMPropDCG(C=C, penalty="l1").fit(log)
        seconds = time.perf_counter() - t0
        dcg = test_metrics(model.predict(test.X), test)["avg_dcg"]
        print(f"  {C:8.3g} {np.count_nonzero(model.coef_):7d} {seconds:8.2f} {dcg:11.4f}")


def letor_size(size, C_values):
    from counterfactual_ltr.solvers.constrained import feasible_set, solve_constrained_hinge
    from counterfactual_ltr.solvers import solve_pairwise_hinge

    from experiments.benchmarks.bench_solvers import SIZES, make_problem

    X, i, j, c, n_clicked = make_problem(**SIZES[size])
    d = X.shape[1]
    fs = feasible_set(d, monotone_constraints=[1] * (d // 2) + [0] * (d - d // 2))
    print(f"\n== {size}: {i.size} pairs, d={d}; monotone +1 on half the features, relative gap 1e-4")
    for C_rel in C_values:
        C = C_rel / n_clicked
        t0 = time.perf_counter()
        free = solve_pairwise_hinge(X, i, j, c, C, tol=1e-4)
        t_free = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = solve_constrained_hinge(X, i, j, c, C, feasible=fs, tol=1e-4)
        t_con = time.perf_counter() - t0
        print(f"  C={C_rel:<6g} constrained {t_con:6.2f} s ({res.n_iter} iterations, converged={res.converged}, "
              f"P={res.objective:.6g}, min w on constrained half {res.coef[:d // 2].min():.2e}) | "
              f"unconstrained Newton {t_free:5.2f} s (P={free.objective:.6g})")


def main(argv=None):
    from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks, train_production_ranker

    from experiments._common import load_fold, mq2008_dir

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="synthetic data, small sizes")
    p.add_argument("--C", type=float, default=10.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--skip-letor", action="store_true")
    p.add_argument("--letor-only", action="store_true", help="only part 3 (the ~1M-pair solve)")
    args = p.parse_args(argv)
    warnings.simplefilter("always")
    if args.letor_only:
        letor_size("quick-letor" if args.quick else "letor", (10.0,) if args.quick else (1.0, 10.0, 100.0))
        return
    if args.quick or mq2008_dir() is None:
        data = make_ranking(n_queries=300, n_docs=(5, 40), n_features=46, random_state=0)
        train, test = data.subset(np.arange(200)), data.subset(np.arange(200, 300))
        name = "synthetic (200 + 100 queries)"
    else:
        train, _, test = load_fold(1)
        name = "MQ2008 Fold1"
    production = train_production_ranker(train, fraction=0.01, random_state=0)
    log = simulate_clicks(train, production, PositionBasedClickModel(1.0, 0.1, 1.0), n_passes=100, random_state=0)
    print(f"data: {name}, train {train}, {log.n_clicks} clicks (100 passes)")
    price_of_constraints(log, test, args.C, 1 if args.quick else args.repeats, train.X.shape[1])
    l1_path(log, test, (100.0,) if args.quick else (10.0, 100.0, 1000.0))
    if not args.skip_letor:
        letor_size("quick-letor" if args.quick else "letor", (10.0,) if args.quick else (1.0, 10.0, 100.0))


if __name__ == "__main__":
    main()
