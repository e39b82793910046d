"""CPU time of the position-based model's bootstrap on the shared TREC Session 2014 log.

    python -m experiments.benchmarks.bench_pbm_bootstrap [--bootstrap 200] [--seed 0]

Loads ``$CLTR_DATA/real-logs/trec-session-2014/train.csv`` (28,720 rows) with
``ClickLog.from_events(..., session="page")``, runs ``estimate_propensities(log, "pbm",
n_bootstrap=B)`` and prints its CPU time, the replicates that converged, the Newton steps of the
full fit, the estimate and its interval (from the converged replicates), and how many positions
sit at the bound theta = 1 in the estimate and in the replicates (why intervals read [1, 1]).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    import pandas as pd

    from counterfactual_ltr import ClickLog, estimate_propensities

    trec = Path(os.environ.get("CLTR_DATA", "../shared/data")) / "real-logs" / "trec-session-2014"
    log = ClickLog.from_events(pd.read_csv(trec / "train.csv"), session="page")
    start = time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = estimate_propensities(log, "pbm", n_bootstrap=args.bootstrap, random_state=args.seed)
    cpu = time.process_time() - start
    ok = model.bootstrap_converged_
    print(f"pbm, {args.bootstrap} replicates: {cpu:.2f} s CPU; converged {int(ok.sum())} of {ok.size}; "
          f"full fit {model._full_fit['n_iter']} Newton steps, converged {model._full_fit['converged']}")
    print("estimate:", np.round(model.relative_, 4).tolist())
    if model.lower_ is not None:
        print("lower:   ", np.round(model.lower_, 4).tolist())
        print("upper:   ", np.round(model.upper_, 4).tolist())
        at_one = np.isclose(model.bootstrap_[ok], 1.0, atol=1e-9, rtol=0)
        print("share of converged replicates with theta_r / theta_1 = 1:", np.round(at_one.mean(0), 2).tolist())
    print("theta at the bound 1 in the full fit:", np.flatnonzero(model._full_fit["theta"] >= 1.0) + 1)
    for w in caught:
        print("warning:", w.category.__name__, str(w.message)[:160])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
