"""Gradient-boosted trees on the counterfactual objective (issue 30): GBDTPropDCG against what a practitioner
would pick instead, on MQ2008 and on a synthetic data set whose relevance depends on feature interactions.

One run = (data set, fold or draw, seed): production ranker (RankSVM on 1% of the training queries),
training and validation click logs of ``--passes`` passes (position-based, eta = 1, eps- = 0.1,
eps+ = 1, clicks on label 2: ``experiments._cltr.simulate_run``), then every method below, each
tuned by the same criterion -- SNIPS-DCG on the validation clicks under the true propensities --
over its stated grid, and the test metrics of ``experiments._cltr.test_metrics`` (primary:
``avg_dcg``, the mean over relevant test documents of 1/ln(1 + rank)).

Methods (tree models: the same grid ``GRID``, every tree on half the features; the number of trees
is chosen among ``CHECKPOINTS`` from one fit of the largest, by truncated predictions):

* ``gbdt_propdcg``: :class:`~counterfactual_ltr.estimators.GBDTPropDCG` (propensity-weighted DCG
  bound, softplus-smoothed), trained on the log's aggregate;
* ``gbdt_ips_lambdarank``: the same estimator with ``objective="ips_lambdarank"``;
* ``gbdt_by_snips``: of those two, the one with the higher validation SNIPS-DCG (the objective as
  one more grid parameter; no extra fit);
* ``lgb_position``: LightGBM's lambdarank on the sessions with clicks (clicks as labels, identical
  sessions merged with their count as weight) with ``Dataset(position=...)``: its joint estimate
  of the position bias;
* ``lgb_clicks``: the same without debiasing;
* ``svm_propdcg``: SVM PropDCG over the C grid of ``experiments.papers.table3``;
* ``skyline``: LightGBM lambdarank on the training fold's full (graded) labels, same grid, chosen
  by the validation fold's labelled avg DCG (a ceiling, not a competitor).

``min_child_samples`` counts training rows: documents for the aggregate-trained models, logged
impressions for the two session-level LightGBM baselines (see ``docs/trees.md`` for the check that
the baselines lose nothing by it). Paired differences (first minus second, same run) of test avg
DCG and NDCG@10 with standard errors and two-sided paired t-tests, per data set.

python -m experiments.papers.trees [--quick] [--datasets mq2008 synthetic] [--folds 1 2 3 4 5] [--seeds 4]
                            [--passes 100] [--jobs 2]
"""

from __future__ import annotations

import itertools
import time
import warnings

import numpy as np

from experiments import _cltr
from experiments._common import MQ2007_NOTE, figure_path, load_fold, parser, pyplot, save_results

NAME = "trees"
GRID = {"learning_rate": (0.05, 0.1), "num_leaves": (7, 31), "min_child_samples": (20, 100)}
QUICK_GRID = {"learning_rate": (0.1,), "num_leaves": (7,), "min_child_samples": (20,)}
CHECKPOINTS = (25, 50, 100, 200, 400)
QUICK_CHECKPOINTS = (25, 50, 100)
# Every tree on half the features, for every tree model (Agarwal et al.'s LambdaRank setting, sec. 5.2).
COLSAMPLE = 0.5
# The non-linear data set: half of the latent relevance from products of feature pairs (make_ranking).
SYNTHETIC = {"n_queries": 800, "n_docs": (5, 40), "n_features": 10, "noise": 0.5, "interactions": 0.5}
QUICK_SYNTHETIC = {**SYNTHETIC, "n_queries": 200}
METHODS = ("gbdt_propdcg", "gbdt_ips_lambdarank", "gbdt_by_snips", "lgb_position", "lgb_clicks", "svm_propdcg")
TREE_METHODS = ("gbdt_propdcg", "gbdt_ips_lambdarank", "gbdt_by_snips", "lgb_position", "lgb_clicks")
NAMES = {"production": "production ranker", "gbdt_propdcg": "GBDTPropDCG (ours)",
         "gbdt_ips_lambdarank": "GBDTPropDCG, objective ips_lambdarank (ours)",
         "gbdt_by_snips": "GBDTPropDCG, objective chosen by validation SNIPS (ours)",
         "lgb_position": "LightGBM lambdarank, position= debiasing", "lgb_clicks": "LightGBM lambdarank on clicks",
         "svm_propdcg": "SVM PropDCG", "skyline": "LightGBM lambdarank on full labels (skyline)"}
PAIRS = (("gbdt_propdcg", "lgb_position"), ("gbdt_propdcg", "svm_propdcg"), ("gbdt_propdcg", "lgb_clicks"),
         ("gbdt_ips_lambdarank", "lgb_position"), ("gbdt_propdcg", "gbdt_ips_lambdarank"),
         ("gbdt_by_snips", "lgb_position"), ("gbdt_by_snips", "svm_propdcg"),
         ("svm_propdcg", "lgb_position"), ("lgb_position", "lgb_clicks"))


def split_synthetic(seed: int, quick: bool):
    """``(train, vali, test)``: one draw of the interaction data set, its queries split 60 / 20 / 20."""
    from click_sim import make_ranking

    data = make_ranking(**(QUICK_SYNTHETIC if quick else SYNTHETIC), random_state=seed)
    order = np.random.default_rng(seed).permutation(data.n_queries)
    a, b = int(0.6 * data.n_queries), int(0.8 * data.n_queries)
    return tuple(data.subset(np.sort(part)) for part in (order[:a], order[a:b], order[b:]))


def _grid_points(grid):
    return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]


def select_trees(fit, grid, checkpoints, score, test):
    """Fit every grid point once with the most trees; choose (point, trees) by ``score(predict)``.

    ``fit(point, n_trees)`` returns ``predict(X, k)`` (scores of the first ``k`` trees); ``score``
    maps such a function to the selection criterion (higher is better).
    """
    candidates, seconds = [], 0.0
    for point in _grid_points(grid):
        started = time.process_time()
        predict = fit(point, max(checkpoints))
        seconds += time.process_time() - started
        for k in checkpoints:
            candidates.append((score(lambda X, k=k: predict(X, k)), k, point, predict))
    value, k, point, predict = max(candidates, key=lambda c: c[0])
    return {**_cltr.test_metrics(predict(test.X, k), test), "selected": {**point, "n_estimators": k},
            "vali_score": value, "n_estimators_at_edge": k == max(checkpoints), "cpu_seconds": seconds,
            "vali_scores": {f"{p['learning_rate']}/{p['num_leaves']}/{p['min_child_samples']}/{kk}": v
                            for v, kk, p, _ in candidates}}


def _lgb_params(point, seed):
    return {"objective": "lambdarank", "learning_rate": point["learning_rate"], "num_leaves": point["num_leaves"],
            "min_data_in_leaf": point["min_child_samples"], "feature_fraction": COLSAMPLE, "num_threads": 1,
            "deterministic": True, "force_row_wise": True, "seed": seed, "verbose": -1}


def fit_methods(train, vali, test, train_log, vali_log, seed: int, grid, checkpoints, C_grid) -> dict:
    """Every method of the module docstring on one run's logs; test metrics of each chosen model."""
    import lightgbm

    from counterfactual_ltr.estimators import GBDTPropDCG
    from counterfactual_ltr.evaluation import snips_estimate

    def snips(predict):
        return snips_estimate(vali_log, predict(vali.X), metric="dcg", propensity=1.0, n_bootstrap=0).value

    out = {}
    agg = train_log.aggregate(1.0)
    for method, objective in (("gbdt_propdcg", "propdcg"), ("gbdt_ips_lambdarank", "ips_lambdarank")):
        def fit(point, n, objective=objective):
            est = GBDTPropDCG(objective=objective, n_estimators=n, colsample_bytree=COLSAMPLE, random_state=seed,
                              **point).fit(agg)
            return lambda X, k: est.predict(X, num_iteration=k)
        out[method] = select_trees(fit, grid, checkpoints, snips, test)
    pick = max(("gbdt_propdcg", "gbdt_ips_lambdarank"), key=lambda m: out[m]["vali_score"])
    out["gbdt_by_snips"] = {**out[pick], "objective": pick,
                            "cpu_seconds": out["gbdt_propdcg"]["cpu_seconds"] + out["gbdt_ips_lambdarank"]["cpu_seconds"]}
    rows, labels, groups, weights, positions = _cltr.click_label_groups(train_log, with_positions=True)
    X = train_log.data.X[rows]
    for method, position in (("lgb_position", positions), ("lgb_clicks", None)):
        def fit(point, n, position=position):
            data = lightgbm.Dataset(X, labels, group=groups, weight=weights, position=position)
            booster = lightgbm.train(_lgb_params(point, seed), data, num_boost_round=n)
            return lambda X_, k: booster.predict(X_, num_iteration=k, num_threads=1)
        out[method] = select_trees(fit, grid, checkpoints, snips, test)
        out[method]["n_train_rows"] = int(len(rows))

    def fit_full(point, n):
        data = lightgbm.Dataset(train.X, train.y, group=train.query_lengths)
        booster = lightgbm.train(_lgb_params(point, seed), data, num_boost_round=n)
        return lambda X_, k: booster.predict(X_, num_iteration=k, num_threads=1)

    labelled = lambda predict: _cltr.test_metrics(predict(vali.X), vali)["avg_dcg"]   # noqa: E731
    out["skyline"] = select_trees(fit_full, grid, checkpoints, labelled, test)
    started = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        svm = _cltr.fit_and_select(train_log, vali_log, test, methods=("propdcg",), C_grid=C_grid,
                                   propensity=1.0)["propdcg"]
    out["svm_propdcg"] = {**svm, "cpu_seconds": time.process_time() - started}
    return out


_DATA: dict = {}


def run_one(task) -> dict:
    """One run (see the module docstring); single-threaded whatever the environment."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return _run_one(task)


def _run_one(task) -> dict:
    dataset, fold, seed, o = task
    from click_sim import train_production_ranker

    key = (dataset, fold)
    if key not in _DATA:
        _DATA[key] = load_fold(fold) if dataset == "mq2008" else split_synthetic(fold, o["quick"])
    train, vali, test = _DATA[key]
    production = train_production_ranker(train, fraction=0.01, random_state=seed)
    _, train_log, vali_log = _cltr.simulate_run(train, vali, seed=seed, n_passes=o["passes"], production=production)
    started = time.time()
    res = fit_methods(train, vali, test, train_log, vali_log, seed, o["grid"], o["checkpoints"], o["C_grid"])
    run = {"dataset": dataset, "fold": fold, "seed": seed, "n_train_clicks": train_log.n_clicks,
           "n_train_docs": train.n_docs, "production": _cltr.test_metrics(production.predict(test.X), test),
           "seconds": time.time() - started, **res}
    print(f"{dataset} fold {fold} seed {seed} clicks {train_log.n_clicks} | avg DCG " + ", ".join(
        f"{m} {res[m]['avg_dcg']:.4f}" for m in (*METHODS, "skyline")) + f" [{run['seconds']:.0f} s]", flush=True)
    return run


def summarise(runs, datasets) -> dict:
    """Per data set: mean +- sd of every row, paired differences (``PAIRS``), CPU seconds, grid-edge counts."""
    out = {}
    for dataset in datasets:
        rs = [r for r in runs if r["dataset"] == dataset]
        if not rs:
            continue
        rows = {m: {metric: _cltr.mean_std([r[m][metric] for r in rs]) for metric in ("avg_dcg", "ndcg10")}
                for m in ("production", *METHODS, "skyline")}
        paired = {f"{a}-{b}": {metric: _cltr.paired([r[a][metric] for r in rs], [r[b][metric] for r in rs])
                               for metric in ("avg_dcg", "ndcg10")} for a, b in PAIRS}
        cpu = {m: float(np.mean([r[m]["cpu_seconds"] for r in rs])) for m in (*METHODS, "skyline")}
        edge = {m: int(sum(r[m]["n_estimators_at_edge"] for r in rs)) for m in (*TREE_METHODS, "skyline")}
        out[dataset] = {"rows": rows, "paired": paired, "cpu_seconds_per_run": cpu, "n_runs": len(rs),
                        "trees_at_grid_edge": edge, "mean_train_clicks": float(np.mean([r["n_train_clicks"] for r in rs]))}
    return out


def claims(summary) -> dict:
    """The issue's "must hold" comparisons, each with its paired difference and whether it holds (p < 0.05)."""
    out = {}
    for dataset, s in summary.items():
        wanted = [("gbdt_propdcg", "lgb_position")] + ([("gbdt_propdcg", "svm_propdcg")] if dataset == "synthetic" else [])
        for a, b in wanted:
            d = s["paired"][f"{a}-{b}"]["avg_dcg"]
            holds = bool(d["diff"] > 0 and d["p"] is not None and np.isfinite(d["p"]) and d["p"] < 0.05)
            out[f"{dataset}: {a} beats {b}"] = {**d, "holds": holds}
    return out


def main(argv=None):
    from concurrent.futures import ProcessPoolExecutor

    p = parser(__doc__)
    p.add_argument("--datasets", nargs="+", default=["mq2008", "synthetic"], choices=["mq2008", "synthetic"])
    p.add_argument("--folds", type=int, nargs="+", default=None, help="MQ2008 folds (default 1-5; --quick 1)")
    p.add_argument("--passes", type=int, default=None, help="passes over the training queries (default 100)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (results do not depend on it)")
    args = p.parse_args(argv)
    started = time.time()
    quick = args.quick
    folds = args.folds or ([1] if quick else [1, 2, 3, 4, 5])
    n_seeds = args.seeds or (1 if quick else 4)
    o = {"quick": quick, "passes": args.passes or (10 if quick else 100), "grid": QUICK_GRID if quick else GRID,
         "checkpoints": QUICK_CHECKPOINTS if quick else CHECKPOINTS,
         "C_grid": _cltr.QUICK_C_GRID if quick else _cltr.DEFAULT_C_GRID}
    tasks = []
    if "mq2008" in args.datasets:
        tasks += [("mq2008", fold, seed, o) for fold in folds for seed in range(n_seeds)]
    if "synthetic" in args.datasets:   # as many runs, each on its own draw of the data
        tasks += [("synthetic", draw, draw, o) for draw in range(len(folds) * n_seeds)]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            runs = list(pool.map(run_one, tasks))
    else:
        runs = [run_one(t) for t in tasks]
    summary = summarise(runs, args.datasets)
    results = {"summary": summary, "claims": claims(summary), "runs": runs}
    settings = {"datasets": args.datasets, "mq2008_folds": folds, "seeds_per_fold": n_seeds, "passes": o["passes"],
                "eta": 1.0, "eps_minus": 0.1, "eps_plus": 1.0, "relevance_threshold": _cltr.RELEVANCE_THRESHOLD,
                "synthetic": QUICK_SYNTHETIC if quick else SYNTHETIC, "synthetic_split": "queries 60/20/20 per draw",
                "tree_grid": o["grid"], "tree_checkpoints": o["checkpoints"], "colsample_bytree": COLSAMPLE,
                "svm_C_grid": o["C_grid"], "selection": "SNIPS-DCG on the validation clicks (true propensities); "
                "skyline: labelled validation avg DCG", "quick": quick, "metrics": _cltr.__doc__, "note": MQ2007_NOTE,
                "jobs": args.jobs}
    path = save_results(NAME, results, settings, args.out, started)
    print(markdown(summary))
    for name, c in results["claims"].items():
        print(f"{name}: {c['diff']:+.4f} +- {c['se']:.4f} (p = {c['p']:.2g}, n = {c['n']}) -> "
              f"{'holds' if c['holds'] else 'does not hold'}")
    print(f"wrote {path}")
    if not args.no_plot:
        plot(summary, args.out)
    return results


def markdown(summary) -> str:
    """Per data set, the table of rows and the table of paired differences (printed, and in the README)."""
    from experiments._readme import fmt

    lines = []
    for dataset, s in summary.items():
        lines += [f"**{dataset}** ({s['n_runs']} runs, {s['mean_train_clicks']:,.0f} training clicks on average):",
                  "", "| method | avg DCG | NDCG@10 | CPU s per run (whole grid) |", "|---|---|---|---|"]
        for m, r in s["rows"].items():
            cpu = s["cpu_seconds_per_run"].get(m)
            lines.append(f"| {NAMES[m]} | {r['avg_dcg']['mean']:.4f} +- {r['avg_dcg']['std']:.4f} | "
                         f"{r['ndcg10']['mean']:.4f} | {'' if cpu is None else f'{cpu:.1f}'} |")
        lines += ["", "| paired (first - second) | avg DCG | NDCG@10 |", "|---|---|---|"]
        for key, d in s["paired"].items():
            a, b = key.split("-")
            lines.append(f"| {NAMES[a]} - {NAMES[b]} | {fmt(d['avg_dcg'])} | {fmt(d['ndcg10'])} |")
        lines.append("")
    return "\n".join(lines)


def plot(summary, out):
    plt = pyplot()
    fig, axes = plt.subplots(1, len(summary), figsize=(5.5 * len(summary), 3.8), squeeze=False)
    for ax, (dataset, s) in zip(axes[0], summary.items()):
        methods = [m for m in (*METHODS, "skyline")]
        means = [s["rows"][m]["avg_dcg"]["mean"] for m in methods]
        se = [s["rows"][m]["avg_dcg"]["std"] / np.sqrt(max(s["n_runs"], 1)) for m in methods]
        ax.bar(range(len(methods)), means, yerr=se, capsize=3, color=["C0", "C1", "C2", "C3", "C4", "grey"])
        ax.axhline(s["rows"]["production"]["avg_dcg"]["mean"], color="black", ls="--", label="production ranker")
        ax.set_xticks(range(len(methods)))
        ax.set_xticklabels([NAMES[m].replace(" (ours)", "*").replace("LightGBM lambdarank", "LGB")
                            for m in methods], rotation=30, ha="right", fontsize=7)
        low = min(means + [s["rows"]["production"]["avg_dcg"]["mean"]])
        ax.set_ylim(low - 0.03, max(means) + 0.02)
        ax.set_ylabel("test avg DCG (mean +- se over runs)")
        ax.set_title(f"{dataset}: {s['n_runs']} runs", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(figure_path(NAME, out), dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
