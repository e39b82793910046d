"""Cascade clicks: SVM PropDCG or GBDTPropDCG with position-based against cascade-aware propensities.

    python -m experiments.benchmarks.bench_cascade_propensity [--seeds 5] [--passes 5] [--sigma 0.6] [--gamma 0.9]
        [--clicks dbn|pbm] [--learner svm-propdcg|gbdt-propdcg] [--data mq2008|synthetic]
        [--dbn-passes N] [--min-propensity 0.01] [--C 1,10,100,1000,10000] [--oracle]
        [--trees 100] [--cascade-model dbn,ubm] [--temperature T] [--show-weights]

``--clicks pbm`` draws position-based clicks instead (where ``1 / r`` is the truth: the cascade-aware
propensity should lose nothing there); ``--learner gbdt-propdcg`` fits GBDTPropDCG (``--trees`` trees of 7
leaves, default 100; a grid such as ``100,300,1000`` is chosen from per arm by 3-fold CV SNIPS, as
``C`` is, but not extended at an edge) instead of SVM PropDCG; ``--data synthetic`` takes the non-linear synthetic set of
``experiments.papers.trees`` (80 % of its queries for training, 20 % for the test).

The production ranker (a Ranking SVM on 1 % of MQ2008 Fold1's training queries, as in Agarwal et
al. 2019) shows the top 10 of every training query ``--passes`` times; users click as the DBN
says (``click_sim.cascade_clicks``: attractiveness 0.05, 0.5, 0.9 for labels 0, 1, 2,
satisfaction ``--sigma`` after a click, perseverance ``--gamma``). Per seed (a new log) SVM PropDCG is
fitted with the position-based propensity ``1 / r`` (eta = 1), with the position-based model
estimated from the same log (``estimate_propensities(log, "pbm")``; left out where it refuses the
log, named "unidentified" where it warns that the log cannot identify it) and with the cascade-aware
propensity of each click model of ``--cascade-model`` (default DBN) fitted to the same log
(``estimate_propensities(log, "dbn")``, Vardasbi et al. 2020); NDCG@10 on Fold1's test queries,
each against ``1 / r`` paired over seeds (Student t on the differences).
Trained on MQ2008 only (MQ2007 is not available here). ``--temperature T`` makes the logger
stochastic instead (Plackett-Luce over the production ranker's scores divided by their standard
deviation and by ``T``): the pages then vary from pass to pass, which is what lets a log tell a
position's examination from a document's attractiveness (a deterministic logger leaves that to the
click model's form).

SVM PropDCG's ``C`` is chosen per arm, as a user would: ``grid_search`` over ``--C`` (3-fold CV over
queries, SNIPS-DCG of the held-out clicks under the arm's own propensity, the grid extended at a
binding edge); a single value fixes it. ``--oracle`` adds the cascade-aware propensity of the DBN
that drew the clicks (its true attractiveness, satisfaction and perseverance): what the fitted DBN
would give with no estimation error. With many ``--passes`` every arm nears its own target (the
logger shows the same pages every pass, so more passes only average out the clicks): ``1 / r``
and the estimated position-based model then learn from a biased weighting of the attractiveness,
the cascade-aware propensities from an unbiased one.

Two checks of why the cascade-aware propensity can lose: ``--dbn-passes 200`` fits the DBN on a
separate 200-pass log of the same users (its parameters then near the truth: is the shortfall the
DBN's estimation error?), ``--min-propensity 0.1`` floors the propensities higher (is it a few large
weights?).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

#: The simulated users' attractiveness by label (0, 1, 2 and above).
ATTRACTIVENESS = np.array([0.05, 0.5, 0.9])


def cascade_log(train, logger_scores, passes, seed, sigma=0.6, gamma=0.9):
    """A log of the logger's top 10 with DBN clicks (alpha by label, satisfaction sigma, perseverance gamma)."""
    from click_sim import PositionBasedClickModel, simulate_clicks
    from click_sim.cascade import cascade_clicks
    from counterfactual_ltr import ClickLog

    shown = simulate_clicks(train, logger_scores, PositionBasedClickModel(eta=1.0), n_passes=passes,
                            random_state=seed, max_shown=10)
    length = np.diff(shown.session_offsets)
    page = np.repeat(np.arange(len(length)), length)
    col = np.arange(shown.n_items) - shown.session_offsets[:-1][page]
    alpha = np.zeros((len(length), int(length.max())))
    alpha[page, col] = ATTRACTIVENESS[np.minimum(train.y[shown.docs], 2)]
    clicks = cascade_clicks("dbn", alpha, sigma=np.full_like(alpha, sigma), gamma=gamma, random_state=seed)
    return ClickLog(train, shown.session_query, shown.session_offsets, shown.docs, clicks[page, col])


def position_log(train, logger_scores, passes, seed):
    """The same pages with position-based clicks (eta = 1, clicks on label 2, eps- 0.1): where ``1 / r`` is right."""
    from click_sim import PositionBasedClickModel, simulate_clicks

    return simulate_clicks(train, logger_scores, PositionBasedClickModel(eta=1.0), n_passes=passes,
                           random_state=seed, max_shown=10)


def data_sets(name):
    """``(train, test)``: MQ2008 Fold1, or a draw of the non-linear synthetic set of ``experiments.papers.trees``."""
    from click_sim import load_letor, make_ranking
    from experiments._common import data_missing, shared_data_dir
    from experiments.papers.trees import SYNTHETIC

    if name == "synthetic":
        data = make_ranking(**SYNTHETIC, random_state=0)
        order = np.random.default_rng(0).permutation(data.n_queries)
        cut = int(0.8 * data.n_queries)
        return data.subset(np.sort(order[:cut])), data.subset(np.sort(order[cut:]))
    fold = shared_data_dir() / "MQ2008" / "Fold1"
    if not (fold / "train.txt").is_file():
        raise data_missing("MQ2008/Fold1")
    return load_letor(fold / "train.txt"), load_letor(fold / "test.txt")


def true_dbn(train, log, sigma, gamma):
    """The DBN that drew the clicks, as a click model: its true attractiveness (by label), ``sigma`` and ``gamma``."""
    from counterfactual_ltr.click_models import DynamicBayesianNetworkModel

    alpha = ATTRACTIVENESS[np.minimum(train.y, 2)]          # one per row of train, as log.row_keys() lists them
    return DynamicBayesianNetworkModel.from_parameters(*log.row_keys(), alpha, sigma=np.full(log.n_rows, sigma),
                                                       gamma=gamma)


def cascade_propensity(args, model, train, logger, seed, log):
    """The cascade-aware propensity of ``--cascade-model``: fitted on ``log``, or with ``--dbn-passes`` on a separate log."""
    from counterfactual_ltr import estimate_propensities
    from counterfactual_ltr.propensity.click_models import CascadePropensity

    source = log if args.dbn_passes is None else \
        cascade_log(train, logger, args.dbn_passes, seed + 1000, args.sigma, args.gamma) if args.clicks == "dbn" \
        else position_log(train, logger, args.dbn_passes, seed + 1000)
    fitted = estimate_propensities(source, model)
    return CascadePropensity(fitted.click_model, min_propensity=args.min_propensity)


def propensities(args, train, logger, seed, log):
    """The arms: ``{name: propensity}``.

    The estimated position-based model is left out where the log refuses it, and named as warned where
    the library warns that the log cannot identify it (a logger that never varies its ranking).
    """
    from counterfactual_ltr import estimate_propensities
    from counterfactual_ltr.propensity import IdentificationWarning
    from counterfactual_ltr.propensity.click_models import CascadePropensity

    props = {"1/r": 1.0}
    for model in args.cascade_model:
        props[f"{model} cascade-aware"] = cascade_propensity(args, model, train, logger, seed, log)
    if args.oracle and args.clicks == "dbn":
        props["dbn (true parameters)"] = CascadePropensity(true_dbn(train, log, args.sigma, args.gamma),
                                                           min_propensity=args.min_propensity)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            pbm = estimate_propensities(log, "pbm")
        except ValueError:
            return props
    warned = any(issubclass(w.category, IdentificationWarning) for w in caught)
    props["pbm (estimated, unidentified)" if warned else "pbm (estimated)"] = pbm
    return props


def fit_arm(args, prop, log, seed):
    """The arm's learner fitted on ``log``: GBDTPropDCG or SVM PropDCG, its ``--trees`` or ``C`` fixed or chosen by CV."""
    from counterfactual_ltr.estimators import GBDTPropDCG, SVMPropDCG
    from counterfactual_ltr.model_selection import grid_search

    if args.learner == "gbdt-propdcg":
        trees = GBDTPropDCG(propensity=prop, n_estimators=args.trees[0], num_leaves=7, random_state=seed)
        if len(args.trees) == 1:
            return trees.fit(log)
        return grid_search(trees, log, "n_estimators", args.trees, cv=3)   # not extended: 10x the trees at an edge
    if len(args.C) == 1:
        return SVMPropDCG(C=args.C[0], propensity=prop).fit(log)
    return grid_search(SVMPropDCG(propensity=prop), log, "C", args.C, cv=3, extend=True)


def weight_line(name, prop, log):
    """``name``'s mean weight ``1 / q`` of a click, overall and by position (what the learner sums per document)."""
    clicked = log.clicks > 0
    w, pos = 1.0 / log.propensities(prop)[clicked], log.positions[clicked]
    by_pos = np.bincount(pos, w)[1:] / np.maximum(np.bincount(pos)[1:], 1)
    return f"  {name:<30} mean 1/q of a click {w.mean():.2f}; by position " + " ".join(f"{v:.2f}" for v in by_pos)


def main(argv=None) -> int:
    from scipy import stats

    from click_sim import StochasticRanker, train_production_ranker

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--passes", type=int, default=5)
    p.add_argument("--sigma", type=float, default=0.6, help="satisfaction after a click")
    p.add_argument("--gamma", type=float, default=0.9, help="perseverance")
    p.add_argument("--clicks", choices=("dbn", "pbm"), default="dbn",
                   help="dbn: cascade users; pbm: position-based users (where 1/r is the truth)")
    p.add_argument("--learner", choices=("svm-propdcg", "gbdt-propdcg"), default="svm-propdcg")
    p.add_argument("--data", choices=("mq2008", "synthetic"), default="mq2008")
    p.add_argument("--dbn-passes", type=int, default=None,
                   help="fit the cascade models on a separate log of this many passes (seed + 1000; near the "
                        "truth when large) instead of the training log")
    p.add_argument("--min-propensity", type=float, default=0.01, help="floor of the cascade-aware propensities")
    p.add_argument("--C", type=lambda v: [float(x) for x in v.split(",")], default=[1.0, 10.0, 100.0, 1e3, 1e4],
                   help="SVM PropDCG's C: one value, or a grid to choose from per arm by 3-fold CV SNIPS")
    p.add_argument("--trees", type=lambda v: [int(x) for x in v.split(",")], default=[100],
                   help="GBDTPropDCG's number of trees (7 leaves each): one value, or a grid to choose from per "
                        "arm by 3-fold CV SNIPS")
    p.add_argument("--cascade-model", type=lambda v: v.split(","), default=["dbn"],
                   help="the click models fitted for cascade-aware propensities, e.g. dbn,ubm (dbn, ubm, dcm)")
    p.add_argument("--temperature", type=float, default=None,
                   help="a stochastic logger: Plackett-Luce over the standardised production scores at this temperature")
    p.add_argument("--show-weights", action="store_true",
                   help="print every arm's mean click weight 1/q, overall and by position, on the first seed's log")
    p.add_argument("--oracle", action="store_true", help="add the cascade-aware propensity of the true DBN (DBN clicks only)")
    args = p.parse_args(argv)
    if not set(args.cascade_model) <= {"dbn", "ubm", "dcm"}:
        p.error(f"--cascade-model takes dbn, ubm and dcm, got {','.join(args.cascade_model)}")
    train, test = data_sets(args.data)
    logger = train_production_ranker(train, fraction=0.01, random_state=0).predict(train.X)
    if args.temperature is not None:
        logger = StochasticRanker(logger / logger.std(), temperature=args.temperature)
    what = f"DBN clicks (sigma {args.sigma}, gamma {args.gamma})" if args.clicks == "dbn" else \
        "position-based clicks (eta 1)"
    knob, grid = ("C", args.C) if args.learner == "svm-propdcg" else ("trees", args.trees)
    tuning = f", {knob} {grid[0]:g}" if len(grid) == 1 else \
        f", {knob} by 3-fold CV SNIPS from {','.join(f'{v:g}' for v in grid)}"
    print(f"{what} on {args.data}, {args.learner}{tuning}, {args.passes} passes, seeds 0-{args.seeds - 1}"
          + ("" if args.temperature is None else f", stochastic logger (temperature {args.temperature:g})"))
    scores, chosen = {}, {}
    for seed in range(args.seeds):
        start = time.process_time()
        log = cascade_log(train, logger, args.passes, seed, args.sigma, args.gamma) if args.clicks == "dbn" else \
            position_log(train, logger, args.passes, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, prop in propensities(args, train, logger, seed, log).items():
                if args.show_weights and seed == 0:
                    print(weight_line(name, prop, log))
                model = fit_arm(args, prop, log, seed)
                scores.setdefault(name, {})[seed] = model.score(test)
                if hasattr(model, "selection_"):
                    chosen.setdefault(name, {})[seed] = model.selection_["chosen"]
        print(f"seed {seed}: {len(log)} sessions, {log.n_clicks} clicks; NDCG@10 "
              + ", ".join(f"{k} {v[seed]:.4f}" + (f" ({knob} {chosen[k][seed]:g})" if k in chosen else "")
                          for k, v in scores.items() if seed in v)
              + f" ({time.process_time() - start:.1f} s)", flush=True)
    base = scores["1/r"]
    for name, by_seed in scores.items():
        seeds = sorted(by_seed)
        a = np.array([by_seed[s] for s in seeds])
        line = f"{name:<30} mean NDCG@10 {a.mean():.4f} over {len(seeds)} seeds"
        if name != "1/r" and len(seeds) > 1:
            b = np.array([base[s] for s in seeds])
            line += f"; against 1/r {np.mean(a - b):+.4f} (sd {np.std(a - b, ddof=1):.4f}), " \
                    f"paired t p = {stats.ttest_rel(a, b).pvalue:.3g}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
