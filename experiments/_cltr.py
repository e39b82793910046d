"""The counterfactual-LTR protocol of Agarwal et al. (2019, sec. 5.1) on MQ2008, shared by the scripts.

One *run* = (fold, seed, click-model settings, number of passes):

1. production ranker: RankSVM on a random 1% of the training queries (seeded);
2. training and validation click logs simulated from its rankings (position-based model);
3. for each method and each C of the grid, fit on the training log; choose C by the
   SNIPS-DCG estimate on the validation log (the paper's protocol);
4. report test metrics with full (binarised) labels.

Reading of the paper's "Avg. DCG" (issue 16). The paper simulates clicks from, and evaluates on,
"binarized" labels, and its Table 1 defines lambda_DCG(rank) = -1/log(1 + rank) with the natural
log (the CCP gradient's log^2 term). On MQ2008 (labels 0/1/2) the reading that puts our rankers on
the paper's scale (production ~0.65, SVMs ~0.69-0.73) is **relevant = label 2, natural log**: with
relevant = label >= 1 even the ideal ranking scores only ~0.74 (ln). So clicks are simulated with
``relevance_threshold = RELEVANCE_THRESHOLD`` (2) and the primary metric is

* ``avg_dcg``: mean over all relevant (label >= threshold) test documents of ``1 / ln(1 + rank)``,
  the full-information value of what SNIPS-DCG estimates (the selection criterion).

The other readings are reported beside it (``READINGS``): ``avg_dcg_<base>_rel<t>`` for base
ln / log2 and threshold t = 1, 2, whatever threshold the clicks were simulated with.

* ``ndcg_binary``: full-depth NDCG (log2 discount) on the binarised labels, averaged over the test
  queries that have a relevant document.
* ``dcg_per_query``: mean over test queries of ``sum_rel 1/log2(1 + rank)``.
* ``avg_rank``: mean over relevant test documents of their rank (Joachims et al. 2017).
* ``ndcg10``: NDCG@10 on the graded labels (queries without relevant documents count 0).

Comparisons between methods are paired: the same (fold, seed) run gives both methods the
same production ranker and click logs, so ``paired`` reports the mean per-run difference with its
standard error and a two-sided paired t-test.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

# SVM PropDCG's linearised weights lambda'(1 + H) are ~1e-2, so its useful C is ~100x that of
# PropRank: the grid reaches 1e5 so that no method's choice sits at the grid's edge. With clicks on
# label-2 documents only, PropRank and the naive SVM pick C = 0.01 too, so it starts at 1e-3.
DEFAULT_C_GRID = (1e-3, 0.01, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5)
# Still, PropDCG's C sat at 1e5 with its validation SNIPS-DCG still rising in 10 of Table 3's 50 runs
# (results/table3.json), and PropRank's at 1e-3 in 4: the scripts re-run in the second pass of issue 16
# widen the grid a decade down and two up. (The naive SVM's many 1e-3 choices are a tie, not an edge:
# below some C every hinge is active, w is proportional to C and the ranking no longer changes.)
WIDE_C_GRID = (1e-4, *DEFAULT_C_GRID, 1e6, 1e7)
QUICK_C_GRID = (1.0, 100.0, 1e4)
METHODS = ("naive", "proprank", "propdcg")
METHOD_NAMES = {"production": "Production ranker", "naive": "SVM Rank (naive, clicks as labels)",
                "lambdarank": "LambdaRank (LightGBM, clicks as labels)", "deep": "Deep PropDCG",
                "proprank": "SVM PropRank", "propdcg": "SVM PropDCG", "skyline": "RankSVM skyline (full labels)",
                "ideal": "ideal ranking (test labels; ceiling)"}
# Rows of Table 3, in print order.
TABLE_ROWS = ("production", "naive", "lambdarank", "proprank", "propdcg", "skyline", "ideal")
RELEVANCE_THRESHOLD = 2  # relevant = label 2 (see the module docstring)
READINGS = ("avg_dcg_ln_rel2", "avg_dcg_log2_rel2", "avg_dcg_ln_rel1", "avg_dcg_log2_rel1")


def test_metrics(scores, data, threshold: int = RELEVANCE_THRESHOLD) -> dict:
    """The test metrics of the module docstring for scores per row of ``data``.

    ``threshold`` is the relevance threshold the clicks were simulated with; the primary
    ``avg_dcg`` (ln) uses it, and every reading of ``READINGS`` is added whatever it is.
    """
    from counterfactual_ltr._segments import rank_within_queries
    from counterfactual_ltr.metrics import ndcg

    ranks = rank_within_queries(scores, data.query_offsets)
    out = {}
    for t in (1, 2):
        r = ranks[data.y >= t]
        out[f"avg_dcg_ln_rel{t}"] = float(np.mean(1.0 / np.log1p(r)))
        out[f"avg_dcg_log2_rel{t}"] = float(np.mean(1.0 / np.log2(1.0 + r)))
    rel = data.y >= threshold
    gains = 1.0 / np.log2(1.0 + ranks[rel])
    per_query = np.bincount(data.query_index[rel], gains, minlength=data.n_queries)
    n_relevant = np.bincount(data.query_index[rel], minlength=data.n_queries)
    ideal = np.cumsum(1.0 / np.log2(2.0 + np.arange(max(n_relevant.max(), 1))))
    has_relevant = n_relevant > 0
    return {
        "avg_dcg": out[f"avg_dcg_ln_rel{threshold}"],
        "avg_dcg_log2": out[f"avg_dcg_log2_rel{threshold}"],
        **out,
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


def simulate_run(train, vali, *, seed: int, n_passes: int | None = None, n_clicks: int | None = None,
                 eta: float = 1.0, eps_minus: float = 0.1, eps_plus: float = 1.0, production=None,
                 relevance_threshold: int = RELEVANCE_THRESHOLD):
    """Production ranker and the training/validation click logs of one run.

    Either ``n_passes`` over the queries, or ``n_clicks``: the training log is then the shortest
    prefix of sessions (pass after pass) with at least that many clicks (over by at most one
    session's extra clicks), as the paper fixes the
    number of clicks (Figures 4-6); the validation log gets as many passes as that prefix began.
    """
    from click_sim import PositionBasedClickModel, simulate_clicks, train_production_ranker

    if (n_passes is None) == (n_clicks is None):
        raise ValueError("give exactly one of n_passes and n_clicks")
    if production is None:
        production = train_production_ranker(train, fraction=0.01, random_state=seed)
    model = PositionBasedClickModel(eta=eta, eps_minus=eps_minus, eps_plus=eps_plus)
    kw = dict(relevance_threshold=relevance_threshold)
    if n_clicks is None:
        train_log = simulate_clicks(train, production, model, n_passes=n_passes, random_state=10_000 + seed, **kw)
    else:
        train_log, n_passes = simulate_n_clicks(train, production, model, n_clicks, 10_000 + seed, **kw)
    vali_log = simulate_clicks(vali, production, model, n_passes=n_passes, random_state=20_000 + seed, **kw)
    return production, train_log, vali_log


def simulate_n_clicks(data, ranker, model, n_clicks: int, random_state: int, **kw):
    """``(log, passes begun)``: the fewest first sessions of a seeded simulation holding ``n_clicks`` clicks.

    ``simulate_clicks`` draws pass after pass from one generator, so a longer simulation with the same
    seed extends a shorter one: the prefix does not depend on how many passes were first tried.
    """
    from click_sim import simulate_clicks

    passes = 1
    while True:
        log = simulate_clicks(data, ranker, model, n_passes=passes, random_state=random_state, **kw)
        if log.n_clicks >= n_clicks:
            break
        if passes >= 100_000:
            raise ValueError(f"{n_clicks} clicks not reached in {passes} passes ({log.n_clicks} clicks)")
        passes = int(np.ceil(passes * 1.05 * n_clicks / max(log.n_clicks, 1))) + 1
    per_session = np.add.reduceat(log.clicks.astype(np.int64), log.session_offsets[:-1])
    n_sessions = int(np.searchsorted(np.cumsum(per_session), n_clicks)) + 1
    return log[:n_sessions], int(np.ceil(n_sessions / data.n_queries))


def paired(a, b) -> dict:
    """Mean per-run difference ``a - b`` with its standard error and a two-sided paired t-test."""
    from scipy import stats

    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")
    p = float(stats.ttest_1samp(d, 0.0).pvalue) if len(d) > 1 and d.std() > 0 else float("nan")
    return {"diff": float(d.mean()), "se": se, "p": p, "n": len(d), "wins": int((d > 0).sum())}


def grid_edge(snips: dict, grid) -> tuple:
    """``(edge, binds)`` of a SNIPS-chosen C: ``edge`` is "low", "high" or None.

    An edge choice *binds* when its validation SNIPS-DCG is strictly above its neighbour's (the
    criterion still rising at the end of the grid, so a wider grid might choose otherwise); a tie
    means both C give the same ranking (the small-C limit, where w is proportional to C), so no
    wider grid can change the result.
    """
    values = {float(C): v for C, v in snips.items()}
    scores = np.array([values[float(C)] for C in grid])
    best = int(np.argmax(scores))  # the first of ties, as select_by_snips
    if len(scores) < 2 or 0 < best < len(scores) - 1:
        return None, False
    return ("low" if best == 0 else "high"), bool(scores[best] > scores[1 if best == 0 else best - 1])


def edge_stats(entries, grid) -> dict:
    """How often the chosen C of these method entries sits at an end of ``grid``, and binds there."""
    edges = [grid_edge(e["vali_snips_dcg"], grid) for e in entries]
    n = len(edges)
    return {"n": n, "low": sum(e == "low" for e, _ in edges), "high": sum(e == "high" for e, _ in edges),
            "binding": sum(b for _, b in edges), "share_at_edge": sum(e is not None for e, _ in edges) / max(n, 1),
            "share_binding": sum(b for _, b in edges) / max(n, 1)}


def fit_and_select(train_log, vali_log, test, *, methods=METHODS, C_grid=DEFAULT_C_GRID, propensity=None,
                   vali_propensity=None, with_test_curve: bool = False, vali=None,
                   threshold: int = RELEVANCE_THRESHOLD) -> dict:
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
        entry = {"C": best_C, "vali_snips_dcg": snips, **test_metrics(models[best_C].predict(test.X), test, threshold)}
        if method == "propdcg":
            entry["ccp_iterations"] = int(models[best_C].n_ccp_iter_)
        if with_test_curve:
            entry["test_by_C"] = {C: test_metrics(m.predict(test.X), test, threshold) for C, m in models.items()}
            if vali is not None:
                entry["vali_avg_dcg_by_C"] = {C: test_metrics(m.predict(vali.X), vali, threshold)["avg_dcg"]
                                              for C, m in models.items()}
        out[method] = entry
    return out


# Inside the paper's LambdaRank grid (learning rate 0.001-0.1, leaves 2-256; it chose 0.1 and 4 on
# MQ2008): three points of it around the paper's choice, as each fit takes ~5 s on MQ2008 (100 rounds).
LAMBDARANK_GRID = ((0.01, 4), (0.1, 4), (0.1, 64))
QUICK_LAMBDARANK_GRID = ((0.1, 4), (0.1, 64))


def click_label_groups(log, with_positions: bool = False):
    """LambdaRank training data from a click log: clicks as labels, one group per distinct session.

    Sessions without clicks give LambdaRank no gradient and are left out; sessions of one query
    with the same click pattern are the same group, kept once with their count as weight (the
    objective's per-document gradients scale with the weight, so this equals repeating them).
    Returns ``(rows, labels, group_lengths, weights)``, and the 0-based shown position of every
    row after them with ``with_positions`` (LightGBM's ``Dataset(position=...)``).
    """
    lengths = np.diff(log.session_offsets)
    per_session = np.add.reduceat(log.clicks.astype(np.int64), log.session_offsets[:-1])
    log = log[per_session > 0]
    lengths = np.diff(log.session_offsets)
    # Key of a session: its query and its click vector by position (the ranking of a query is fixed).
    padded = np.zeros((log.n_sessions, lengths.max()), dtype=bool)
    padded[log.item_session, log.positions - 1] = log.clicks
    key = np.column_stack([log.session_query.astype(np.int64)[:, None].view(np.uint8),
                           np.packbits(padded, axis=1)])
    _, first, counts = np.unique(key, axis=0, return_index=True, return_counts=True)
    keep = log[first]
    out = (keep.docs, keep.clicks.astype(np.float64), np.diff(keep.session_offsets),
           np.repeat(counts.astype(np.float64), np.diff(keep.session_offsets)))
    return out + (keep.positions - 1,) if with_positions else out


class _Booster:
    """``predict(X)`` over a LightGBM booster, for the SNIPS estimate and the test metrics."""

    def __init__(self, booster):
        self.booster = booster

    def predict(self, X):
        return self.booster.predict(X, num_threads=1)


def fit_lambdarank(train_log, vali_log, test, *, seed: int, grid=LAMBDARANK_GRID, n_rounds: int = 100,
                   propensity=None, threshold: int = RELEVANCE_THRESHOLD) -> dict:
    """The paper's LambdaRank row: LightGBM lambdarank on clicks as labels, tuned by validation SNIPS-DCG.

    LightGBM is an ``experiments`` extra, imported here only.
    """
    import lightgbm

    rows, labels, groups, weights = click_label_groups(train_log)
    X = train_log.data.X[rows]
    fits = {}
    for lr, leaves in grid:
        params = {"objective": "lambdarank", "learning_rate": lr, "num_leaves": leaves,
                  "feature_fraction_bynode": 0.5,  # "each split does not use more than 50% of the features"
                  "num_threads": 1, "deterministic": True, "seed": seed, "verbose": -1}
        data = lightgbm.Dataset(X, labels, group=groups, weight=weights)
        fits[(lr, leaves)] = _Booster(lightgbm.train(params, data, num_boost_round=n_rounds))
    best, snips = select_by_snips(fits, vali_log, propensity)
    return {"learning_rate": best[0], "num_leaves": best[1], "n_train_rows": len(rows), "n_groups": len(groups),
            "vali_snips_dcg": {f"{lr}/{leaves}": v for (lr, leaves), v in snips.items()},
            **test_metrics(fits[best].predict(test.X), test, threshold)}


def skyline(train, test, C_grid=DEFAULT_C_GRID, vali=None, threshold: int = RELEVANCE_THRESHOLD) -> dict:
    """Full-information RankSVM; C chosen by validation NDCG@10 when ``vali`` is given."""
    from counterfactual_ltr.estimators import RankSVM
    from counterfactual_ltr.metrics import ndcg

    models = {C: RankSVM(C=C).fit(train.X, train.y, qid=train.qid) for C in C_grid}
    if vali is not None:
        best = max(models, key=lambda C: ndcg(models[C].predict(vali.X), vali.y, vali.query_offsets, k=10))
    else:
        best = 1.0 if 1.0 in models else C_grid[len(C_grid) // 2]
    return {"C": best, **test_metrics(models[best].predict(test.X), test, threshold)}


def mean_std(values) -> dict:
    arr = np.asarray(values, dtype=np.float64)
    return {"mean": float(arr.mean()), "std": float(arr.std(ddof=1)) if len(arr) > 1 else 0.0, "n": len(arr)}


_FOLDS: dict = {}


def _sweep_run(task):
    """One (series, x, seed) run of a sweep; module-level so that worker processes can run it."""
    label, x, seed, fold, kw, methods, C_grid = task
    from click_sim import train_production_ranker

    from experiments._common import load_fold

    if fold not in _FOLDS:
        _FOLDS[fold] = load_fold(fold)
    train, vali, test = _FOLDS[fold]
    kw = dict(kw)
    propensity = kw.pop("propensity", None)
    if propensity is None:  # the true model; the estimators' default assumes eta = 1
        from counterfactual_ltr.propensity import PositionBasedPropensity

        propensity = PositionBasedPropensity(eta=kw.get("eta", 1.0))
    production = train_production_ranker(train, fraction=0.01, random_state=seed)
    _, train_log, vali_log = simulate_run(train, vali, seed=seed, production=production, **kw)
    res = fit_and_select(train_log, vali_log, test, methods=methods, C_grid=C_grid, propensity=propensity)
    rec = {"series": label, "x": x, "seed": seed, "n_train_clicks": train_log.n_clicks,
           "n_train_sessions": train_log.n_sessions, **kw, "propensity": repr(propensity), **res}
    print(f"{label} x={x} seed={seed} clicks={train_log.n_clicks} " + " ".join(
        f"{m}:{res[m]['avg_dcg']:.4f}" for m in methods), flush=True)
    return rec, test_metrics(production.predict(test.X), test)


# Paired comparisons of the sweeps (first minus second), where both methods were run.
SWEEP_PAIRS = (("propdcg", "proprank"), ("proprank", "naive"), ("propdcg", "naive"))


def sweep(name: str, doc: str, xs, configure, *, xlabel: str, quick_xs=None, methods=("proprank", "propdcg"),
          metrics=("avg_dcg",), argv=None, extra_settings=None, series=None, default_seeds: int = 3,
          C_grid=DEFAULT_C_GRID):
    """Run the protocol for every x (and seed), plot test metrics against x.

    ``configure(x) -> dict`` gives the keyword arguments of one run: ``n_passes`` or
    ``n_clicks`` (the paper fixes the number of training clicks in Figures 4-6), ``eta``,
    ``eps_minus``, ``propensity`` (training and selection propensity model, default the true
    one). ``series`` optionally maps a label to a different ``configure`` (e.g. with and
    without clipping). ``--jobs N`` runs the (series, x, seed) runs in N processes; the
    results do not depend on it. The methods are compared paired per x (``SWEEP_PAIRS``).

    ``--seed-start S --seeds N`` runs seeds S..S+N-1 only; ``--merge A.json B.json ...`` makes one
    result of such parts without running anything (a run depends only on its seed, so the merged
    result is the one a single run over all the seeds gives). ``C_grid`` is the script's full-mode grid.
    """
    import time
    from concurrent.futures import ProcessPoolExecutor

    from experiments._common import MQ2007_NOTE, parser, save_results

    p = parser(doc)
    p.add_argument("--fold", type=int, default=1)
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--seed-start", type=int, default=0, help="first seed (to add seeds to a result, see --merge)")
    p.add_argument("--merge", type=Path, nargs="+", default=None,
                   help="JSON files of runs of this script with other seeds: write their union, run nothing")
    args = p.parse_args(argv)
    started = time.time()
    xs = list(quick_xs if (args.quick and quick_xs is not None) else xs)
    C_grid = QUICK_C_GRID if args.quick else C_grid
    series = series or {"": configure}
    settings = {"data": f"MQ2008 Fold{args.fold}", "C_grid": C_grid, "quick": args.quick,
                "relevance_threshold": RELEVANCE_THRESHOLD, "methods": methods,
                "avg_dcg": f"mean over test documents with label >= {RELEVANCE_THRESHOLD} of 1/ln(1 + rank)",
                "selection": "C by SNIPS-DCG on validation-fold clicks (skyline: validation NDCG@10)",
                "note": MQ2007_NOTE, "metrics": __doc__, **(extra_settings or {})}
    if args.merge:
        records, production_metrics, sky, settings, seconds = merge_parts(args.merge, settings)
        started = time.time() - seconds  # the JSON records the sum of the parts' times
        order = list(series)  # the order a single run over all the seeds writes
        records.sort(key=lambda r: (order.index(r["series"]), xs.index(r["x"]), r["seed"]))
    else:
        seeds = list(range(args.seed_start, args.seed_start + (args.seeds or (1 if args.quick else default_seeds))))
        tasks = []
        for label, conf in series.items():
            for x in xs:
                for seed in seeds:
                    kw = dict(conf(x))
                    if args.quick and "n_passes" in kw:
                        kw["n_passes"] = max(2, kw["n_passes"] // 10)
                    if args.quick and "n_clicks" in kw:
                        kw["n_clicks"] = max(1000, kw["n_clicks"] // 50)
                    tasks.append((label, x, seed, args.fold, kw, methods, C_grid))
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs) as pool:
                outputs = list(pool.map(_sweep_run, tasks))
        else:
            outputs = [_sweep_run(t) for t in tasks]
        records = [rec for rec, _ in outputs]
        production_metrics = {t[2]: prod for t, (_, prod) in zip(tasks, outputs)}
        train, vali, test = _FOLDS.get(args.fold) or _load(args.fold)
        sky = skyline(train, test, C_grid, vali)
        settings["seeds"] = seeds
    results = summarise_sweep(records, xs, series, methods, metrics, C_grid)
    results.update({"x": xs, "xlabel": xlabel, "production": production_metrics, "skyline": sky, "runs": records})
    path = save_results(name, results, settings, args.out, started)
    print(f"wrote {path}")
    for key, e in results["C_at_grid_edge"].items():
        print(f"{key}: chosen C at an end of the grid in {e['low'] + e['high']}/{e['n']} runs "
              f"(low {e['low']}, high {e['high']}), binding in {e['binding']}")
    if not args.no_plot:
        plot_sweep(name, results, metrics, f"MQ2008 Fold{args.fold} (no MQ2007)", args.out)
    return results


def merge_parts(paths, settings: dict):
    """Records, production metrics, skyline, settings and summed seconds of sweep results made in parts.

    The parts must agree on every setting but the seeds (the same grid, reading, click counts, ...),
    and no (series, x, seed) run may appear twice.
    """
    import json

    parts = [json.loads(Path(f).read_text()) for f in paths]
    ignore = {"seeds", "merged_from", "seconds_of_parts", "cpu_seconds_of_parts", "metrics", "note"}
    current = json.loads(json.dumps(settings, default=list))  # tuples as JSON has them
    for f, part in zip(paths, parts):
        for key in (set(current) | set(part["settings"])) - ignore:
            if part["settings"].get(key) != current.get(key):
                raise ValueError(f"--merge: {f} has {key} = {part['settings'].get(key)!r}, this script "
                                 f"{current.get(key)!r}; only parts with the same settings can be merged")
    records, seen = [], set()
    for f, part in zip(paths, parts):
        for r in part["results"]["runs"]:
            key = (r["series"], r["x"], r["seed"])
            if key in seen:
                raise ValueError(f"--merge: run (series {r['series']!r}, x {r['x']}, seed {r['seed']}) of {f} "
                                 "is in another part too")
            seen.add(key)
            records.append(r)
    production = {int(k): v for part in parts for k, v in part["results"]["production"].items()}
    seeds = sorted({r["seed"] for r in records})
    merged = {**settings, "seeds": seeds, "merged_from": [part["command"] for part in parts],
              "seconds_of_parts": [part.get("seconds") for part in parts],
              "cpu_seconds_of_parts": [part.get("cpu_seconds") for part in parts]}
    return (records, dict(sorted(production.items())), parts[0]["results"]["skyline"], merged,
            sum(part.get("seconds") or 0 for part in parts))


def summarise_sweep(records, xs, series, methods, metrics, C_grid) -> dict:
    """Per series and x: means +- sd, paired differences (``SWEEP_PAIRS``) and C-at-grid-edge counts."""
    summary, paired_all, edges = {}, {}, {}
    for label in series:
        def at(x, label=label):
            return [r for r in records if r["x"] == x and r["series"] == label]

        for method in methods:
            key = f"{method}{' ' + label if label else ''}"
            summary[key] = {metric: [mean_std([r[method][metric] for r in at(x)]) for x in xs] for metric in metrics}
            summary[key]["clicks"] = [float(np.mean([r["n_train_clicks"] for r in at(x)])) for x in xs]
            edges[key] = edge_stats([r[method] for x in xs for r in at(x)], C_grid)
            edges[key]["by_x"] = [edge_stats([r[method] for r in at(x)], C_grid) for x in xs]
        paired_all[label or "all"] = {
            f"{a}-{b}": {metric: [paired([r[a][metric] for r in at(x)], [r[b][metric] for r in at(x)]) for x in xs]
                         for metric in metrics}
            for a, b in SWEEP_PAIRS if a in methods and b in methods}
    return {"summary": summary, "paired": paired_all, "C_at_grid_edge": edges,
            # the name the README and earlier results use
            "paired_propdcg_minus_proprank": {k: v["propdcg-proprank"] for k, v in paired_all.items()
                                              if "propdcg-proprank" in v}}


def _load(fold):
    from experiments._common import load_fold

    _FOLDS[fold] = load_fold(fold)
    return _FOLDS[fold]


def plot_sweep(name: str, results: dict, metrics, title: str, out) -> None:
    """One PNG per metric: methods with +-1 sd bars, production and skyline as lines.

    Sweeps over the number of passes are drawn against the mean number of training
    clicks on a log axis, as in the paper's Figures 2, 3 and 8.
    """
    from experiments._common import figure_path, pyplot

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
