"""What makes GBDTPropDCG lose to SVM PropDCG on a small web-style set: an ablation of its grid on the MSLR sample.

Issue 53 (part 2). Every arm is tuned exactly as ``bench_tree_recipe`` tunes its arms (``GridSearchCV`` over
``GroupKFold(3)`` of the training log's queries, ``snips_scorer("dcg")``, refitted on the whole log; its
``tuned_test_score``), on the same click log per (seed, passes), and scored by test avg DCG (relevant =
label >= 2) on the sample's test file. Data: ``experiments._mslr`` (43 training and 43 test queries of
MSLR-WEB10K, 136 log-scaled features, grades 0-4); there is no validation part, the simulated
validation log of ``simulate_run`` is drawn on the training set and not used. Clicks: eta 1,
eps- 0.1, clicks on label >= 2, production RankSVM on 1 % of the training queries.

Arms (each a grid of at most 8 points; ``B`` = ``GBDT_GRID`` as committed before this issue: 100/300 trees,
7/31 leaves, learning rate 0.1, half the features, both objectives):

* ``recipe``: ``B``.
* ``propdcg_only`` / ``ips_only``: ``B`` with one objective.
* ``all_features`` / ``cols03``: ``B`` with ``colsample_bytree`` 1.0 / 0.3.
* ``leaf_big``: 7 leaves, 100/300 trees, ``min_child_samples`` 50/100, both objectives.
* ``l2``: 7 leaves, 100/300 trees, ``reg_lambda`` 1/10, both objectives.
* ``small_slow``: 3 leaves, 100/300 trees, learning rate 0.05/0.1, both objectives.
* ``linear``: linear leaves (LightGBM ``linear_tree``, which ``GBDTPropDCG`` refuses in ``lgb_params``
  because its model file cannot hold them; here a subclass sets it), 3/7 leaves, 100 trees, both objectives.
* ``from_svm``: boosting from SVM PropDCG's scores: a subclass fits SVM PropDCG (C = the one the
  ``svm_propdcg`` arm chose on the same training log) inside every fit and boosts trees on the objective at
  ``svm scores + tree scores``; 7 leaves, 30/100/300 trees, both objectives.
* ``lgb_position``: LightGBM lambdarank on the clicks with ``position=`` over ``B`` without the objective row.
* ``svm_propdcg``: SVM PropDCG over ``experiments._cltr.DEFAULT_C_GRID``.

    python -m experiments.benchmarks.bench_tree_ablation [--passes 30] [--seeds 10] [--first-seed 0]
        [--arms recipe ...] [--data mslr mq2008] [--out DIR]

The JSON is re-written after every run (a partial run keeps what it measured). Printed: each run's scores,
then per (data set, passes) the arms' means and every arm minus ``lgb_position``, ``svm_propdcg`` and
``recipe``, paired over the runs (mean +- se, two-sided paired t-test, wins/n).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from counterfactual_ltr.estimators import GBDTPropDCG

BASE = {"n_estimators": [100, 300], "num_leaves": [7, 31], "learning_rate": [0.1], "colsample_bytree": [0.5],
        "objective": ["propdcg", "ips_lambdarank"]}
BOTH = ["propdcg", "ips_lambdarank"]
GRIDS = {
    "recipe": BASE,
    "propdcg_only": {**BASE, "objective": ["propdcg"]},
    "ips_only": {**BASE, "objective": ["ips_lambdarank"]},
    "all_features": {**BASE, "colsample_bytree": [1.0]},
    "cols03": {**BASE, "colsample_bytree": [0.3]},
    "leaf_big": {**BASE, "num_leaves": [7], "min_child_samples": [50, 100]},
    "l2": {**BASE, "num_leaves": [7], "reg_lambda": [1.0, 10.0]},
    "small_slow": {**BASE, "num_leaves": [3], "learning_rate": [0.05, 0.1]},
    "linear": {**BASE, "n_estimators": [100], "num_leaves": [3, 7]},
    "from_svm": {**BASE, "n_estimators": [30, 100, 300], "num_leaves": [7]},
}
ARMS = (*GRIDS, "lgb_position", "svm_propdcg")
REFERENCES = ("lgb_position", "svm_propdcg", "recipe")


class LinearLeavesGBDT(GBDTPropDCG):
    """GBDTPropDCG with LightGBM's ``linear_tree`` (ablation only: its model file could not hold it)."""

    def _lgb_params(self, seed) -> dict:
        return {**super()._lgb_params(seed), "linear_tree": True}


class GBDTFromSVM(GBDTPropDCG):
    """GBDTPropDCG boosted from SVM PropDCG's scores (ablation only).

    ``fit`` fits ``SVMPropDCG(C=base_C)`` on the same log, then boosts the trees on the objective at
    ``base scores + tree scores`` (the base scores are LightGBM's ``init_score`` in effect); ``predict``
    adds the two. Both are in the margin's units, so the trees correct the linear ranking.
    """

    def __init__(self, base_C=1.0, **kwargs):
        super().__init__(**kwargs)
        self.base_C = base_C

    def get_params(self, deep=True):
        return {**super().get_params(deep), "base_C": self.base_C}

    @classmethod
    def _get_param_names(cls):
        return sorted({*GBDTPropDCG._get_param_names(), "base_C"})

    def fit(self, log, y=None, validation_log=None):
        from counterfactual_ltr.estimators import SVMPropDCG

        self.base_ = SVMPropDCG(C=self.base_C).fit(log)
        return super().fit(log, y, validation_log)

    def _objective_function(self, rows, lam, history):
        inner = super()._objective_function(rows, lam, history)
        offset = np.asarray(self.base_.predict(rows.X), dtype=np.float64)
        return lambda scores, dataset: inner(scores + offset, dataset)

    def predict(self, X, num_iteration=None):
        return super().predict(X, num_iteration) + self.base_.predict(X)


def arm_estimator(arm: str, seed: int, base_C: float):
    from counterfactual_ltr.estimators import SVMPropDCG
    from experiments import _cltr
    from experiments.benchmarks.bench_tree_recipe import LambdaRankOnClicks

    if arm == "lgb_position":
        return LambdaRankOnClicks(position=True, random_state=seed), {k: v for k, v in BASE.items() if k != "objective"}
    if arm == "svm_propdcg":
        return SVMPropDCG(), {"C": list(_cltr.DEFAULT_C_GRID)}
    if arm == "linear":
        return LinearLeavesGBDT(random_state=seed), GRIDS[arm]
    if arm == "from_svm":
        return GBDTFromSVM(base_C=base_C, random_state=seed), GRIDS[arm]
    return GBDTPropDCG(random_state=seed), GRIDS[arm]


def load(dataset: str, fold: int):
    if dataset == "mslr":
        from experiments._mslr import mslr_or_exit

        train, test = mslr_or_exit()
        return train, train, test
    from experiments._common import load_fold

    return load_fold(fold)


def one_run(dataset: str, fold: int, seed: int, passes: int, arms, threshold: int = 2) -> dict:
    """Every arm tuned on one training log (``bench_tree_recipe.tuned_test_score``), its test avg DCG."""
    from click_sim import train_production_ranker

    from experiments import _cltr
    from experiments.benchmarks.bench_tree_recipe import tuned_test_score

    train, vali, test = load(dataset, fold)
    production = train_production_ranker(train, fraction=0.01, random_state=seed)
    _, train_log, _ = _cltr.simulate_run(train, vali, seed=seed, n_passes=passes, production=production,
                                         relevance_threshold=threshold)
    run = {"dataset": dataset, "fold": fold, "seed": seed, "passes": passes, "n_train_clicks": int(train_log.n_clicks),
           "production": _cltr.test_metrics(production.predict(test.X), test, threshold)["avg_dcg"], "chosen": {},
           "cpu_seconds": {}}
    order = ["svm_propdcg", *[a for a in arms if a != "svm_propdcg"]] if "from_svm" in arms else list(arms)
    base_C = 1.0
    for arm in order:
        if arm == "from_svm" and "svm_propdcg" in run["chosen"]:
            base_C = run["chosen"]["svm_propdcg"]["C"]
        estimator, grid = arm_estimator(arm, seed, base_C)
        started = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run[arm], run["chosen"][arm] = tuned_test_score(estimator, grid, train_log, test, threshold)
        run["cpu_seconds"][arm] = round(time.process_time() - started, 2)
    print(f"{dataset} fold {fold} seed {seed}, {passes} passes, {run['n_train_clicks']} clicks: "
          + ", ".join(f"{a} {run[a]:.4f} ({run['cpu_seconds'].get(a, 0):.0f}s)" for a in ("production", *order)),
          flush=True)
    return run


def summarise(runs: list[dict]) -> dict:
    from experiments import _cltr

    out = {}
    for dataset, passes in sorted({(r["dataset"], r["passes"]) for r in runs}):
        rs = [r for r in runs if r["dataset"] == dataset and r["passes"] == passes]
        arms = [a for a in (*ARMS, "production") if any(a in r for r in rs)]
        paired = {}
        for ref in REFERENCES:
            for a in arms:
                both = [r for r in rs if a in r and ref in r]
                if a != ref and both and not (ref == "recipe" and a in ("lgb_position", "svm_propdcg")):
                    paired[f"{a} - {ref}"] = _cltr.paired([r[a] for r in both], [r[ref] for r in both])
        out[f"{dataset}, {passes} passes"] = {
            "dataset": dataset, "passes": passes, "n_runs": len(rs),
            "means": {a: float(np.mean([r[a] for r in rs if a in r])) for a in arms}, "paired": paired}
    return out


def report(summary: dict) -> None:
    for name, s in summary.items():
        print(f"\n{name}, {s['n_runs']} runs")
        print("  means: " + ", ".join(f"{a} {v:.4f}" for a, v in s["means"].items()))
        for pair, d in s["paired"].items():
            print(f"  {pair:32s} {d['diff']:+.4f} +- {d['se']:.4f}  p {d['p']:.3g}  wins {d['wins']}/{d['n']}")


def main(argv=None):
    from experiments._common import parser, save_results

    p = parser(__doc__)
    p.add_argument("--data", nargs="+", default=["mslr"], choices=["mslr", "mq2008"])
    p.add_argument("--passes", type=int, nargs="+", default=[30])
    p.add_argument("--folds", type=int, nargs="+", default=[1], help="MQ2008 folds")
    p.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    p.add_argument("--first-seed", type=int, default=0)
    args = p.parse_args(argv)
    started = time.time()
    seeds = list(range(args.first_seed, args.first_seed + (1 if args.quick else (args.seeds or 10))))
    tasks = [(d, f, s, n) for n in args.passes for d in args.data
             for f in (args.folds if d == "mq2008" else [0]) for s in seeds]
    settings = {"passes": args.passes, "arms": args.arms, "seeds": seeds, "folds": args.folds, "data": args.data,
                "grids": {a: GRIDS.get(a) for a in args.arms}, "relevance_threshold": 2,
                "selection": "GridSearchCV, GroupKFold(3) of the training log, snips_scorer('dcg')",
                "clicks": "eta 1, eps- 0.1, eps+ 1, label 2 (experiments._cltr.simulate_run)"}
    runs = []
    for task in tasks:
        runs.append(one_run(*task, args.arms))
        save_results("bench_tree_ablation", {"runs": runs, "summary": summarise(runs)}, settings, args.out, started)
    summary = summarise(runs)
    report(summary)
    print(f"wrote {save_results('bench_tree_ablation', {'runs': runs, 'summary': summary}, settings, args.out, started)}")
    return summary


if __name__ == "__main__":
    main()
