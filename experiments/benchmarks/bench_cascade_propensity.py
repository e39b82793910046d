"""Cascade clicks on MQ2008: SVM PropDCG with position-based against cascade-aware propensities.

    python -m experiments.benchmarks.bench_cascade_propensity [--seeds 5] [--passes 5]

The production ranker (a Ranking SVM on 1 % of MQ2008 Fold1's training queries, as in Agarwal et
al. 2019) shows the top 10 of every training query ``--passes`` times; users click as the DBN
says (``click_sim.cascade_clicks``: attractiveness 0.05, 0.5, 0.9 for labels 0, 1, 2,
satisfaction 0.6 after a click, perseverance 0.9). Per seed (a new log) SVM PropDCG is fitted
with the position-based propensity ``1 / r`` (eta = 1) and with the cascade-aware propensity of
a DBN fitted to the same log (``estimate_propensities(log, "dbn")``, Vardasbi et al. 2020);
NDCG@10 on Fold1's test queries, paired over seeds (Student t on the differences).
Trained on MQ2008 only (MQ2007 is not available here).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def cascade_log(train, logger_scores, passes, seed):
    """A log of the logger's top 10 with DBN clicks (alpha by label, sigma 0.6, gamma 0.9)."""
    from click_sim import PositionBasedClickModel, simulate_clicks
    from click_sim.cascade import cascade_clicks
    from counterfactual_ltr import ClickLog

    shown = simulate_clicks(train, logger_scores, PositionBasedClickModel(eta=1.0), n_passes=passes,
                            random_state=seed, max_shown=10)
    length = np.diff(shown.session_offsets)
    page = np.repeat(np.arange(len(length)), length)
    col = np.arange(shown.n_items) - shown.session_offsets[:-1][page]
    alpha = np.zeros((len(length), int(length.max())))
    alpha[page, col] = np.array([0.05, 0.5, 0.9])[np.minimum(train.y[shown.docs], 2)]
    clicks = cascade_clicks("dbn", alpha, sigma=np.full_like(alpha, 0.6), gamma=0.9, random_state=seed)
    return ClickLog(train, shown.session_query, shown.session_offsets, shown.docs, clicks[page, col])


def main(argv=None) -> int:
    from scipy import stats

    from click_sim import load_letor, train_production_ranker
    from counterfactual_ltr import estimate_propensities
    from counterfactual_ltr.estimators import SVMPropDCG
    from experiments._common import data_missing, shared_data_dir

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--passes", type=int, default=5)
    args = p.parse_args(argv)
    fold = shared_data_dir() / "MQ2008" / "Fold1"
    if not (fold / "train.txt").is_file():
        raise data_missing("MQ2008/Fold1")
    train, test = load_letor(fold / "train.txt"), load_letor(fold / "test.txt")
    logger = train_production_ranker(train, fraction=0.01, random_state=0).predict(train.X)
    rows = []
    for seed in range(args.seeds):
        start = time.process_time()
        log = cascade_log(train, logger, args.passes, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cascade = estimate_propensities(log, "dbn")
            position = SVMPropDCG(propensity=1.0).fit(log).score(test)
            aware = SVMPropDCG(propensity=cascade).fit(log).score(test)
        rows.append((position, aware))
        print(f"seed {seed}: {len(log)} sessions, {log.n_clicks} clicks; NDCG@10 position-based {position:.4f}, "
              f"cascade-aware {aware:.4f} ({time.process_time() - start:.1f} s)", flush=True)
    a = np.asarray(rows)
    diff = a[:, 1] - a[:, 0]
    t = stats.ttest_rel(a[:, 1], a[:, 0]) if len(a) > 1 else None
    print(f"mean NDCG@10: position-based {a[:, 0].mean():.4f}, cascade-aware {a[:, 1].mean():.4f}; "
          f"difference {diff.mean():+.4f} (sd {diff.std(ddof=1) if len(a) > 1 else 0:.4f})"
          + (f", paired t p = {t.pvalue:.3g}" if t is not None else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
