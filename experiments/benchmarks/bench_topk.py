"""Rounds per second of the top-k feedback learners on MQ2008-sized queries.

    python -m experiments.benchmarks.bench_topk [--rounds 50000] [--synthetic]

Uses all of MQ2008 (S1-S5, ~20 documents and 46 features per query) when the
shared data is present, else synthetic lists of the same size. The timing is
``click_sim.run_online``'s own loop time (``OnlineResult.seconds``: rank,
feedback, update; the vectorised metrics after the loop are excluded).
"""

from __future__ import annotations

import argparse

import numpy as np

from counterfactual_ltr.online import RandomRanker, TopKFeedbackRanker

from experiments._common import mq2008_dir


def mq2008_all():
    """All MQ2008 queries (S1-S5) as one RankingDataset, or None."""
    from click_sim import RankingDataset, load_letor

    root = mq2008_dir()
    if root is None or not all((root / f"S{i}.txt").exists() for i in range(1, 6)):
        return None
    parts = [load_letor(root / f"S{i}.txt", n_features=46) for i in range(1, 6)]
    return RankingDataset(np.vstack([p.X for p in parts]), np.concatenate([p.y for p in parts]),
                          np.concatenate([p.qid for p in parts]), name="MQ2008 S1-S5")


def bench_data(synthetic: bool = False):
    data = None if synthetic else mq2008_all()
    if data is None:
        from click_sim import make_ranking

        data = make_ranking(n_queries=800, n_docs=(6, 34), n_features=46, random_state=0)
    return data


def time_rounds(learner, data, T: int, seed: int = 0) -> float:
    """Seconds spent in the online loop for ``T`` rounds (run_online's timing)."""
    from click_sim import run_online

    return run_online(learner, data, T, random_state=seed).seconds


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=50_000)
    p.add_argument("--synthetic", action="store_true", help="synthetic lists instead of MQ2008")
    args = p.parse_args(argv)
    data = bench_data(args.synthetic)
    lengths = np.diff(data.query_offsets)
    print(f"data: {getattr(data, 'name', None) or 'synthetic'}: {data.n_queries} queries, "
          f"{lengths.mean():.1f} docs/query on average, {data.n_features} features; T = {args.rounds}")
    learners = {f"{s} (k={TopKFeedbackRanker(s).feedback_k})": TopKFeedbackRanker(s, eta=1e-3, gamma=0.05, random_state=0)
                for s in ("squared", "ranksvm", "kl_listnet", "smooth_dcg")}
    learners["squared (k=3, general path)"] = TopKFeedbackRanker("squared", k=3, eta=1e-3, gamma=0.05, random_state=0)
    learners["ranksvm (k=3, general path)"] = TopKFeedbackRanker("ranksvm", k=3, eta=1e-3, gamma=0.05, random_state=0)
    learners["random (reference)"] = RandomRanker(random_state=0)
    for name, learner in learners.items():
        time_rounds(learner, data, 2000)  # warm-up
        seconds = time_rounds(learner, data, args.rounds)
        print(f"{name:32s} {args.rounds / seconds:10,.0f} rounds/s")


if __name__ == "__main__":
    main()
