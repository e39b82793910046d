"""Choosing the learner by the log, measured: ``select_learner`` against every single learner and LightGBM.

A run is (data set, fold or draw, seed, passes): a production RankSVM on 1 % of the training queries,
a training log of ``--passes`` passes (eta 1, eps- 0.1, clicks on label >= 2:
``experiments._cltr.simulate_run``), and on that log

* ``counterfactual_ltr.select_learner`` with its defaults (RankSVM on clicks, SVM PropRank and SVM
  PropDCG over C in 0.1 .. 100 extended at a binding edge, GBDTPropDCG over ``GBDT_GRID``; the same
  three folds of queries for all; ``snips_scorer("dcg")`` under eta = 1), ``refit=False``: every
  learner's best candidate and the table of the choice;
* every learner's best candidate refitted on the whole log: the single learners' test scores;
* ``auto``: the test score of the learner ``choose_learner`` keeps at the library's default (the best
  cross-validated mean) and, from the same table, at ``noise`` 0.5 and 1 (a cheaper learner within
  that many standard errors of the best);
* ``lgb_position``: LightGBM's lambdarank on the logged sessions with clicks as labels and
  ``Dataset(position=...)``, tuned over ``GBDT_GRID`` (without the objective) by the same SNIPS on
  the same folds (``bench_tree_recipe.LambdaRankOnClicks``).

Test metric: avg DCG of the relevant (label >= 2) test documents (``experiments._cltr.test_metrics``).
Data: ``mq2008`` (``--folds`` x seeds), ``mslr`` (the MSLR-WEB10K sample of ``experiments._mslr``,
43 training and 43 test queries, log-scaled features; seed = production draw and clicks), ``synthetic``
(the non-linear set of ``experiments.papers.trees``, draw = seed).

Printed per (data set, passes): every arm's mean, then paired differences (mean +- standard error,
two-sided paired t-test, wins) of ``auto`` against ``lgb_position``, against the single learner with
the best mean test score in hindsight, and against every learner; the share of runs in which each
learner was chosen; and the CPU time of the selection over that of its dearest learner's search.

    python -m experiments.benchmarks.bench_learner_choice [--data mq2008 mslr synthetic] [--passes 30 100]
        [--seeds 4] [--first-seed 0] [--folds 1 2 3 4 5] [--jobs 2] [--no-lgb] [--cv 3] [--eta 1]
        [--queries N] [--out DIR]
    python -m experiments.benchmarks.bench_learner_choice --merge part1.json part2.json
"""

from __future__ import annotations

import time
import warnings

import numpy as np

NOISES = (0.0, 0.5, 1.0)


def _limit_threads():
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)
    except ImportError:       # pragma: no cover
        pass


def load(dataset: str, fold: int, seed: int, quick: bool = False):
    """``(train, test)`` of a run."""
    if dataset == "mq2008":
        from experiments._common import load_fold

        train, _, test = load_fold(fold)
        return train, test
    if dataset == "mslr":
        from experiments._mslr import mslr_or_exit

        return mslr_or_exit()
    from experiments.papers.trees import split_synthetic

    train, _, test = split_synthetic(seed, quick)
    return train, test


def one_run(task) -> dict:
    """One (data set, fold, seed, passes): the selection, every learner's test score, LightGBM's."""
    dataset, fold, seed, passes, with_lgb, quick, cv, eta, queries = task
    from sklearn.base import clone

    from click_sim import train_production_ranker
    from counterfactual_ltr import snips_scorer
    from counterfactual_ltr.estimators import GBDT_GRID
    from counterfactual_ltr.learner_choice import kept_at_noise, learner_candidates, select_learner
    from experiments import _cltr
    from experiments.benchmarks.bench_tree_recipe import LambdaRankOnClicks, tuned_test_score

    train, test = load(dataset, fold, seed, quick)
    if queries and queries < train.n_queries:      # a few-query world: a seeded sample of the training queries
        train = train.subset(np.sort(np.random.default_rng(seed).choice(train.n_queries, queries, replace=False)))
    production = train_production_ranker(train, fraction=0.01, random_state=seed)
    _, log, _ = _cltr.simulate_run(train, train, seed=seed, n_passes=passes, production=production, eta=eta,
                                   relevance_threshold=2)
    test_dcg = lambda model: _cltr.test_metrics(model.predict(test.X), test, 2)["avg_dcg"]   # noqa: E731
    run = {"dataset": dataset, "fold": fold, "seed": seed, "passes": passes, "eta": eta, "n_train_queries": train.n_queries,
           "n_train_clicks": int(log.n_clicks),
           "production": test_dcg(production)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        started = time.process_time()
        fits = select_learner(log, learner_candidates(propensity=eta, random_state=seed),
                              scoring=snips_scorer("dcg", propensity=eta), scoring_name="snips-dcg", refit=False, cv=cv)
        run["selection_seconds"] = time.process_time() - started
        table = next(iter(fits.values())).selection_["learners"]
        run["table"] = {k: table[k] for k in ("names", "best_scores", "leads", "lead_errors", "chosen_params",
                                              "seconds", "chosen", "best", "failed", "noise")}
        run["test"] = {name: test_dcg(clone(model).fit(log)) for name, model in fits.items()}
        names = table["names"]
        for noise in NOISES:        # choose_learner's rule on the recorded leads (no refit needed)
            chosen = kept_at_noise(names.index(table["best"]), table["leads"], table["lead_errors"], noise)
            run[f"auto_noise{noise:g}"] = run["test"][names[chosen]]
        run["auto"] = run["test"][table["chosen"]]
        if run[f"auto_noise{table['noise']:g}"] != run["auto"]:
            raise AssertionError("the recorded leads do not reproduce select_learner's choice")
        if with_lgb:
            started = time.process_time()
            lgb_grid = {k: v for k, v in GBDT_GRID.items() if k != "objective"}
            run["lgb_position"], run["lgb_chosen"] = tuned_test_score(LambdaRankOnClicks(position=True, random_state=seed),
                                                                      lgb_grid, log, test, 2, eta)
            run["lgb_seconds"] = time.process_time() - started
    print(f"{dataset} {'fold ' + str(fold) + ' ' if dataset == 'mq2008' else ''}seed {seed}, {passes} passes: auto "
          f"{run['auto']:.4f} ({table['chosen']}), " + ", ".join(f"{k} {v:.4f}" for k, v in run["test"].items())
          + (f", lgb_position {run['lgb_position']:.4f}" if with_lgb else "")
          + f", production {run['production']:.4f}; selection {run['selection_seconds']:.0f} s CPU", flush=True)
    return run


def summarise(runs: list) -> dict:
    """Per ``"<data set>, <passes> passes"``: means, paired differences of auto, choices and costs."""
    from experiments import _cltr

    out = {}
    for dataset, passes in sorted({(r["dataset"], r["passes"]) for r in runs}):
        rs = [r for r in runs if r["dataset"] == dataset and r["passes"] == passes]
        learners = [n for n in rs[0]["test"] if all(n in r["test"] for r in rs)]
        value = lambda r, arm: r["test"][arm] if arm in learners else r[arm]        # noqa: E731
        arms = ["auto", *[f"auto_noise{n:g}" for n in NOISES], *learners,
                *(["lgb_position"] if all("lgb_position" in r for r in rs) else []), "production"]
        means = {a: float(np.mean([value(r, a) for r in rs])) for a in arms}
        hindsight = max(learners, key=lambda n: means[n])
        oracle = [max(r["test"][n] for n in learners) for r in rs]
        paired = {f"auto - {b}": _cltr.paired([r["auto"] for r in rs], [value(r, b) for r in rs])
                  for b in arms if b not in ("auto", "production")}
        paired["auto - best single learner in hindsight"] = dict(paired[f"auto - {hindsight}"], learner=hindsight)
        paired["auto - per-run oracle"] = _cltr.paired([r["auto"] for r in rs], oracle)
        if "lgb_position" in arms:
            paired[f"{hindsight} - lgb_position"] = _cltr.paired([value(r, hindsight) for r in rs],
                                                                 [r["lgb_position"] for r in rs])
            paired["gbdt-propdcg - lgb_position"] = _cltr.paired([r["test"]["gbdt-propdcg"] for r in rs],
                                                                 [r["lgb_position"] for r in rs])
        ratio = [r["selection_seconds"] / max(r["table"]["seconds"]) for r in rs]
        out[f"{dataset}, {passes} passes"] = {
            "dataset": dataset, "passes": passes, "n_runs": len(rs), "means": means, "hindsight": hindsight,
            "oracle_mean": float(np.mean(oracle)), "paired": paired,
            "chosen": {n: sum(r["table"]["chosen"] == n for r in rs) for n in learners},
            "best_cv": {n: sum(r["table"]["best"] == n for r in rs) for n in learners},
            "selection_over_dearest": {"mean": float(np.mean(ratio)), "max": float(np.max(ratio))},
            "mean_selection_seconds": float(np.mean([r["selection_seconds"] for r in rs]))}
    return out


def main(argv=None):
    from experiments._common import merge_run_parts, parser, save_results
    from experiments._readme import fmt

    p = parser(__doc__)
    p.add_argument("--data", nargs="+", default=["mq2008", "mslr", "synthetic"], choices=["mq2008", "mslr", "synthetic"])
    p.add_argument("--passes", type=int, nargs="+", default=[30, 100])
    p.add_argument("--folds", type=int, nargs="+", default=[1, 2, 3, 4, 5], help="MQ2008 folds (every seed on each)")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, help="processes (over runs)")
    p.add_argument("--cv", type=int, default=3, help="folds of select_learner (LightGBM is tuned on 3)")
    p.add_argument("--eta", type=float, default=1.0, help="examination (1/rank)^eta of the clicks, known to every arm")
    p.add_argument("--queries", type=int, default=None, help="a seeded sample of this many training queries")
    p.add_argument("--no-lgb", action="store_true", help="leave out LightGBM's lambdarank (the dearest arm)")
    p.add_argument("--merge", nargs="+", default=None, help="JSON files of runs to merge into one result")
    args = p.parse_args(argv)
    started = time.time()
    if args.merge:
        _, runs, provenance = merge_run_parts(args.merge, (), lambda r, part: (r["dataset"], r["fold"], r["seed"],
                                                                                r["passes"]))
        settings = {"merged": True, **provenance}
        started -= sum(t or 0 for t in provenance["seconds_of_parts"])
    else:
        seeds = list(range(args.first_seed, args.first_seed + (1 if args.quick else (args.seeds or 4))))
        folds = args.folds[:1] if args.quick else args.folds
        tasks = [(d, f, s, n, not args.no_lgb, args.quick, args.cv, args.eta, args.queries) for n in args.passes
                 for d in args.data
                 for f in (folds if d == "mq2008" else [0]) for s in seeds]
        if args.jobs > 1:
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(args.jobs, initializer=_limit_threads) as pool:
                runs = list(pool.map(one_run, tasks))
        else:
            _limit_threads()
            runs = [one_run(t) for t in tasks]
        from counterfactual_ltr.estimators import GBDT_GRID

        settings = {"data": args.data, "passes": args.passes, "seeds": seeds, "folds": folds, "gbdt_grid": GBDT_GRID,
                    "selection": "select_learner defaults: GroupKFold(cv) of the training log, snips_scorer('dcg') "
                                 "at eta, the best mean kept",
                    "clicks": f"eta {args.eta:g}, eps- 0.1, eps+ 1, label >= 2 (experiments._cltr.simulate_run)",
                    "lgb": not args.no_lgb, "cv": args.cv, "eta": args.eta, "queries": args.queries}
    summary = summarise(runs)
    for name, s in summary.items():
        print(f"\n{name}, {s['n_runs']} runs: means " + ", ".join(f"{a} {v:.4f}" for a, v in s["means"].items()))
        print(f"  chosen: {s['chosen']}; best cross-validated mean: {s['best_cv']}; best in hindsight: {s['hindsight']}")
        for pair, d in s["paired"].items():
            print(f"  {pair}: {fmt(d)}")
        print(f"  selection CPU / dearest learner's search: mean {s['selection_over_dearest']['mean']:.2f}, "
              f"max {s['selection_over_dearest']['max']:.2f}")
    path = save_results("bench_learner_choice", {"runs": runs, "summary": summary}, settings, args.out, started)
    print(f"wrote {path}")
    return summary


if __name__ == "__main__":
    main()
