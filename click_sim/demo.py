"""The README's demo: simulate clicks, train the counterfactual SVMs, read the IPS/SNIPS report.

Run ``python -m click_sim.demo [--out REPORT.html]``. Built-in synthetic data, so it needs no
download; takes well under a minute. It prints the verdicts against the logging policy, why
"no difference found" can go with a real gain, and the test ``NDCG@10`` of the rankers chosen by
SNIPS; the full report (estimates, intervals, diagnostics) is written as HTML, with figures when
matplotlib is installed (a plain ``pip install .`` does not install it; the report and this demo
then say so).
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import numpy as np


def main(seed: int = 0, out: str = "demo_report.html") -> None:
    """Run the demo with ``seed``: print the verdicts and the chosen rankers' test ``NDCG@10``; write the report
    to ``out``."""
    from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks, train_production_ranker
    from counterfactual_ltr.estimators import RankSVM, SVMPropDCG, SVMPropRank
    from counterfactual_ltr.evaluation import validation_report
    from counterfactual_ltr.metrics import ndcg

    started = time.time()
    data = make_ranking(n_queries=600, n_docs=(10, 40), n_features=20, noise=0.5, random_state=seed)
    rng = np.random.default_rng(seed)
    split = rng.permutation(data.n_queries)
    train, vali, test = (data.subset(np.sort(split[a:b])) for a, b in ((0, 300), (300, 450), (450, 600)))
    clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    production = train_production_ranker(train, fraction=0.02, random_state=seed)
    train_log = simulate_clicks(train, production, clicks, n_passes=20, random_state=seed)
    vali_log = simulate_clicks(vali, production, clicks, n_passes=20, random_state=seed + 1)
    print(f"data: {data}\nclick model: {clicks}\ntraining log: {train_log}\n")

    grid = [0.1, 1.0, 10.0, 100.0]
    candidates = {"production": production}
    for name, make in (("SVM PropRank", lambda C: SVMPropRank(C=C)), ("SVM PropDCG", lambda C: SVMPropDCG(C=C)),
                       ("naive SVM Rank", lambda C: RankSVM(C=C))):
        for C in grid:
            candidates[f"{name} C={C:g}"] = make(C).fit(train_log)
    # 13 candidates: Bonferroni puts each interval at 99.6 %, whose bootstrap ends need 2,600 replicates
    report = validation_report(candidates, vali_log, metrics=("dcg",), pair_bootstrap=2600, random_state=seed,
                               true_relevance=np.where(vali.relevance() == 1, 1.0, 0.1))
    Path(out).write_text(report.to_html())
    comparisons = report.comparisons["dcg"]
    print(f"Validation log: {vali_log.n_sessions:,} sessions over {vali.n_queries} queries. Each candidate against "
          f"the logging policy (dcg of clicks, SNIPS, {report.confidence:.0%} intervals, Bonferroni over "
          f"{len(comparisons)}):")
    for c in comparisons:
        low, high = c.improvement_interval
        print(f"  {c.candidate:24s} {c.improvement:+.4f} [{low:+.4f}, {high:+.4f}]  {c.verdict}")
    best = max(comparisons, key=lambda c: c.improvement)
    print(f"\nWhy \"no difference found\" can go with a real gain: the best estimate, {best.candidate} "
          f"({best.improvement:+.4f}), has a standard error of {best.stderr:.4f} over {best.n_queries} queries; a true "
          f"gain of that size is found with 80% power on about {best.log_size_needed(0.8):.0f} times as many queries "
          f"(Comparison.log_size_needed). The test NDCG@10 below shows the gain this log is too small to confirm.")
    print(report_line(out, importlib.util.find_spec("matplotlib") is not None) + "\n")

    print("Test NDCG@10 (full labels, never used for training or selection):")
    chosen = {"production": production}
    for name in ("SVM PropRank", "SVM PropDCG", "naive SVM Rank"):
        mine = {k: v for k, v in candidates.items() if k.startswith(name)}
        best = max(mine, key=lambda k: next(r for r in report.rows if r["name"] == k)["dcg"]["snips"].value)
        chosen[best] = mine[best]
    chosen["skyline RankSVM (full labels)"] = RankSVM(C=1.0).fit(train.X, train.y, qid=train.qid)
    for name, model in chosen.items():
        print(f"  {name:32s} {ndcg(model.predict(test.X), test.y, test.query_offsets, k=10):.4f}")
    print(f"\n(done in {time.time() - started:.1f} s)")


def report_line(out: str, figures: bool) -> str:
    """The line naming the report file and what it holds: figures only where matplotlib can draw them."""
    if figures:
        return f"Full report (estimates, intervals, diagnostics, figures): {out}"
    return (f"Full report (estimates, intervals, diagnostics): {out}; no figures, as matplotlib is not installed "
            "(pip install matplotlib, or '.[experiments]', adds them)")


def cli(argv=None) -> None:
    """Parse ``--seed`` (and ``--help``) and run :func:`main`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m click_sim.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="random seed of the data, split and clicks (default 0)")
    parser.add_argument("--out", default="demo_report.html", help="HTML report to write (default demo_report.html)")
    args = parser.parse_args(argv)
    main(args.seed, args.out)


if __name__ == "__main__":
    cli()
