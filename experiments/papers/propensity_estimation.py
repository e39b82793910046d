"""Propensities estimated from the logs (swap, harvest, regression EM, trust-bias EM) on MQ2008.

Part 1 (recovery): for true examination curves eta in {0.5, 1, 2}, a non-power-law curve and a
trust-bias setting, simulate logs of growing size on MQ2008 Fold1 train and estimate
theta_r / theta_1 at positions 1-10 with every method:

* swap: the production ranker, 25% of sessions with position 1 swapped with 2..10 (also at
  larger sizes than the others: it uses only a quarter of the sessions, and at eta = 2 the
  top document moved to position 10 is clicked about once in 200 sessions);
* harvest: three production rankers trained on different 1% subsets, no randomisation;
* em: one ranker's log, a Plackett-Luce ranker over the first production ranker's scores at
  temperature 1 (its top document is the deterministic top in 49% of the sessions), with the
  built-in logistic relevance model; "em (T=0.3)" (81%) and "em (deterministic)" are the same
  with less or no variation of the ranking: the less a document's position varies, the more
  only the relevance model's form tells position from relevance, and its misfit biases theta;
* trust_em: the three-ranker log (eps+ assumed position-independent, max theta = 1).

Every log shows the top 10 (max_shown = 10). Reported: the largest relative error over positions
1-10 per size, the fewest sessions at which it is below 10%, and the bootstrap 95% intervals
(200 replicates, queries resampled) at every size.

Part 2 (Table-3 style): SVM PropDCG on the production log (eta = 1, eps- = 0.1) trained and
selected (SNIPS-DCG on validation clicks) with the true propensities, with the "harvest"
estimate (from a separate three-ranker log), with the "em" estimate (from a separate log of the
production ranker made stochastic, temperature 1) and with a misspecified eta = 0.5 power law;
the share of the production-to-skyline gap each closes.

Part 3 (trust bias in training): clicks with trust bias (theta_r = 1/r, eps+ = 1,
eps-_r = 0.6 / r^0.7, top 10 shown); SVM PropDCG trained with plain IPS on the true theta, with
the affine correction on the true trust model, and on the "trust_em" estimate from the same
log. C is not selected (SNIPS with the affine correction belongs to the evaluation module):
test metrics at every C of a small grid.

python -m experiments.papers.propensity_estimation [--quick] [--seeds N]
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from experiments import _cltr

NAME = "propensity_estimation"
K = 10
R = np.arange(1, K + 1)
CURVES = {
    "eta=0.5": {"eta": 0.5},
    "eta=1": {"eta": 1.0},
    "eta=2": {"eta": 2.0},
    "non-power-law": {"examination": [1.0, 0.95, 0.7, 0.65, 0.5, 0.3, 0.28, 0.2, 0.12, 0.1]},
    "trust bias": {"eta": 1.0, "eps_plus": 1.0, "eps_minus": list(np.round(0.6 / R ** 0.7, 4))},
}
METHODS = ("swap", "harvest", "em", "trust_em")
# Regression EM on one ranker's log: "em" a Plackett-Luce ranker over the first production ranker's
# scores at temperature 1 (its top document is the deterministic top in 49% of the sessions), beside the
# same at temperature 0.3 (81%) and the deterministic ranker, to show what identifies theta.
ROWS = ("swap", "harvest", "em", "em (T=0.3)", "em (deterministic)", "trust_em")
PL_TEMPERATURE = {"em": 1.0, "em (T=0.3)": 0.3}


def _click_model(setting):
    from click_sim import PositionBasedClickModel

    kw = dict(CURVES[setting])
    return PositionBasedClickModel(eta=kw.pop("eta", 1.0), eps_minus=kw.pop("eps_minus", 0.1),
                                   eps_plus=kw.pop("eps_plus", 1.0), examination=kw.pop("examination", None))


def recovery(train, rankers, settings, passes, n_bootstrap, seed, swap_passes=()):
    """Estimates of every method for every setting and size (``swap_passes``: further sizes for swap only)."""
    from click_sim import StochasticRanker, SwapIntervention, simulate_clicks
    from counterfactual_ltr.propensity import estimate_propensities

    out = {}
    for setting in settings:
        model = _click_model(setting)
        truth = model.examination_curve(K)
        truth = truth / truth[0]
        rows = []
        for n_passes in sorted(set(passes) | set(swap_passes)):
            methods = [m for m in ROWS if n_passes in passes or m == "swap"]
            if setting == "trust bias":  # position-only methods are not consistent under trust bias
                methods = [m for m in methods if m == "trust_em"]
            logs = {}
            for method in methods:
                if method == "swap":
                    logs[method] = simulate_clicks(train, rankers[0], model, n_passes, seed, max_shown=K,
                                                   intervention=SwapIntervention(0.25, max_position=K))
                elif method in ("harvest", "trust_em"):  # one three-ranker log for both
                    if "harvest" not in logs:
                        logs["harvest"] = simulate_clicks(train, rankers, model, n_passes, seed + 1, max_shown=K)
                    logs[method] = logs["harvest"]
                elif method in PL_TEMPERATURE:
                    logs[method] = simulate_clicks(train, StochasticRanker(rankers[0], PL_TEMPERATURE[method]),
                                                   model, n_passes, seed + 2, max_shown=K)
                else:  # em (deterministic)
                    logs[method] = simulate_clicks(train, rankers[0], model, n_passes, seed + 3, max_shown=K)
            for method in methods:
                log = logs[method]
                started = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        est = estimate_propensities(log, method.split(" ")[0], max_position=K, random_state=seed,
                                                    n_bootstrap=n_bootstrap)
                    except ValueError as err:  # too little data at this size: recorded, not hidden
                        rows.append({"method": method, "n_passes": n_passes, "error": str(err)})
                        continue
                row = {"method": method, "n_passes": n_passes, "sessions": log.n_sessions,
                       "seconds": time.perf_counter() - started, "relative": est.relative_,
                       "max_rel_error": float(np.max(np.abs(est.relative_ / truth - 1))), "eta": est.eta_}
                if est.lower_ is not None:
                    row.update(lower=est.lower_, upper=est.upper_,
                               covers=float(np.mean((est.lower_ <= truth) & (truth <= est.upper_))))
                if method == "trust_em":
                    row.update(eps_plus=est.eps_plus, eps_minus=est.eps_minus,
                               eps_plus_error=float(np.max(np.abs(est.eps_plus - model.trust_model(K).eps_plus))),
                               eps_minus_error=float(np.max(np.abs(est.eps_minus
                                                                   - model.trust_model(K).eps_minus))))
                rows.append(row)
                print(f"{setting:14s} {method:17s} passes={n_passes:5d} sessions={log.n_sessions:8d} "
                      f"max rel err={row['max_rel_error']:.3f} ({row['seconds']:.1f} s)", flush=True)
            del logs
        needed = {}
        for method in ROWS:
            ok = [r["sessions"] for r in rows if r["method"] == method and r.get("max_rel_error", 1) < 0.10]
            mine = [r for r in rows if r["method"] == method]
            if mine:
                needed[method] = min(ok) if ok else None
        out[setting] = {"truth": truth, "rows": rows, "sessions_for_10pct": needed}
    return out


def table(train, vali, test, rankers, seeds, passes, est_passes, C_grid):
    """Table-3-style test metrics of SVM PropDCG with true, estimated and misspecified propensities."""
    from click_sim import PositionBasedClickModel, StochasticRanker, simulate_clicks, train_production_ranker
    from counterfactual_ltr.propensity import PositionBasedPropensity, estimate_propensities

    runs = []
    sky = _cltr.skyline(train, test, C_grid=_cltr.DEFAULT_C_GRID, vali=vali)
    for seed in seeds:
        production, train_log, vali_log = _cltr.simulate_run(train, vali, seed=seed, n_passes=passes)
        others = [train_production_ranker(train, 0.01, random_state=1000 * (seed + 1) + i) for i in range(2)]
        harvest_log = simulate_clicks(train, [production, *others], PositionBasedClickModel(1.0, 0.1, 1.0),
                                      est_passes, 30_000 + seed)
        em_log = simulate_clicks(train, StochasticRanker(production, PL_TEMPERATURE["em"]),
                                 PositionBasedClickModel(1.0, 0.1, 1.0), est_passes, 35_000 + seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimated = estimate_propensities(harvest_log, "harvest", max_position=K, n_bootstrap=0)
            by_em = estimate_propensities(em_log, "em", max_position=K, n_bootstrap=0)
        propensities = {"true": PositionBasedPropensity(1.0), "estimated (harvest)": estimated,
                        "estimated (em)": by_em, "misspecified (eta=0.5)": PositionBasedPropensity(0.5)}
        run = {"seed": seed, "estimated_relative": estimated.relative_, "estimated_eta": estimated.eta_,
               "em_relative": by_em.relative_, "em_eta": by_em.eta_,
               "production": _cltr.test_metrics(production.predict(test.X), test), "skyline": sky}
        for label, prop in propensities.items():
            run[label] = _cltr.fit_and_select(train_log, vali_log, test, methods=("propdcg",), C_grid=C_grid,
                                              propensity=prop)["propdcg"]
        runs.append(run)
        print(f"seed={seed} " + " ".join(f"{k}:{run[k]['avg_dcg']:.4f}" for k in propensities), flush=True)
    summary = {}
    for metric in ("avg_dcg", "ndcg10"):
        prod = np.mean([r["production"][metric] for r in runs])
        sky_m = sky[metric]
        row = {"production": prod, "skyline": sky_m}
        for label in ("true", "estimated (harvest)", "estimated (em)", "misspecified (eta=0.5)"):
            value = float(np.mean([r[label][metric] for r in runs]))
            row[label] = value
            row[f"{label}: share of gap closed"] = (value - prod) / (sky_m - prod)
        row["estimated / true gap closed"] = ((row["estimated (harvest)"] - prod) / (row["true"] - prod))
        row["em estimate / true gap closed"] = ((row["estimated (em)"] - prod) / (row["true"] - prod))
        summary[metric] = row
    return {"runs": runs, "summary": summary}


def trust_training(train, test, seeds, passes, C_grid):
    """Test metrics of SVM PropDCG under trust bias: plain IPS against the affine correction."""
    from click_sim import simulate_clicks, train_production_ranker
    from counterfactual_ltr.estimators import SVMPropDCG
    from counterfactual_ltr.propensity import estimate_propensities

    model = _click_model("trust bias")
    runs = []
    for seed in seeds:
        production = train_production_ranker(train, 0.01, random_state=seed)
        log = simulate_clicks(train, production, model, passes, 40_000 + seed, max_shown=K)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimated = estimate_propensities(log, "trust_em", max_position=K, n_bootstrap=0)
        propensities = {"ips (true theta)": model.propensity_model(), "affine (true)": model.trust_model(K),
                        "affine (trust_em estimate)": estimated}
        run = {"seed": seed, "production": _cltr.test_metrics(production.predict(test.X), test)}
        for label, prop in propensities.items():
            run[label] = {}
            for C in C_grid:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ranker = SVMPropDCG(C=C, propensity=prop).fit(log)
                run[label][C] = _cltr.test_metrics(ranker.predict(test.X), test)
        runs.append(run)
        print(f"trust training seed={seed} " + " ".join(
            f"{k}:{max(v['avg_dcg'] for v in run[k].values()):.4f}" for k in propensities), flush=True)
    summary = {label: {C: float(np.mean([r[label][C]["avg_dcg"] for r in runs])) for C in C_grid}
               for label in ("ips (true theta)", "affine (true)", "affine (trust_em estimate)")}
    summary["production"] = float(np.mean([r["production"]["avg_dcg"] for r in runs]))
    return {"avg_dcg_by_C": summary, "runs": runs}


def main(argv=None):
    from click_sim import train_production_ranker

    from experiments._common import figure_path, load_fold, parser, pyplot, save_results

    p = parser(__doc__)
    args = p.parse_args(argv)
    started = time.time()
    train, vali, test = load_fold(1)
    rankers = [train_production_ranker(train, 0.01, random_state=s) for s in range(3)]
    if args.quick:
        settings, passes, swap_passes, n_boot = ["eta=1", "trust bias"], [40], [], 20
        seeds, t_passes, est_passes, C_grid = [0], 10, 40, (100.0,)
    else:
        settings, passes, swap_passes, n_boot = list(CURVES), [200, 1600], [6400, 12800], 200
        seeds, t_passes, est_passes = list(range(args.seeds or 3)), 100, 200
        C_grid = (10.0, 100.0, 1e3, 1e4)
    rec = recovery(train, rankers, settings, passes, n_boot, seed=0, swap_passes=swap_passes)
    tab = table(train, vali, test, rankers, seeds, t_passes, est_passes, C_grid)
    trust = trust_training(train, test, seeds, t_passes, (100.0,) if args.quick else (100.0, 1e3))
    sessions_needed = {s: rec[s]["sessions_for_10pct"] for s in rec}
    results = {"recovery": rec, "sessions_for_10pct": sessions_needed, "table": tab["summary"], "runs": tab["runs"],
               "trust_training": trust}
    settings_out = {"data": "MQ2008 Fold1", "max_position": K, "curves": CURVES, "passes": passes,
                    "queries_per_pass": train.n_queries, "swap_passes": swap_passes,
                    "n_bootstrap": n_boot, "max_shown": K, "em_loggers": {m: f"StochasticRanker(production 0, temperature={t})"
                                                     for m, t in PL_TEMPERATURE.items()},
                    "swap_share": 0.25, "harvest_loggers": "3 production rankers (RankSVM on 1% subsets, seeds 0-2)",
                    "table_passes": t_passes, "estimation_passes": est_passes, "C_grid": C_grid, "seeds": seeds}
    save_results(NAME, results, settings_out, out=args.out, started=started)
    if not args.no_plot:
        plt = pyplot()
        fig, axes = plt.subplots(1, len(rec), figsize=(4 * len(rec), 3.4), squeeze=False)
        for ax, (setting, entry) in zip(axes[0], rec.items()):
            ax.plot(R, entry["truth"], "k--", label="truth")
            biggest = max(r["n_passes"] for r in entry["rows"])
            for row in entry["rows"]:
                if row["n_passes"] == biggest and "relative" in row:
                    line, = ax.plot(R, row["relative"], "o-", ms=3, label=row["method"])
                    if "lower" in row:
                        ax.fill_between(R, row["lower"], row["upper"], color=line.get_color(), alpha=0.2)
            ax.set_title(f"{setting} ({biggest} passes)")
            ax.set_xlabel("position")
            ax.set_yscale("log")
        axes[0][0].set_ylabel("theta_r / theta_1")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(figure_path(NAME, args.out), dpi=120)
    return results


if __name__ == "__main__":
    main()
