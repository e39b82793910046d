"""Monte Carlo of the verdicts on raw logs shaped like a real one: how often is a candidate that is not better called better?

Prints figures; not a test. Each log is drawn by ``click_sim.raw.simulate_raw_events`` (Zipf-like
query frequencies over 1,000 queries, examination ``1 / r`` at 10 shown positions, rankings that
drift between pages by ``drift`` times Gumbel noise), loaded with ``ClickLog.from_events``, joined
to a feature table by id (``f0 = log alpha``, the true score; ``f1`` fixed Gumbel noise per
document), its propensities *estimated* from the log itself (``--method``, never the true ones),
and two candidates scored through the joined table are compared with the logged rankings
(``compare_rankers(..., baseline="logging")``, SNIPS on the DCG of clicks, 95 %):

* ``null``: ``f0 + 1.5 max(drift, 0.3) f1``, a ranker noisier than the logger: truly no better;
* ``better``: ``f0``, the ideal ranking: better than the logger by a margin that grows with drift.

The true difference of each candidate is computed exactly from the simulation's attractiveness and
examination (the logger's expectation over its ranking noise by Monte Carlo, 400 rankings per
query): ``sum_q pi_q (V_c(q) - V_log(q)) / sum_q pi_q A(q)``, with ``V`` the expected DCG of clicks
of the top 10, ``A`` the expected summed attractiveness of the shown documents (SNIPS's
denominator) and ``pi`` the query frequencies. Per setting (drift, and candidates per query: 10,
all shown, or 20 of which 10 are shown) it prints:

* ``null called better``: share of logs where the null candidate (true difference <= 0) is called
  "better" (the issue asks at most 5 %);
* ``covered or cannot tell``: share of (log, candidate) pairs where the interval covers the true
  difference or the verdict is "cannot tell" (at least 90 %);
* ``better called better``: the power for the ideal candidate (meaningful where every candidate
  is shown and the true margin is clear);
* how often each verdict was given, and the mean true differences.

    python -m experiments.benchmarks.bench_verdict_calibration [--logs 40] [--pages 2000] [--method pbm]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def _truth(sim, candidate_scores, drift, n_shown, rng, n_draws=400):
    """Exact true SNIPS-DCG-of-clicks difference of each candidate against the drifting logger."""
    alpha, theta = sim["alpha"], sim["theta"]
    Q, M = alpha.shape
    L = n_shown
    gain = theta / np.log2(np.arange(2, L + 2))             # DCG weight times examination, positions 1..L
    pi = 1.0 / (np.arange(Q) + 10.0)
    pi /= pi.sum()
    # the logger: expectation over its noise, by Monte Carlo per query (vectorised over queries)
    V_log = np.zeros(Q)
    A = np.zeros(Q)
    for _ in range(n_draws // 50):
        noisy = np.log(alpha)[:, None, :] + drift * rng.gumbel(size=(Q, 50, M))
        top = np.argsort(-noisy, axis=2)[:, :, :L]
        a = np.take_along_axis(np.broadcast_to(alpha[:, None, :], noisy.shape), top, axis=2)
        V_log += (a * gain).sum(axis=2).sum(axis=1)
        A += a.sum(axis=2).sum(axis=1)
    V_log /= n_draws
    A /= n_draws
    out = {}
    for name, scores in candidate_scores.items():
        top = np.argsort(-scores, axis=1, kind="stable")[:, :L]
        V_c = (np.take_along_axis(alpha, top, axis=1) * gain).sum(axis=1)
        out[name] = float(pi @ (V_c - V_log) / (pi @ A))
    return out


def one_log(seed, *, pages, drift, n_candidates, method):
    from click_sim.raw import simulate_raw_events
    from counterfactual_ltr import ClickLog, RankingDataset, estimate_propensities
    from counterfactual_ltr.evaluation import compare_rankers

    rng = np.random.default_rng(seed)
    frame, sim = simulate_raw_events(pages, n_shown=10, n_candidates=n_candidates, drift=drift, random_state=seed)
    Q, M = sim["alpha"].shape
    noise = rng.gumbel(size=(Q, M))
    f0 = np.log(sim["alpha"])
    null_scale = 1.5 * max(drift, 0.3)
    scores = {"null": f0 + null_scale * noise, "better": f0}
    truth = _truth(sim, scores, drift, 10, rng)
    table = {"query": np.repeat(sim["query_ids"], M), "doc": sim["doc_ids"].ravel(),
             "f0": f0.ravel(), "f1": noise.ravel()}
    raw = ClickLog.from_events(frame, session="session")
    data = RankingDataset.from_frame(table)
    log = raw.with_data(data, missing="drop_rows")
    weights = {"null": np.array([1.0, null_scale]), "better": np.array([1.0, 0.0])}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        propensity = estimate_propensities(raw, method, n_bootstrap=0, random_state=seed, min_clicks=1)
        found = {}
        for name, w in weights.items():
            c = compare_rankers(log, data.X @ w, baseline="logging", propensity=propensity, n_bootstrap=200,
                                random_state=seed)
            found[name] = (c.verdict, c.ci_low, c.ci_high, truth[name])
    return found


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--logs", type=int, default=40, help="logs per setting")
    p.add_argument("--pages", type=int, default=2000, help="result pages per log")
    p.add_argument("--drifts", type=float, nargs="*", default=[0.1, 0.3, 1.0])
    p.add_argument("--candidates", type=int, nargs="*", default=[10, 20], help="candidates per query (10 shown)")
    p.add_argument("--method", default="pbm", help="propensity estimate (estimate_propensities method)")
    args = p.parse_args(argv)
    print(f"{args.logs} logs per setting, {args.pages} pages, propensities by {args.method!r} from each log, "
          "SNIPS DCG of clicks vs the logged rankings, 95 %; seeds 0..logs-1", flush=True)
    header = ("drift", "cands", "null->better", "covered|cannot", "better->better", "null verdicts",
              "better verdicts", "true null", "true better", "s/log")
    print(" | ".join(header))
    for drift in args.drifts:
        for cands in args.candidates:
            t0 = time.process_time()
            rows = [one_log(seed, pages=args.pages, drift=drift, n_candidates=cands, method=args.method)
                    for seed in range(args.logs)]
            cpu = (time.process_time() - t0) / args.logs
            null_no_better = [r["null"] for r in rows if r["null"][3] <= 0]
            false_better = np.mean([v == "better" for v, *_ in null_no_better]) if null_no_better else float("nan")
            covered = np.mean([v == "cannot tell" or lo <= t <= hi for r in rows for v, lo, hi, t in r.values()])
            power = np.mean([r["better"][0] == "better" for r in rows])

            def counts(name):
                names = ("better", "worse", "no difference found", "cannot tell")
                return "/".join(str(sum(r[name][0] == k for r in rows)) for k in names)

            print(" | ".join([f"{drift:g}", str(cands), f"{false_better:.1%} of {len(null_no_better)}",
                              f"{covered:.1%}", f"{power:.1%}", counts("null"), counts("better"),
                              f"{np.mean([r['null'][3] for r in rows]):+.4f}",
                              f"{np.mean([r['better'][3] for r in rows]):+.4f}", f"{cpu:.1f}"]), flush=True)
    print("verdict counts: better/worse/no difference found/cannot tell")


if __name__ == "__main__":
    main()
