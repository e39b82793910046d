"""Where each learner's solver stops resolving its problem as C grows, and what the rule refusing C does.

    python -m experiments.benchmarks.bench_c_scale [--timeout 120] [--quick]

Every learner with a ``C`` refuses, before any solving, a C whose scale
``kappa = C L(0) R^2 / margin^2`` exceeds its solver's limit
(``counterfactual_ltr.estimators._base.check_C_scale``, ``C_SCALE_LIMITS``). This script shows
where the limits come from: each configuration is fitted **with the rule switched off** in a
child process (killed after ``--timeout`` seconds of wall time), and one line prints kappa, the
CPU seconds, whether the fit converged, and whether the rule refuses that C. Configurations:
SVM PropDCG / PropRank and RankSVM on MQ2008 Fold1 train (5 passes of clicks, eta = 1, and the
labels) and on synthetic data (Newton); SVM PropDCG with an L1 penalty (cutting planes); SLAM on
synthetic labels, MQ2008 clicks, and synthetic labels with one feature 1e4 times the others (bundle
method). ``--quick``: synthetic data only, 20 s.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
import warnings

import numpy as np

CASES = [  # (learner, data, solver, C values, options)
    ("SVMPropDCG", "mq_clicks", "newton", (1e3, 1e7, 1e11, 1e12, 1e15), {}),
    ("RankSVM", "mq_labels", "newton", (1e7, 1e11, 1e12), {}),
    ("SVMPropRank", "syn_clicks", "newton", (1e10, 1e12, 1e13), {}),
    ("SVMPropDCG", "mq_clicks", "cutting_plane", (1e2, 1e4, 1e5), {"penalty": "l1"}),
    ("SLAMRanker", "syn_labels", "bmrm", (1e3, 1e4, 3e4), {}),
    ("SLAMRanker", "mq_clicks", "bmrm", (1e4, 1e6, 1e7), {}),
    ("SLAMRanker", "scaled_labels", "bmrm", (10.0, 1e3), {}),
]
QUICK = [("SVMPropRank", "syn_clicks", "newton", (1e10, 1e13), {}), ("SLAMRanker", "syn_labels", "bmrm", (1e3, 3e4), {})]


def _data(kind: str):
    from click_sim import make_ranking, simulate_clicks

    if kind.startswith("mq"):
        from experiments._common import load_fold

        data = load_fold(1)[0]
    elif kind.startswith("scaled"):        # one feature 1e4 times the others: the bound's R is large
        data = make_ranking(n_queries=30, n_docs=(4, 10), n_features=5, random_state=2)
        data.X[:, 1] *= 1e4
    else:
        data = make_ranking(n_queries=100, random_state=0)
    return data if kind.endswith("labels") else simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)


def _fit(learner, kind, C, options, queue):
    """In a child: the fit with the rule switched off; puts (kappa, CPU seconds, converged) on ``queue``."""
    from counterfactual_ltr import estimators
    from counterfactual_ltr.estimators import _base, slam, svm

    seen = []

    def record(estimator, C_solver, loss_at_zero, X, *, solver, margin=1.0):
        seen.append(_base.c_scale(C_solver, loss_at_zero, X, margin))
        return seen[-1]

    svm.check_C_scale = slam.check_C_scale = record
    X = _data(kind)
    warnings.simplefilter("ignore")
    start = time.process_time()
    model = getattr(estimators, learner)(C=C, **options).fit(X)
    queue.put((seen[0], time.process_time() - start, bool(model.converged_)))


def _kappa(learner, kind, C, options, queue):
    """In a child: only kappa, as the rule computes it (the fit stops at the check)."""
    from counterfactual_ltr import estimators
    from counterfactual_ltr.estimators import _base, slam, svm

    class _Stop(Exception):
        pass

    def record(estimator, C_solver, loss_at_zero, X, *, solver, margin=1.0):
        queue.put(_base.c_scale(C_solver, loss_at_zero, X, margin))
        raise _Stop

    svm.check_C_scale = slam.check_C_scale = record
    try:
        getattr(estimators, learner)(C=C, **options).fit(_data(kind))
    except _Stop:
        pass


def _run(target, args, timeout):
    queue = mp.get_context("fork").Queue()
    child = mp.get_context("fork").Process(target=target, args=(*args, queue))
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return queue.get() if not queue.empty() else None


def main(argv=None) -> list:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=120.0, help="wall seconds per fit")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    from counterfactual_ltr.estimators._base import C_SCALE_LIMITS

    cases, timeout = (QUICK, min(args.timeout, 20.0)) if args.quick else (CASES, args.timeout)
    print(f"limits: {C_SCALE_LIMITS}; each fit without the rule, killed after {timeout:.0f} s")
    rows = []
    for learner, kind, solver, Cs, options in cases:
        for C in Cs:
            kappa = _run(_kappa, (learner, kind, C, options), 600)
            out = _run(_fit, (learner, kind, C, options), timeout)
            refused = kappa is not None and kappa > C_SCALE_LIMITS[solver]
            fit = (f"{out[1]:7.1f} s CPU, converged {out[2]}" if out is not None
                   else f"  > {timeout:.0f} s wall (killed)")
            print(f"  {learner:11s} {kind:10s} {solver:13s} {json.dumps(options):18s} C={C:8.0e} kappa={kappa:9.3g}  "
                  f"{fit:32s} rule: {'REFUSES' if refused else 'accepts'}", flush=True)
            rows.append({"learner": learner, "data": kind, "solver": solver, "options": options, "C": C,
                         "kappa": kappa, "fit": out, "refused": bool(refused)})
    return rows


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
