"""Rounds per second of the SLAM perceptron (Alg. 2), max-pair perceptron (Alg. 3) and online ListNet.

    python -m experiments.benchmarks.bench_online [--rounds 50000] [--repeats 3]

Lists of m = 20 documents with d = 20 features, two streams:

* ``separable`` -- ``make_separable_ranking(m=20, d=20, 5 levels)``, the data of Figure 1
  (the perceptrons stop updating after a few hundred rounds);
* ``noisy`` -- ``make_ranking(n_docs=20, n_features=20, 5 levels)``, not separable: the
  perceptrons update on (almost) every round, the worst case for their speed.

The timing is ``click_sim.run_online``'s loop time (``OnlineResult.seconds``: rank,
feedback, update; the vectorised metrics after the loop are excluded); the best of
``--repeats`` runs is reported. Target: >= 20,000 rounds/s for every learner.
"""

from __future__ import annotations

import argparse

TARGET = 20_000


def learners():
    from counterfactual_ltr.online import MaxPairPerceptron, OnlineListNet, RandomRanker, SLAMPerceptron

    return {
        "random (loop overhead)": lambda: RandomRanker(random_state=0),
        "SLAMPerceptron ndcg": lambda: SLAMPerceptron(eta=1.0),
        "SLAMPerceptron ndcg@10": lambda: SLAMPerceptron(eta=1.0, weights="ndcg@k", k=10),
        "SLAMPerceptron ap": lambda: SLAMPerceptron(eta=1.0, weights="ap"),
        "MaxPairPerceptron": lambda: MaxPairPerceptron(eta=1.0),
        "OnlineListNet": lambda: OnlineListNet(eta=0.1),
    }


def streams():
    from click_sim import make_ranking, make_separable_ranking

    return {
        "separable": make_separable_ranking(n_queries=1000, n_docs=20, n_features=20, n_levels=5, random_state=0),
        "noisy": make_ranking(n_queries=1000, n_docs=20, n_features=20, n_levels=5,
                              level_shares=(0.4, 0.25, 0.15, 0.12, 0.08), random_state=0),
    }


def main(argv=None):
    from click_sim import run_online

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=50_000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    out = {}
    for sname, data in streams().items():
        print(f"{sname}: {data.n_queries} queries x 20 docs, d = {data.n_features}, T = {args.rounds}")
        for name, make in learners().items():
            best, updates = float("inf"), None
            for _ in range(args.repeats):
                learner = make()
                res = run_online(learner, data, args.rounds, random_state=0)
                best = min(best, res.seconds)
                updates = getattr(learner, "n_updates_", None)
            rate = args.rounds / best
            out[(sname, name)] = rate
            flag = "" if rate >= TARGET else f"  BELOW TARGET {TARGET:,}"
            upd = "" if updates is None else f"  ({updates:,} updates)"
            print(f"  {name:24s} {rate:10,.0f} rounds/s{upd}{flag}")
    return out


if __name__ == "__main__":
    main()
