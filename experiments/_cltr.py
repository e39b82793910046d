"""The counterfactual-LTR protocol of Agarwal et al. (2019, sec. 5.1) on MQ2008, shared by the scripts.

One *run* = (fold, seed, click-model settings, number of passes):

1. production ranker: RankSVM on a random 1% of the training queries (seeded);
2. training and validation click logs simulated from its rankings (position-based model);
3. for each method and each C of the grid, fit on the training log; choose C by the
   SNIPS-DCG estimate on the validation log (the paper's protocol);
4. report test metrics with full (binarised) labels.

Test metrics (all on the binarised test labels, relevant = label >= 1):

* ``avg_dcg``: the mean over all relevant test documents of ``1 / log2(1 + rank)`` --
  the full-information value of what SNIPS-DCG estimates (the selection criterion).
  This is our primary reading of the paper's "Avg. DCG": the paper selects and reports
  by the IPS estimate of DCG, i.e. an average of per-click DCG contributions.
* ``avg_dcg_ln``: the same average with the natural logarithm, ``1 / ln(1 + rank)``,
  i.e. minus the paper's lambda_DCG(r) = -1/log(1+r) of Table 1 taken literally.
* ``ndcg_binary``: full-depth NDCG on the binarised labels, averaged over the test
  queries that have a relevant document.
  No reading reproduces the paper's level (~0.70) *and* its ordering on MQ2008 alone
  (the paper trains on MQ2007+MQ2008); all are reported, the paper's values beside them.
* ``dcg_per_query``: mean over test queries of ``sum_rel 1/log2(1 + rank)``.
* ``avg_rank``: mean over relevant test documents of their rank (Joachims et al. 2017).
* ``ndcg10``: NDCG@10 on the graded labels (queries without relevant documents count 0).
"""

from __future__ import annotations

import warnings

import numpy as np

# SVM PropDCG's linearised weights lambda'(1 + H) are ~1e-2, so its useful C is ~100x that of
# PropRank: the grid reaches 1e5 so that no method's choice sits at the grid's edge.
DEFAULT_C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5)
QUICK_C_GRID = (1.0, 100.0, 1e4)
METHODS = ("naive", "proprank", "propdcg")
METHOD_NAMES = {"production": "Production ranker", "naive": "SVM Rank (naive, clicks as labels)",
                "proprank": "SVM PropRank", "propdcg": "SVM PropDCG", "skyline": "RankSVM skyline (full labels)",
                "ideal": "ideal ranking (test labels; ceiling)"}
# Rows of Table 3, in print order.
TABLE_ROWS = ("production", "naive", "proprank", "propdcg", "skyline", "ideal")


def test_metrics(scores, data) -> dict:
    """The test metrics of the module docstring for scores per row of ``data``."""
    from counterfactual_ltr._segments import rank_within_queries
    from counterfactual_ltr.metrics import ndcg

    ranks = rank_within_queries(scores, data.query_offsets)
    rel = data.relevance() == 1
    gains = 1.0 / np.log2(1.0 + ranks[rel])
    per_query = np.bincount(data.query_index[rel], gains, minlength=data.n_queries)
    n_relevant = np.bincount(data.query_index[rel], minlength=data.n_queries)
    ideal = np.cumsum(1.0 / np.log2(2.0 + np.arange(max(n_relevant.max(), 1))))
    has_relevant = n_relevant > 0
    return {
        "avg_dcg": float(gains.mean()),
        "avg_dcg_ln": float(np.mean(1.0 / np.log1p(ranks[rel]))),
        "ndcg_binary": float(np.mean(per_query[has_relevant] / ideal[n_relevant[has_relevant] - 1])),
        "dcg_per_query": float(per_query.mean()),
        "avg_rank": float(ranks[rel].mean()),
        "ndcg10": float(ndcg(scores, data.y, data.query_offsets, k=10)),
    }


def make_estimator(method: str, C: float, propensity=None, **kw):
    from counterfactual_ltr.estimators import RankSVM, SVMPropDCG, SVMPropRank

    if method == "naive":
        return RankSVM(C=C)
    if method == "proprank":
        return SVMPropRank(C=C, propensity=propensity)
    if method == "propdcg":
        return SVMPropDCG(C=C, propensity=propensity, **kw)
    raise ValueError(f"unknown method {method!r}")


def select_by_snips(models: dict, vali_log, propensity=None):
    """The C whose model has the highest SNIPS-DCG on the validation log, and all the estimates."""
    from counterfactual_ltr.evaluation import snips_estimate

    estimates = {C: snips_estimate(vali_log, m, metric="dcg", propensity=propensity).value for C, m in models.items()}
    return max(estimates, key=estimates.get), estimates


def simulate_run(train, vali, *, seed: int, n_passes: int, eta: float = 1.0, eps_minus: float = 0.1,
                 eps_plus: float = 1.0, production=None):
    """Production ranker and the training/validation click logs of one run."""
    from click_sim import PositionBasedClickModel, simulate_clicks, train_production_ranker

    if production is None:
        production = train_production_ranker(train, fraction=0.01, random_state=seed)
    model = PositionBasedClickModel(eta=eta, eps_minus=eps_minus, eps_plus=eps_plus)
    train_log = simulate_clicks(train, production, model, n_passes=n_passes, random_state=10_000 + seed)
    vali_log = simulate_clicks(vali, production, model, n_passes=n_passes, random_state=20_000 + seed)
    return production, train_log, vali_log


def fit_and_select(train_log, vali_log, test, *, methods=METHODS, C_grid=DEFAULT_C_GRID, propensity=None,
                   vali_propensity=None, with_test_curve: bool = False, vali=None) -> dict:
    """Fit every method for every C, select C by validation SNIPS-DCG, return test metrics.

    ``propensity`` is the model used for training (may be misspecified);
    ``vali_propensity`` the one used for selection (default: the same).
    With ``with_test_curve`` the test metrics of every C are kept too (to
    compare the SNIPS choice with the best C on true test labels); with ``vali``
    (the validation fold with its labels) also the true validation avg DCG of
    every C, which tells SNIPS's estimation error apart from the validation
    queries simply preferring another C than the test queries.
    """
    from sklearn.exceptions import ConvergenceWarning

    vali_propensity = propensity if vali_propensity is None else vali_propensity
    out = {}
    for method in methods:
        models = {}
        for C in C_grid:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                models[C] = make_estimator(method, C, propensity).fit(train_log)
        best_C, snips = select_by_snips(models, vali_log, vali_propensity)
        entry = {"C": best_C, "vali_snips_dcg": snips, **test_metrics(models[best_C].predict(test.X), test)}
        if method == "propdcg":
            entry["ccp_iterations"] = int(models[best_C].n_ccp_iter_)
        if with_test_curve:
            entry["test_by_C"] = {C: test_metrics(m.predict(test.X), test) for C, m in models.items()}
            if vali is not None:
                entry["vali_avg_dcg_by_C"] = {C: test_metrics(m.predict(vali.X), vali)["avg_dcg"]
                                              for C, m in models.items()}
        out[method] = entry
    return out


def skyline(train, test, C_grid=DEFAULT_C_GRID, vali=None) -> dict:
    """Full-information RankSVM; C chosen by validation NDCG@10 when ``vali`` is given."""
    from counterfactual_ltr.estimators import RankSVM
    from counterfactual_ltr.metrics import ndcg

    models = {C: RankSVM(C=C).fit(train.X, train.y, qid=train.qid) for C in C_grid}
    if vali is not None:
        best = max(models, key=lambda C: ndcg(models[C].predict(vali.X), vali.y, vali.query_offsets, k=10))
    else:
        best = 1.0 if 1.0 in models else C_grid[len(C_grid) // 2]
    return {"C": best, **test_metrics(models[best].predict(test.X), test)}


def mean_std(values) -> dict:
    arr = np.asarray(values, dtype=np.float64)
    return {"mean": float(arr.mean()), "std": float(arr.std(ddof=1)) if len(arr) > 1 else 0.0, "n": len(arr)}


def sweep(name: str, doc: str, xs, configure, *, xlabel: str, quick_xs=None, methods=("proprank", "propdcg"),
          metrics=("avg_dcg",), argv=None, extra_settings=None, series=None):
    """Run the protocol for every x (and seed), plot test metrics against x.

    ``configure(x) -> dict`` gives the keyword arguments of one run:
    ``n_passes``, ``eta``, ``eps_minus``, ``propensity`` (training and selection
    propensity model, default the true one). ``series`` optionally maps a label
    to a different ``configure`` (e.g. with and without clipping).
    """
    import time

    from ._common import MQ2007_NOTE, load_fold, parser, save_results

    p = parser(doc)
    p.add_argument("--fold", type=int, default=1)
    args = p.parse_args(argv)
    started = time.time()
    seeds = list(range(args.seeds or (1 if args.quick else 3)))
    xs = list(quick_xs if (args.quick and quick_xs is not None) else xs)
    C_grid = QUICK_C_GRID if args.quick else DEFAULT_C_GRID
    train, vali, test = load_fold(args.fold)
    series = series or {"": configure}
    productions = {}
    records = []
    for label, conf in series.items():
        for x in xs:
            for seed in seeds:
                kw = dict(conf(x))
                if args.quick:
                    kw["n_passes"] = max(2, kw["n_passes"] // 10)
                propensity = kw.pop("propensity", None)
                if propensity is None:  # the true model; the estimators' default assumes eta = 1
                    from counterfactual_ltr.propensity import PositionBasedPropensity

                    propensity = PositionBasedPropensity(eta=kw.get("eta", 1.0))
                if seed not in productions:
                    from click_sim import train_production_ranker

                    productions[seed] = train_production_ranker(train, fraction=0.01, random_state=seed)
                _, train_log, vali_log = simulate_run(train, vali, seed=seed, production=productions[seed], **kw)
                res = fit_and_select(train_log, vali_log, test, methods=methods, C_grid=C_grid,
                                     propensity=propensity)
                rec = {"series": label, "x": x, "seed": seed, "n_train_clicks": train_log.n_clicks, **kw,
                       "propensity": repr(propensity) if propensity is not None else "true eta", **res}
                records.append(rec)
                print(f"{label} x={x} seed={seed} clicks={train_log.n_clicks} " + " ".join(
                    f"{m}:{res[m]['avg_dcg']:.4f}" for m in methods), flush=True)
    production_metrics = {s: test_metrics(pr.predict(test.X), test) for s, pr in productions.items()}
    summary = {}
    for label in series:
        for method in methods:
            key = f"{method}{' ' + label if label else ''}"
            summary[key] = {}
            for metric in metrics:
                summary[key][metric] = [mean_std([r[method][metric] for r in records if r["x"] == x and r["series"] == label])
                                        for x in xs]
            summary[key]["clicks"] = [float(np.mean([r["n_train_clicks"] for r in records
                                                     if r["x"] == x and r["series"] == label])) for x in xs]
    sky = skyline(train, test, C_grid, vali)
    results = {"x": xs, "xlabel": xlabel, "summary": summary, "production": production_metrics, "skyline": sky,
               "runs": records}
    settings = {"data": f"MQ2008 Fold{args.fold}", "seeds": seeds, "C_grid": C_grid, "quick": args.quick,
                "selection": "C by SNIPS-DCG on validation-fold clicks (skyline: validation NDCG@10)",
                "note": MQ2007_NOTE, "metrics": __doc__, **(extra_settings or {})}
    path = save_results(name, results, settings, args.out, started)
    print(f"wrote {path}")
    if not args.no_plot:
        plot_sweep(name, results, metrics, f"MQ2008 Fold{args.fold} (no MQ2007)", args.out)
    return results


def plot_sweep(name: str, results: dict, metrics, title: str, out) -> None:
    """One PNG per metric: methods with +-1 sd bars, production and skyline as lines.

    Sweeps over the number of passes are drawn against the mean number of training
    clicks on a log axis, as in the paper's Figures 2, 3 and 8.
    """
    from ._common import figure_path, pyplot

    plt = pyplot()
    summary = results["summary"]
    by_clicks = results["xlabel"].startswith("passes")
    for metric in metrics:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for key, s in summary.items():
            xs = s["clicks"] if by_clicks else results["x"]
            m = np.array([v["mean"] for v in s[metric]])
            sd = np.array([v["std"] for v in s[metric]])
            ax.errorbar(xs, m, yerr=sd, marker="o", capsize=3, label=METHOD_NAMES.get(key, key))
        prod = np.mean([v[metric] for v in results["production"].values()])
        ax.axhline(prod, color="grey", ls="--", label="production ranker")
        if "skyline" in results:
            ax.axhline(results["skyline"][metric], color="black", ls=":", label="full-information skyline")
        if by_clicks:
            ax.set_xscale("log")
            ax.set_xlabel("training clicks (log scale)")
        else:
            ax.set_xlabel(results["xlabel"])
        ax.set_ylabel(f"test {metric}")
        ax.set_title(f"{name}: {title}", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        suffix = "" if len(metrics) == 1 else f"_{metric}"
        fig.savefig(figure_path(name + suffix, out), dpi=110)
        plt.close(fig)
