"""Benchmark: final objectives of the linear ranking SVMs on MQ2008, for comparing two checkouts.

Prints figures; not a test. Solver changes must keep the solutions (relative objective
difference below the solver tolerance). Run this script once in each checkout and compare
the printed objectives line by line:

    PYTHONPATH=<checkout> OMP_NUM_THREADS=1 python experiments/benchmarks/bench_mq2008_objectives.py > a.txt

(the file runs against whichever ``counterfactual_ltr`` is first on ``PYTHONPATH``), or let
``python -m experiments.benchmarks.bench_compare --before <git-rev>`` run the same fits in both and
compare the weights themselves.

Clicks: position-based model (eta = 1, eps- = 0.1, eps+ = 1) on a random linear
production ranker per fold (seed = fold), ``n_passes`` 10 and 100 (seed = fold).
RankSVM is fitted on Fold1's full labels at C = 0.1 and 10; SVM PropRank (C = 1, 100)
on Fold1 with 10 passes; SVM PropDCG at C = 10, 100, 1000 on every fold and number of passes.

Comparisons made with it: ``docs/solver-notes.md``.

python -m experiments.benchmarks.bench_mq2008_objectives [--folds 1 2 3] [--data PATH]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "MQ2008"


def _log(data, fold, passes):
    from click_sim import PositionBasedClickModel, simulate_clicks

    production = data.X @ np.random.default_rng(fold).normal(size=data.X.shape[1])
    model = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    return simulate_clicks(data, production, model, n_passes=passes, random_state=fold)


def _line(name, est, seconds):
    print(f"{name}: objective {est.objective_:.10g}  iterations {int(np.sum(est.n_iter_))}  CPU {seconds:.2f} s",
          flush=True)


def _timed(make, *args):
    t0 = time.process_time()
    est = make().fit(*args)
    return est, time.process_time() - t0


def main(argv=None):
    from click_sim import load_letor
    from counterfactual_ltr.estimators import RankSVM, SVMPropDCG, SVMPropRank

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--folds", type=int, nargs="*", default=[1, 2, 3])
    p.add_argument("--data", type=Path, default=DATA)
    args = p.parse_args(argv)
    if not (args.data / "Fold1" / "train.txt").exists():
        print(f"MQ2008 not found under {args.data} (see ../shared/data/README.md)")
        return
    warnings.simplefilter("ignore")
    for fold in args.folds:
        data = load_letor(args.data / f"Fold{fold}" / "train.txt")
        if fold == args.folds[0]:
            for C in (0.1, 10.0):
                _line(f"F{fold} RankSVM C={C:g}", *_timed(lambda: RankSVM(C=C), data))
            log = _log(data, fold, 10)
            for C in (1.0, 100.0):
                _line(f"F{fold} p10 PropRank C={C:g}", *_timed(lambda: SVMPropRank(C=C), log))
        for passes in (10, 100):
            log = _log(data, fold, passes)
            for C in (10.0, 100.0, 1000.0):
                _line(f"F{fold} p{passes} PropDCG C={C:g}", *_timed(lambda: SVMPropDCG(C=C), log))


if __name__ == "__main__":
    main()
