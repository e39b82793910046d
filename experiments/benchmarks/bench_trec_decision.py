"""The shared TREC Session log end to end: estimate, fit on a feature table, evaluate, and check the verdict against labels.

Prints figures; not a test. The log has no features, so a feature table is built from what a
search engine knows of each shown (query, document) before any click: how high the logger placed
it on average, how often and on what share of the query's pages it was shown
(``counterfactual_ltr.logs.impression_features``; from every file's impressions, never from
clicks). Then the default flow of the guide (``docs/guide/raw-log-decision.md``):

1. propensities estimated on ``train.csv`` (``--method``; default ``auto``);
2. ``SVMPropDCG`` fitted on the joined training log under that estimate, ``C`` and the tempering
   of the estimate's weakly identified positions chosen by 3-fold CV SNIPS
   (``model_selection.tempered_grid_search``; the scorer of the estimate scores the improvement
   over the logged rankings at its replicates' 10 % quantile); ``--C`` fixes ``C`` and
   ``--tempering 0`` turns tempering off, as ``cltr fit`` does;
3. ``compare_rankers(test, model, baseline="logging")`` on ``test.csv`` (SNIPS, DCG of clicks,
   95 %, the propensity's error propagated): the verdict and its reasons;
4. the check: on the pages of ``labels.csv`` (graded labels), NDCG@10 of the model's order against
   the logged order. A verdict of "better" or "worse" must agree in direction with the labels;
   "cannot tell" must give a reason.

    python -m experiments.benchmarks.bench_trec_decision [--method auto] [--model auto] [--C 1] [--tempering 0]
        [--data PATH]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def features_of(frames):
    """Per (query, document): the impression features of ``counterfactual_ltr.logs.impression_features``."""
    from counterfactual_ltr.logs import impression_features

    return impression_features(*frames, page="page")


def labelled_ndcg(labels, data, scores, k=10):
    """Mean NDCG@k over the labelled pages: the model's order of each page's documents against the logged order."""
    key = dict(zip(zip(data.query_keys[data.query_index], data.doc_keys), scores))
    model_ndcg, logged_ndcg = [], []
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    for _, page in labels.groupby(["session", "page"]):
        gains = 2.0 ** page["label"].to_numpy(dtype=float) - 1
        ideal = np.sort(gains)[::-1][:k] @ discount[:min(k, len(gains))]
        if ideal <= 0:
            continue
        logged = gains[np.argsort(page["position"].to_numpy(), kind="stable")][:k]
        s = np.array([key.get((q, d), -np.inf) for q, d in zip(page["query"], page["doc"])])
        ours = gains[np.argsort(-s, kind="stable")][:k]
        model_ndcg.append(ours @ discount[:len(ours)] / ideal)
        logged_ndcg.append(logged @ discount[:len(logged)] / ideal)
    return float(np.mean(model_ndcg)), float(np.mean(logged_ndcg)), len(model_ndcg)


def main(argv=None):
    import pandas as pd

    from counterfactual_ltr import ClickLog, RankingDataset, SVMPropDCG, estimate_propensities, snips_scorer
    from counterfactual_ltr.evaluation import compare_rankers
    from counterfactual_ltr.model_selection import TEMPERING, tempered_grid_search
    from counterfactual_ltr.learner_choice import learner_candidates, learner_lines, select_learner

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--method", default="auto")
    p.add_argument("--model", default="svm-propdcg", choices=("svm-propdcg", "auto"),
                   help="auto: counterfactual_ltr.select_learner over its default learners (cltr fit --model auto)")
    p.add_argument("--C", type=float, default=None, help="fix C (default: chosen by CV from 0.1, 1, 10, 100)")
    p.add_argument("--tempering", type=float, nargs="*", default=None,
                   help="strengths to choose from (default: 0 0.5 1 for an estimate with an interval)")
    p.add_argument("--data", type=Path, default=Path(os.environ.get("CLTR_DATA", ROOT.parent / "shared" / "data")))
    args = p.parse_args(argv)
    trec = args.data / "real-logs" / "trec-session-2014"
    frames = {name: pd.read_csv(trec / f"{name}.csv", dtype={"query": str, "doc": str})
              for name in ("train", "test", "labels")}
    table = features_of([frames[name] for name in ("train", "test", "labels")])
    data = RankingDataset.from_frame(table, query="query", doc="doc")
    t0 = time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train = ClickLog.from_events(frames["train"], session="page")
        test = ClickLog.from_events(frames["test"], session="page")
        propensity = estimate_propensities(train, args.method, n_bootstrap=200, random_state=0)
        joined_train = train.with_data(data, missing="drop_sessions")
        strengths = args.tempering if args.tempering is not None else (
            TEMPERING if getattr(propensity, "upper_", None) is not None else [0.0])
        grid = [args.C] if args.C is not None else [0.1, 1, 10, 100]
        scorer = snips_scorer("dcg", propensity=propensity)
        if args.model == "auto":
            model = select_learner(joined_train, learner_candidates(propensity=propensity, C=grid), cv=3,
                                   scoring=scorer, scoring_name="snips-dcg", strengths=strengths)
            print("\n".join(learner_lines(model.selection_)))
        else:
            model = tempered_grid_search(SVMPropDCG(propensity=propensity), joined_train, "C", grid,
                                         strengths=strengths, cv=3, scoring=scorer, extend=args.C is None)
        joined = test.with_data(data, missing="drop_sessions")
        c = compare_rankers(joined, model, baseline="logging", propensity=propensity, random_state=0)
    for w in caught:                     # pages that show a document twice are dropped by the join, which says so
        if "twice" in str(w.message):
            print(f"warning: {w.message}")
    rises = propensity.rises_at_
    print(f"TREC Session 2014: {train.n_sessions} training pages, {joined.n_sessions} test pages; "
          f"propensity {args.method!r}: {np.round(propensity.relative_, 3).tolist()} "
          f"({'non-increasing' if not rises else f'rises at positions {rises}'})")
    tempering = model.selection_.get("tempering", {}).get("chosen", 0.0)
    print(f"auto chose {getattr(propensity, 'auto_choice_', args.method)!r}: "
          f"{getattr(propensity, 'auto_reason_', '')}" if args.method == "auto" else "")
    print(f"interval: lower {np.round(propensity.lower_, 3).tolist()}, upper {np.round(propensity.upper_, 3).tolist()}"
          if getattr(propensity, "lower_", None) is not None else "no interval")
    names = ", ".join(c for c in table.columns if c not in ("query", "doc"))
    print(f"model: {model!r} (tempering {tempering:g}) on {data.n_features} features ({names})"
          + (f"; weights {np.round(model.coef_, 3).tolist()}" if hasattr(model, "coef_") else ""))
    print(c.summary())
    print(f"verdict: {c.verdict}; reasons: {'; '.join(c.reasons)}")
    # The propagation's cost where it re-estimates on every resample: an estimate made on the joined training
    # log itself, compared on that log (200 replicates).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same = estimate_propensities(joined_train, args.method, n_bootstrap=200, random_state=0)
        start = time.process_time()
        own = compare_rankers(joined_train, model, baseline="logging", propensity=same, n_bootstrap=200,
                              random_state=0)
    print(f"on the training log itself ({own.propensity_uncertainty}): {own.difference:+.4f} "
          f"[{own.ci_low:+.4f}, {own.ci_high:+.4f}], {time.process_time() - start:.1f} s CPU")
    ours, logged, n = labelled_ndcg(frames["labels"], data, model.predict(data))
    print(f"labels: NDCG@10 on {n} labelled pages: model {ours:.4f}, logged order {logged:.4f} "
          f"({'model better' if ours > logged else 'logged order better'})")
    agree = (c.verdict == "cannot tell" or c.verdict == "no difference found"
             or (c.verdict == "better") == (ours > logged))
    print(f"verdict consistent with the labels: {'yes' if agree else 'NO'}; CPU {time.process_time() - t0:.1f} s; "
          f"{len(caught)} warnings on the way")


if __name__ == "__main__":
    main()
