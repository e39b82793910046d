"""Monotone (non-increasing) pbm and harvest curves against the plain ones, by held-out click perplexity.

    python -m experiments.benchmarks.bench_monotone_default [--seeds 3] [--sessions 5000]

The measurement behind the default of ``monotone`` in ``estimate_propensities(log, "pbm" |
"harvest")`` (``MONOTONE_DEFAULT``: on where the monotone curve fits held-out clicks at least as
well). Every log is scored as ``method="auto"`` scores its candidates: 3 folds within
queries (seeded by the log's seed), theta kept at the candidate's estimate, attractiveness fitted
on the training folds, perplexity of the held-out clicks (lower is better). Logs:

* the shared TREC Session 2014 log (``$CLTR_DATA/real-logs/trec-session-2014/train.csv``, pages by
  the ``page`` column), if present;
* simulated raw logs (:func:`click_sim.raw.simulate_raw_events`, ``--sessions`` pages over 300
  queries, theta = (1/r)^eta) for eta 0.5, 1 and 2 and ranking drift 0.1 (weakly identified)
  and 1.0, ``--seeds`` seeds each.

Prints, per log, the plain and monotone perplexities of both methods and their difference
(monotone minus plain: negative or zero is at least as good), then how often monotone was at
least as good, and the largest loss. ``inf`` marks a method that could not be estimated on some
fold (too few clicks at a position to estimate it).
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

import numpy as np


def _scores(log, seed):
    from counterfactual_ltr import estimate_propensities

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = estimate_propensities(log, "auto", n_bootstrap=0, random_state=seed)
    return {row["candidate"]: row["perplexity"] for row in model.auto_table_}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--sessions", type=int, default=5000)
    args = p.parse_args(argv)
    import pandas as pd

    from click_sim.raw import simulate_raw_events
    from counterfactual_ltr import ClickLog

    logs = []
    trec = Path(os.environ.get("CLTR_DATA", "../shared/data")) / "real-logs" / "trec-session-2014" / "train.csv"
    if trec.exists():
        logs.append(("TREC train", lambda: ClickLog.from_events(pd.read_csv(trec), session="page"), 0))
    for eta in (0.5, 1.0, 2.0):
        for drift in (0.1, 1.0):
            for seed in range(args.seeds):
                def make(eta=eta, drift=drift, seed=seed):
                    theta = (1.0 / np.arange(1, 11)) ** eta
                    frame, _ = simulate_raw_events(args.sessions, n_queries=300, theta=theta, drift=drift,
                                                   random_state=seed)
                    return ClickLog.from_events(frame, session="session")
                logs.append((f"eta {eta} drift {drift} seed {seed}", make, seed))
    print(f"{'log':<28} {'pbm':>9} {'pbm mono':>9} {'diff':>9} {'harvest':>9} {'harv mono':>9} {'diff':>9}")
    diffs = {"pbm": [], "harvest": []}
    for name, make, seed in logs:
        s = _scores(make(), seed)
        d_pbm, d_harvest = s["pbm monotone"] - s["pbm"], s["harvest monotone"] - s["harvest"]
        diffs["pbm"].append(d_pbm)
        diffs["harvest"].append(d_harvest)
        print(f"{name:<28} {s['pbm']:9.5f} {s['pbm monotone']:9.5f} {d_pbm:+9.5f} {s['harvest']:9.5f} "
              f"{s['harvest monotone']:9.5f} {d_harvest:+9.5f}")
    for method, d in diffs.items():
        d = np.array(d)
        d = d[np.isfinite(d)]
        print(f"{method}: monotone at least as good on {int((d <= 1e-9).sum())} of {d.size} logs; "
              f"largest loss {max(d.max(), 0.0):.5f}, mean difference {d.mean():+.5f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
