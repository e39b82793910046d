"""Compare two checkouts: the same fits, weights side by side; optionally the benchmarks' CPU time, paired.

Prints figures; not a test. For a change that must not change behaviour (issue 31 moved the
solver core into a package and the convex-concave procedure into ``counterfactual_ltr.solvers.ccp``):

    python -m experiments.benchmarks.bench_compare --before <git-rev> [--after <git-rev>] [--quick]
    python -m experiments.benchmarks.bench_compare --before <git-rev> --speed 5

The revision ``--before`` (and ``--after``, default: this working tree) is checked out into a
temporary ``git worktree``; each side runs the fits in its own subprocess with ``PYTHONPATH``
pointing at its tree and one BLAS thread (so the arithmetic is deterministic), saves every fitted
weight vector and objective, and this script prints per fit the largest weight difference
relative to the largest weight, ``max |a - b| / max |b|``, and whether the two are bit-identical.

The fits (``--quick``: the small problems only, about a minute a side):

* ``experiments/benchmarks/bench_mq2008_objectives.py`` (MQ2008 at ``CLTR_DATA`` or ``../shared/data``;
  skipped when absent): RankSVM on Fold1's labels (C = 0.1, 10), SVM PropRank on Fold1 with
  10 passes (C = 1, 100), SVM PropDCG on Folds 1-3 with 10 and 100 passes (C = 10, 100, 1000);
* ``experiments/benchmarks/bench_solvers.py``: LETOR and Yahoo sizes (Newton, cold; re-weighted cold and
  warm), the 2,000-pair problem of its cvxpy comparison, BMRM on a small one;
* one fit per other path: implicit pairs (``bench_long_lists``, 120 candidates: PropRank and
  PropDCG with descent-only subproblems), the finisher (sparse d = 300, PropDCG at C = 100),
  CSR input (Hessian-free), trust-bias CCPs (PropRank and PropDCG), constraints (cutting
  planes), PropRBP, SLAM (BMRM) and Deep PropDCG.

``--speed N``: N paired runs, alternating old / new, of ``bench_solvers`` (LETOR and Yahoo sizes)
and ``bench_long_lists`` (435 candidates dense, PropRank C = 10 and PropDCG C = 100; sparse
d = 300, 15 candidates, C = 100), CPU seconds of each figure; prints the median and the range
of each side and of the per-pair ratio new / old.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- the fits (run in a subprocess)
def _mq2008_dir():
    for base in (os.environ.get("CLTR_DATA"), ROOT.parent / "shared" / "data"):
        if base and (Path(base) / "MQ2008" / "Fold1" / "train.txt").exists():
            return Path(base) / "MQ2008"
    return None


def _mq2008_fits(quick):
    from click_sim import PositionBasedClickModel, load_letor, simulate_clicks
    from counterfactual_ltr.estimators import RankSVM, SVMPropDCG, SVMPropRank

    root = _mq2008_dir()
    if root is None or quick:
        return
    def log_of(data, fold, passes):          # as bench_mq2008_objectives
        production = data.X @ np.random.default_rng(fold).normal(size=data.X.shape[1])
        model = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
        return simulate_clicks(data, production, model, n_passes=passes, random_state=fold)

    for fold in (1, 2, 3):
        data = load_letor(root / f"Fold{fold}" / "train.txt")
        if fold == 1:
            for C in (0.1, 10.0):
                yield f"mq2008 F1 RankSVM C={C:g}", lambda C=C: RankSVM(C=C).fit(data)
            log = log_of(data, fold, 10)
            for C in (1.0, 100.0):
                yield f"mq2008 F1 p10 PropRank C={C:g}", lambda C=C, log=log: SVMPropRank(C=C).fit(log)
        for passes in (10, 100):
            log = log_of(data, fold, passes)
            for C in (10.0, 100.0, 1000.0):
                yield f"mq2008 F{fold} p{passes} PropDCG C={C:g}", lambda C=C, log=log: SVMPropDCG(C=C).fit(log)


def _solver_fits(quick):
    # old paths (experiments.bench_*): the same import works in checkouts before and after the 2026-11-28 split
    from experiments.bench_solvers import SIZES, make_problem
    from counterfactual_ltr.solvers import pairwise_hinge_oracle, solve_pairwise_hinge, solve_regularized

    for size in (("quick-letor", "quick-yahoo") if quick else ("letor", "yahoo")):
        X, i, j, c, n_clicked = make_problem(**SIZES[size])
        rng = np.random.default_rng(1)
        for C_rel in ((1.0, 10.0, 100.0) if size.endswith("letor") else (10.0,)):
            C = C_rel / n_clicked                          # as bench_solvers
            cold = []
            yield f"solvers {size} C={C_rel:g} cold", lambda C=C: cold.append(
                solve_pairwise_hinge(X, i, j, c, C, tol=1e-4)) or cold[-1]
            c2 = c * rng.uniform(0.5, 2.0, size=c.size)
            yield f"solvers {size} C={C_rel:g} reweighted cold", lambda c2=c2, C=C: solve_pairwise_hinge(
                X, i, j, c2, C, tol=1e-4)
            yield f"solvers {size} C={C_rel:g} reweighted warm", lambda c2=c2, C=C, cold=cold: solve_pairwise_hinge(
                X, i, j, c2, C, tol=1e-4, w0=cold[-1].coef)
        del X, i, j, c
    X, i, j, c, n_clicked = make_problem(n_queries=80, m=40, d=46, n_clicks=2000 // 39 + 1, distinct=True)
    i, j, c = i[:2000], j[:2000], c[:2000]
    yield "solvers cvxpy-size 2000 pairs C=10", lambda: solve_pairwise_hinge(X, i, j, c, 10.0 / n_clicked, tol=1e-6)
    i, j, c = i[:300], j[:300], c[:300]
    yield "solvers BMRM 300 pairs C=10", lambda: solve_regularized(pairwise_hinge_oracle(X, i, j, c), X.shape[1],
                                                                   10.0 / n_clicked, tol=1e-6, max_iter=2000)


def _path_fits(quick):
    from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
    from counterfactual_ltr.estimators import (DeepPropDCG, RankSVM, SLAMRanker, SVMPropDCG, SVMPropRank,
                                               SVMPropRBP)
    from experiments.bench_long_lists import make_log

    data, log = make_log(120, 600 if quick else 2000, 46, "dense")
    yield "paths implicit 120 candidates PropRank C=10", lambda: SVMPropRank(C=10.0, solver_tol=1e-4).fit(log)
    yield "paths implicit 120 candidates PropDCG C=100", lambda: SVMPropDCG(C=100.0).fit(log)
    data, slog = make_log(15, 800 if quick else 2800, 300, "sparse")
    yield "paths finisher sparse d=300 PropDCG C=100", lambda: SVMPropDCG(C=100.0).fit(slog)
    csr = make_ranking(n_queries=60, n_docs=(5, 20), n_features=40, density=0.2, random_state=3, sparse=True)
    yield "paths CSR RankSVM C=5", lambda: RankSVM(C=5.0, tol=1e-9).fit(csr)
    clog = simulate_clicks(csr, csr.X[:, 0].toarray().ravel(), n_passes=5, random_state=0)
    yield "paths CSR PropDCG C=10", lambda: SVMPropDCG(C=10.0).fit(clog)
    R = np.arange(1, 9)
    trust = PositionBasedClickModel(examination=1.0 / R, eps_plus=0.9, eps_minus=0.5 / R ** 0.5)
    tdata, w = make_ranking(n_queries=40, n_docs=(5, 8), random_state=4, return_ranker=True)
    tlog = simulate_clicks(tdata, tdata.X @ w, trust, 3000, 0)
    yield "paths trust-bias PropRank C=1", lambda: SVMPropRank(C=1.0, propensity=trust.trust_model()).fit(tlog)
    yield "paths trust-bias PropDCG C=1", lambda: SVMPropDCG(C=1.0, propensity=trust.trust_model()).fit(tlog)
    small = make_ranking(n_queries=40, random_state=0)
    plog = simulate_clicks(small, small.X[:, 0], n_passes=5, random_state=0)
    yield "paths monotone PropDCG C=1", lambda: SVMPropDCG(C=1.0, monotone_constraints={0: 1, 3: -1},
                                                           bounds=(-1.0, 1.0)).fit(plog)
    yield "paths elastic-net RankSVM C=1", lambda: RankSVM(C=1.0, penalty="elasticnet").fit(small)
    yield "paths PropRBP C=10", lambda: SVMPropRBP(C=10.0, p=0.5).fit(plog)
    clean = make_ranking(n_queries=60, noise=0.1, random_state=0)     # SLAM: w = 0 is optimal on noisy labels
    yield "paths SLAM C=10", lambda: SLAMRanker(C=10.0).fit(clean)
    yield "paths DeepPropDCG", lambda: DeepPropDCG(hidden_layer_sizes=(16,), learning_rate=1e-2, max_epochs=20,
                                                   random_state=0).fit(plog)
    yield "paths DeepPropDCG early stopping", lambda: DeepPropDCG(
        hidden_layer_sizes=(8,), learning_rate=3e-2, max_epochs=30, early_stopping=True, n_iter_no_change=3,
        lr_schedule="paper", batch_size=50, random_state=1).fit(plog)


def _weights(fitted):
    """(weights, objective) of a SolverResult or a fitted estimator."""
    if hasattr(fitted, "model_"):                       # Deep PropDCG: every parameter, flattened
        return np.concatenate([np.ravel(p) for p in fitted.model_.params]), float(fitted.loss_curve_[-1])
    coef = fitted.coef if hasattr(fitted, "gap") else fitted.coef_
    objective = fitted.objective if hasattr(fitted, "gap") else fitted.objective_
    return np.asarray(coef, dtype=np.float64), float(objective)


def run_fits(out, quick):
    import warnings

    import counterfactual_ltr

    warnings.simplefilter("ignore")
    print(f"counterfactual_ltr from {Path(counterfactual_ltr.__file__).parent}", flush=True)
    results = {}
    for group in (_mq2008_fits, _solver_fits, _path_fits):
        for name, fit in group(quick):
            c0 = time.process_time()
            coef, objective = _weights(fit())
            results[name] = (coef, objective)
            print(f"  {name}: objective {objective:.12g}  CPU {time.process_time() - c0:.2f} s", flush=True)
    np.savez(out, names=np.array(list(results)), **{f"coef{k}": v[0] for k, v in enumerate(results.values())},
             objectives=np.array([v[1] for v in results.values()]))


# ----------------------------------------------------------------------------- the two sides
def _checkout(rev, where):
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _remove(where):
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(where.parent, ignore_errors=True)


def _env(tree):
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    env.pop("PYTHONHASHSEED", None)
    return env


def _fits_of(tree, out, quick):
    cmd = [sys.executable, str(Path(__file__).resolve()), "--run-fits", str(out)] + (["--quick"] if quick else [])
    subprocess.run(cmd, env=_env(tree), cwd=str(tree), check=True)
    with np.load(out) as f:
        return {str(n): (f[f"coef{k}"], float(f["objectives"][k])) for k, n in enumerate(f["names"])}


def compare(before, after, quick):
    with tempfile.TemporaryDirectory() as out:
        print(f"== before: {before}")
        old = _fits_of(before, Path(out) / "before.npz", quick)
        print(f"== after: {after}")
        new = _fits_of(after, Path(out) / "after.npz", quick)
    print("\nmax |w_after - w_before| / max |w_before| and relative objective difference per fit:")
    worst = 0.0
    for name, (w_old, p_old) in old.items():
        if name not in new:
            print(f"  {name}: missing after")
            continue
        w_new, p_new = new[name]
        if w_new.shape != w_old.shape:
            print(f"  {name}: shapes differ {w_old.shape} -> {w_new.shape}")
            worst = np.inf
            continue
        rel = float(np.max(np.abs(w_new - w_old)) / max(np.max(np.abs(w_old)), 1e-300)) if w_old.size else 0.0
        dp = abs(p_new - p_old) / max(abs(p_old), 1e-300)
        same = np.array_equal(w_new, w_old) and p_new == p_old
        worst = max(worst, rel)
        print(f"  {name:48s} {'identical' if same else f'weights {rel:.2e}  objective {dp:.2e}'}")
    print(f"largest relative weight difference: {worst:.3g} over {len(old)} fits")
    return worst


# ----------------------------------------------------------------------------- speed
_SPEED = {
    "bench_solvers": ["-m", "experiments.bench_solvers"],
    "bench_long_lists 435": ["-m", "experiments.bench_long_lists", "--lengths", "435", "--kinds", "dense",
                             "--clicked", "12000", "--C", "10", "--dcg-C", "100", "--repeats", "1", "--no-memory"],
    "bench_long_lists sparse": ["-m", "experiments.bench_long_lists", "--lengths", "15", "--kinds", "sparse",
                                "--d", "300", "--clicked", "2800", "--C", "100", "--dcg-C", "100", "--repeats", "1",
                                "--no-memory"],
}
_CPU = re.compile(r"^\s*(.*?)\s[\d.]+ s \(CPU ([\d.]+) s\)")


def _cpu_figures(tree, args):
    """``{label: CPU seconds}`` of one benchmark run (each line that prints ``... s (CPU x s)``)."""
    out = subprocess.run([sys.executable] + args, env=_env(tree), cwd=str(tree), check=True, capture_output=True,
                         text=True).stdout
    figures, section = {}, ""
    for line in out.splitlines():
        if line.startswith("=="):
            section = line.split(":")[0].strip("= ")
        m = _CPU.match(line)
        if m:
            label = f"{section} | {re.sub(r'tol=[^ ]*|[0-9.]+ s', '', m.group(1)).strip()}"
            while label in figures:
                label += "'"
            figures[label] = float(m.group(2))
    return figures


def speed(before, after, repeats, benches=None):
    runs = {}
    for rep in range(repeats):
        for side, tree in (("old", before), ("new", after)) if rep % 2 == 0 else (("new", after), ("old", before)):
            for bench, args in _SPEED.items():
                if benches and bench not in benches:
                    continue
                for label, cpu in _cpu_figures(tree, args).items():
                    runs.setdefault((bench, label), {"old": [], "new": []})[side].append(cpu)
        print(f"  pair {rep + 1} of {repeats} done", flush=True)
    print(f"\nCPU seconds, {repeats} paired runs (alternating order), one BLAS thread: median [min-max]")
    for (bench, label), sides in runs.items():
        old, new = np.array(sides["old"]), np.array(sides["new"])
        n = min(old.size, new.size)
        ratio = new[:n] / old[:n]
        print(f"  {bench:24s} {label[:60]:60s} old {np.median(old):6.2f} [{old.min():.2f}-{old.max():.2f}]  "
              f"new {np.median(new):6.2f} [{new.min():.2f}-{new.max():.2f}]  new/old {np.median(ratio):.3f} "
              f"[{ratio.min():.3f}-{ratio.max():.3f}]")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", help="git revision of the old code (e.g. the commit the change started from)")
    p.add_argument("--after", default=None, help="git revision of the new code (default: this working tree)")
    p.add_argument("--quick", action="store_true", help="small problems only")
    p.add_argument("--speed", type=int, default=0, metavar="N", help="N paired benchmark runs instead of the fits")
    p.add_argument("--benches", nargs="*", default=None, choices=list(_SPEED),
                   help="with --speed: only these benchmarks (default: all)")
    p.add_argument("--run-fits", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.run_fits is not None:
        return run_fits(args.run_fits, args.quick)
    if not args.before:
        p.error("--before is required")
    made = []
    try:
        trees = []
        for rev in (args.before, args.after):
            if rev is None:
                trees.append(ROOT)
                continue
            where = Path(tempfile.mkdtemp(prefix="bench-compare-")) / "tree"
            _checkout(rev, where)
            made.append(where)
            trees.append(where)
        if args.speed:
            speed(trees[0], trees[1], args.speed, args.benches)
        else:
            compare(trees[0], trees[1], args.quick)
    finally:
        for where in made:
            _remove(where)


if __name__ == "__main__":
    main()
