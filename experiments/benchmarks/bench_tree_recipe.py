"""The README's tree recipe, measured: GBDTPropDCG over ``GBDT_GRID`` against LightGBM's own position debiasing.

Every arm is tuned the way the README tells a user to tune GBDTPropDCG: ``GridSearchCV`` over
``GroupKFold(3)`` of the training log's queries, scored by ``snips_scorer("dcg")`` on the held-out
folds' clicks (the propensities the log records: eta = 1 here), then refitted on the whole log. No
validation log and no test label is used for any choice. Arms:

* ``recipe``: ``GBDTPropDCG`` over ``counterfactual_ltr.estimators.GBDT_GRID`` (every tree on half
  the features; the objective, propdcg or ips_lambdarank, chosen with the rest);
* ``propdcg_only``: the same grid with ``objective = "propdcg"`` only, the ablation behind the
  grid's objective row;
* ``all_features``: the same grid with ``colsample_bytree = 1.0`` (LightGBM's default), the
  ablation behind the grid's and the class's 0.5;
* ``lgb_position``: LightGBM's lambdarank on the logged sessions with clicks as labels and
  ``Dataset(position=...)`` (its own joint estimate of the position bias), over the same grid,
  scored by the same SNIPS on the same held-out folds;
* ``lgb_clicks``: the same without ``position=``;
* ``svm_propdcg``: SVM PropDCG (the same propensities) over the C grid of the experiments
  (``experiments._cltr.DEFAULT_C_GRID``), tuned the same way.

``--arms`` chooses the arms (default: all); ``--trees`` and ``--leaves`` replace the grid's
``n_estimators`` and ``num_leaves`` for every tree arm alike.

A run is (data, fold or draw, seed): a production RankSVM on 1 % of the training queries, a
training log of ``--passes`` passes (eta 1, eps- 0.1, clicks on label >= ``--threshold``, default 2:
``experiments._cltr.simulate_run``), test avg DCG (``experiments._cltr.test_metrics``, relevant = the same
threshold; both data sets grade 0, 1, 2). Printed:
each run's test avg DCG per arm, then per data set the means and the paired differences (mean
+- standard error, two-sided paired t-test) of the recipe against every other arm and the
production ranker (and so for ``propdcg_only``).

    python -m experiments.benchmarks.bench_tree_recipe [--data mq2008 synthetic] [--passes 30 100]
        [--seeds 4] [--first-seed 0] [--folds 1] [--arms recipe ...] [--trees 100 300]
        [--leaves 7 31] [--threshold 2] [--out DIR]
    python -m experiments.benchmarks.bench_tree_recipe --merge part1.json part2.json   # runs made in parallel

Summaries are per (data set, passes). ``--merge`` makes one result of parts run with the same
grid and threshold (each run keeps the passes of its part; where the parts ran other arms, each
pair of arms is compared on the runs that have both).

MQ2008 runs use ``--folds`` with every seed 0 .. ``--seeds`` - 1; synthetic runs use draw = seed of the non-linear set of
``experiments.papers.trees`` (queries split 60 / 20 / 20; the 20 % validation part is not used).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator

ARMS = ("recipe", "propdcg_only", "all_features", "lgb_position", "lgb_clicks", "svm_propdcg")


class LambdaRankOnClicks(BaseEstimator):
    """LightGBM's lambdarank on a click log's sessions (clicks as labels), with or without ``position=``.

    A scikit-learn estimator so that ``GridSearchCV`` tunes it exactly as it tunes GBDTPropDCG: it
    takes the same ``ClickLog`` and the same grid names (``n_estimators``, ``num_leaves``,
    ``learning_rate``, ``colsample_bytree``).
    """

    def __init__(self, position=True, n_estimators=100, num_leaves=31, learning_rate=0.1, colsample_bytree=1.0,
                 min_child_samples=20, random_state=0):
        self.position = position
        self.n_estimators = n_estimators
        self.num_leaves = num_leaves
        self.learning_rate = learning_rate
        self.colsample_bytree = colsample_bytree
        self.min_child_samples = min_child_samples
        self.random_state = random_state

    def fit(self, log, y=None):
        import lightgbm

        from experiments import _cltr

        rows, labels, groups, weights, positions = _cltr.click_label_groups(log, with_positions=True)
        data = lightgbm.Dataset(log.data.X[rows], labels, group=groups, weight=weights,
                                position=positions if self.position else None)
        params = {"objective": "lambdarank", "learning_rate": self.learning_rate, "num_leaves": self.num_leaves,
                  "min_data_in_leaf": self.min_child_samples, "feature_fraction": self.colsample_bytree,
                  "num_threads": 1, "deterministic": True, "force_row_wise": True, "seed": self.random_state,
                  "verbose": -1}
        self.booster_ = lightgbm.train(params, data, num_boost_round=self.n_estimators)
        return self

    def predict(self, X):
        return self.booster_.predict(X, num_threads=1)


def tuned_test_score(estimator, grid, train_log, test, threshold: int = 2, eta: float = 1.0) -> tuple[float, dict]:
    """Test avg DCG of ``estimator`` tuned by the README's recipe on ``train_log`` (SNIPS at ``eta``), and its choice."""
    from sklearn.model_selection import GridSearchCV, GroupKFold

    from counterfactual_ltr import snips_scorer
    from experiments import _cltr

    search = GridSearchCV(estimator, grid, cv=GroupKFold(3), scoring=snips_scorer("dcg", propensity=eta))
    search.fit(train_log, groups=train_log.groups)
    return _cltr.test_metrics(search.best_estimator_.predict(test.X), test, threshold)["avg_dcg"], search.best_params_


def arm_estimators(arms, seed: int, grid: dict) -> dict:
    """``{arm: (estimator, param_grid)}`` of the arms asked for, all on ``grid`` (the recommended one by default)."""
    from counterfactual_ltr.estimators import GBDTPropDCG, SVMPropDCG
    from experiments import _cltr

    lgb_grid = {k: v for k, v in grid.items() if k != "objective"}
    every = {"recipe": lambda: (GBDTPropDCG(random_state=seed), grid),
             "propdcg_only": lambda: (GBDTPropDCG(random_state=seed), {**grid, "objective": ["propdcg"]}),
             "all_features": lambda: (GBDTPropDCG(random_state=seed), {**grid, "colsample_bytree": [1.0]}),
             "lgb_position": lambda: (LambdaRankOnClicks(position=True, random_state=seed), lgb_grid),
             "lgb_clicks": lambda: (LambdaRankOnClicks(position=False, random_state=seed), lgb_grid),
             "svm_propdcg": lambda: (SVMPropDCG(), {"C": list(_cltr.DEFAULT_C_GRID)})}
    return {arm: every[arm]() for arm in ARMS if arm in arms}


def one_run(dataset: str, fold: int, seed: int, passes: int, arms, threshold: int = 2, grid=None) -> dict:
    """One (data set, fold or draw, seed, passes): every arm tuned on the same training log, its test avg DCG."""
    from click_sim import train_production_ranker

    from counterfactual_ltr.estimators import GBDT_GRID
    from experiments import _cltr
    from experiments._common import load_fold
    from experiments.papers.trees import split_synthetic

    train, vali, test = load_fold(fold) if dataset == "mq2008" else split_synthetic(seed, False)
    production = train_production_ranker(train, fraction=0.01, random_state=seed)
    _, train_log, _ = _cltr.simulate_run(train, vali, seed=seed, n_passes=passes, production=production,
                                         relevance_threshold=threshold)
    estimators = arm_estimators(arms, seed, grid or GBDT_GRID)
    run = {"dataset": dataset, "fold": fold, "seed": seed, "passes": passes, "n_train_clicks": int(train_log.n_clicks),
           "production": _cltr.test_metrics(production.predict(test.X), test, threshold)["avg_dcg"], "chosen": {}}
    for arm, (estimator, param_grid) in estimators.items():
        started = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run[arm], run["chosen"][arm] = tuned_test_score(estimator, param_grid, train_log, test, threshold)
        run.setdefault("cpu_seconds", {})[arm] = time.process_time() - started
    print(f"{dataset} {'fold ' + str(fold) if dataset == 'mq2008' else 'draw ' + str(seed)} seed {seed}, {passes} passes: "
          + ", ".join(f"{arm} {run[arm]:.4f}" for arm in ("production", *estimators)), flush=True)
    return run


def summarise(runs: list[dict]) -> dict:
    """Per ``"<data set>, <passes> passes"``: each arm's mean, and each GBDTPropDCG arm minus every other arm,
    paired over the runs."""
    from experiments import _cltr

    out = {}
    for dataset, passes in sorted({(r["dataset"], r["passes"]) for r in runs}):
        rs = [r for r in runs if r["dataset"] == dataset and r["passes"] == passes]
        arms = [a for a in (*ARMS, "production") if any(a in r for r in rs)]
        pairs = [(a, b) for a in ("recipe", "propdcg_only") if a in arms for b in arms
                 if b != a and (a, b) != ("propdcg_only", "recipe")]          # recipe - propdcg_only is listed
        both = {(a, b): [r for r in rs if a in r and b in r] for a, b in pairs}  # merged parts may differ in arms
        out[f"{dataset}, {passes} passes"] = {
            "dataset": dataset, "passes": passes, "n_runs": len(rs),
            "means": {a: float(np.mean([r[a] for r in rs if a in r])) for a in arms},
            "n_runs_of": {a: sum(a in r for r in rs) for a in arms},
            "paired": {f"{a} - {b}": _cltr.paired([r[a] for r in both[a, b]], [r[b] for r in both[a, b]])
                       for a, b in pairs if both[a, b]}}
    return out


def merge(paths) -> tuple[list, dict]:
    """The runs and settings of parts run with the same grid and threshold (a run once only; arms may
    differ, each pair of arms is then compared on the runs that have both)."""
    from experiments._common import merge_run_parts

    same = ("grid", "relevance_threshold")
    parts, runs, provenance = merge_run_parts(
        paths, same, lambda r, part: (r["dataset"], r["fold"], r["seed"], r.get("passes", part["settings"]["passes"])))
    passes_of = [part["settings"]["passes"] for part in parts for _ in part["results"]["runs"]]
    runs = [{"passes": n, **r} for r, n in zip(runs, passes_of)]        # runs made before several --passes
    settings = {**{k: parts[0]["settings"].get(k) for k in same},
                "arms": [a for a in ARMS if any(a in (part["settings"].get("arms") or ()) for part in parts)],
                "passes": sorted({r["passes"] for r in runs}), "data": sorted({r["dataset"] for r in runs}),
                "seeds": sorted({r["seed"] for r in runs}), "folds": sorted({r["fold"] for r in runs}),
                "selection": parts[0]["settings"]["selection"], "clicks": parts[0]["settings"]["clicks"],
                **provenance}
    return runs, settings


def main(argv=None):
    from experiments._common import parser, save_results
    from experiments._readme import fmt

    p = parser(__doc__)
    p.add_argument("--data", nargs="+", default=["mq2008", "synthetic"], choices=["mq2008", "synthetic"])
    p.add_argument("--passes", type=int, nargs="+", default=[100])
    p.add_argument("--folds", type=int, nargs="+", default=[1], help="MQ2008 folds (every seed on each)")
    p.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    p.add_argument("--trees", type=int, nargs="+", default=None, help="n_estimators of every arm's grid")
    p.add_argument("--leaves", type=int, nargs="+", default=None, help="num_leaves of every arm's grid")
    p.add_argument("--threshold", type=int, default=2, choices=(1, 2),
                   help="clicks on (and avg DCG of) label >= this (2: the experiments' reading; 1: every relevant label)")
    p.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1 (more "
                   "runs to --merge with earlier ones)")
    p.add_argument("--merge", nargs="+", default=None, help="JSON files of runs to merge into one result")
    args = p.parse_args(argv)
    started = time.time()
    if args.merge:
        runs, settings = merge(args.merge)
        started -= sum(t or 0 for t in settings["seconds_of_parts"])     # the parts' time, as a merge reports it
    else:
        from counterfactual_ltr.estimators import GBDT_GRID

        seeds = list(range(args.first_seed, args.first_seed + (1 if args.quick else (args.seeds or 4))))
        tasks = [(d, f, s, n) for n in args.passes for d in args.data
                 for f in (args.folds if d == "mq2008" else [0]) for s in seeds]
        grid = {**GBDT_GRID, **({"n_estimators": args.trees} if args.trees else {}),
                **({"num_leaves": args.leaves} if args.leaves else {})}
        runs = [one_run(d, f, s, n, args.arms, args.threshold, grid) for d, f, s, n in tasks]
        settings = {"passes": args.passes, "relevance_threshold": args.threshold, "grid": grid, "arms": args.arms,
                    "seeds": seeds, "folds": args.folds, "data": args.data,
                    "selection": "GridSearchCV, GroupKFold(3) of the training log, snips_scorer('dcg')",
                    "clicks": "eta 1, eps- 0.1, eps+ 1, label 2 (experiments._cltr.simulate_run)"}
    summary = summarise(runs)
    for name, s in summary.items():
        print(f"{name}, {s['n_runs']} runs: means " + ", ".join(f"{a} {v:.4f}" for a, v in s["means"].items()))
        for pair, d in s["paired"].items():
            print(f"  {pair}: {fmt(d)}")
    path = save_results("bench_tree_recipe", {"runs": runs, "summary": summary}, settings, args.out, started)
    print(f"wrote {path}")
    return summary


if __name__ == "__main__":
    main()
