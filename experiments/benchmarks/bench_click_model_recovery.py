"""Parameter recovery of every cascade-family click model at the issue's 100,000 pages.

    python -m experiments.benchmarks.bench_click_model_recovery [--sessions 100000] [--seed 0]

For each of CM, UBM, DCM, DBN and SDBN: simulate a raw log from the model
(:func:`click_sim.cascade.simulate_cascade_events`, 1,000 queries with Zipf-like frequencies, 10
results, drifting rankings), fit the same model with ``prior_strength=0`` (DCM and SDBN by EM,
``method="em"``: their default closed-form counts assume a stop at the last click and are biased
on these clicks) and print the errors
against the simulated truth: mean and 95th-percentile absolute error of the attractiveness of
(query, document) pairs shown at least 100 times, of satisfaction of pairs clicked at least 100
times (DBN, SDBN), and the largest error of the position parameters (DBN ``gamma``; DCM ``lambda``
at positions 1-9; UBM ``gamma[r, r'] / gamma[1, 0]`` over positions 1-5 and last clicks 0-2, the
ratio because clicks pin down only ``alpha gamma``), with the fit time (CPU s) and EM iterations.
The unit tests check the same at 20,000 pages (``tests/test_cascade_click_models.py``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    from click_sim.cascade import simulate_cascade_events, true_parameters
    from counterfactual_ltr import ClickLog
    from counterfactual_ltr.click_models import (CascadeModel, DependentClickModel, DynamicBayesianNetworkModel,
                                                 SimplifiedDBNModel, UserBrowsingModel)

    models = {"cm": CascadeModel, "ubm": UserBrowsingModel, "dcm": DependentClickModel,
              "dbn": DynamicBayesianNetworkModel, "sdbn": SimplifiedDBNModel}
    print(f"{args.sessions} simulated pages per model, 1000 queries, 10 results, seed {args.seed}")
    for name, cls in models.items():
        frame, truth = simulate_cascade_events(args.sessions, name, random_state=args.seed)
        log = ClickLog.from_events(frame, session="session")
        start = time.process_time()
        # DCM and SDBN by EM: their closed-form counts assume a stop at the last click and are biased here
        model = cls(prior_strength=0.0, **({"method": "em"} if name in ("dcm", "sdbn") else {})).fit(log)
        took = time.process_time() - start
        true = true_parameters(log, truth)
        many = np.bincount(log.docs, minlength=log.n_rows) >= 100
        if not many.any():
            print(f"{name:5s}: no pair shown 100 times; raise --sessions")
            continue
        err = np.abs(model.alpha_ - true["alpha"])[many]
        line = (f"{name:5s} fit {took:6.2f} s, {model.n_iter_:4d} iterations | alpha ({many.sum()} pairs): "
                f"mean {err.mean():.4f}, 95% {np.quantile(err, 0.95):.4f}")
        if name in ("dbn", "sdbn") and not (np.bincount(log.docs, weights=log.clicks) >= 100).any():
            line += " | sigma: no pair clicked 100 times (more --sessions)"
        elif name in ("dbn", "sdbn"):
            clicked = np.bincount(log.docs, weights=log.clicks, minlength=log.n_rows) >= 100
            e = np.abs(model.sigma_ - true["sigma"])[clicked]
            line += f" | sigma ({clicked.sum()} pairs): mean {e.mean():.4f}, 95% {np.quantile(e, 0.95):.4f}"
        if name == "dbn":
            line += f" | gamma {model.gamma_:.4f} (true {truth['gamma']})"
        if name == "dcm":
            line += f" | lambda max error {np.abs(model.lambda_[:9] - truth['lam'][:9]).max():.4f}"
        if name == "ubm":
            rel = model.gamma_ / model.gamma_[0, 0]
            cells = np.tril(np.ones((5, 3), dtype=bool), 0)
            line += (f" | gamma/gamma[1,0] max error {np.abs(rel[:5, :3] - truth['gamma'][:5, :3])[cells].max():.4f}"
                     f" (gamma[1,0] = {model.gamma_[0, 0]:.4f})")
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
