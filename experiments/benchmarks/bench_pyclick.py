"""Every click model side by side with PyClick's: held-out perplexity, log-likelihood and fit time.

    python -m experiments.benchmarks.bench_pyclick --pyclick PATH [--sessions 20000] [--seed 0]
        [--models PBM,CM,UBM,DCM,DBN,SDBN] [--simulated-model dbn]

``PATH`` is a work tree of PyClick (markovi/PyClick, the reference click-model library; it is not
part of this project and nothing of it is copied here: the script imports it from ``PATH``).
Two train/test splits, the same for both libraries:

1. the shared TREC Session 2014 log: ``train.csv`` for fitting, ``test.csv`` held out (pages by
   the ``page`` column);
2. a simulated raw log (:func:`click_sim.cascade.simulate_cascade_events` with DBN clicks by
   default, or :func:`click_sim.raw.simulate_raw_events` with ``--simulated-model pbm``;
   ``--sessions`` pages, rankings drifting between sessions), its pages split 80/20 at random.

Every page becomes a PyClick ``SearchSession`` (query id, then the shown document ids with their
clicks in position order). Each model (PBM, CM, UBM, DCM, DBN, SDBN) of both libraries is fitted on
the training pages, with its defaults (ours: the Beta prior of ``prior_strength`` and EM to
tolerance; PyClick: 50 EM iterations, or counting) and scored on the held-out pages by PyClick's
evaluators (``Perplexity``: per-position perplexity of the unconditional click probabilities,
averaged over positions 1-10, the definition of ``perplexity``, which the script asserts;
``LogLikelihood``: the mean log-probability of the observed clicks given the clicks above), on all
held-out pages and on the held-out pages of queries seen in training (PyClick's own example
evaluates only those). Fit times are CPU seconds of one process, from a built model (imports done).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np


MODELS = ("PBM", "CM", "UBM", "DCM", "DBN", "SDBN")


def _ours(name):
    from counterfactual_ltr.click_models import (CascadeModel, DependentClickModel, DynamicBayesianNetworkModel,
                                                 PositionBasedModel, SimplifiedDBNModel, UserBrowsingModel)

    return {"PBM": PositionBasedModel, "CM": CascadeModel, "UBM": UserBrowsingModel, "DCM": DependentClickModel,
            "DBN": DynamicBayesianNetworkModel, "SDBN": SimplifiedDBNModel}[name]()


class _Adapter:
    """Our fitted model's click probabilities where PyClick's evaluators ask a model for them.

    ``get_full_click_probs``: the unconditional ``P(click)`` (what PyClick's ``Perplexity`` scores);
    ``get_conditional_click_probs``: the probability of the observed click or skip given the clicks
    above (what its ``LogLikelihood`` sums), as PyClick's models return them.
    """

    def __init__(self, model, log):
        split = log.session_offsets[1:-1]
        self._full = np.split(model._marginal_click_probability(log), split)
        cond = model.predict_click_proba(log)
        self._cond = np.split(np.where(log.clicks, cond, 1 - cond), split)
        self._index = {}

    def bind(self, sessions):
        self._index = {id(s): i for i, s in enumerate(sessions)}
        return self

    def get_full_click_probs(self, session):
        return list(self._full[self._index[id(session)]])

    def get_conditional_click_probs(self, session):
        return list(np.clip(self._cond[self._index[id(session)]], 1e-10, 1))


def pyclick_sessions(log, SearchSession, SearchResult):
    """Every page of ``log`` as a PyClick search session (ids as strings)."""
    frame = log.to_frame()
    sessions = []
    for _, page in frame.groupby("session", sort=False):
        s = SearchSession(str(page["query"].iloc[0]))
        s.web_results = [SearchResult(str(d), int(c)) for d, c in zip(page["doc"], page["click"])]
        sessions.append(s)
    return sessions


def _import_pyclick(pyclick_path):
    """PyClick's classes, imported from its work tree (nothing of it is patched or copied)."""
    sys.path.insert(0, str(pyclick_path))
    import importlib

    from pyclick.click_models.Evaluation import LogLikelihood, Perplexity
    from pyclick.search_session.SearchResult import SearchResult
    from pyclick.search_session.SearchSession import SearchSession

    classes = {name: getattr(importlib.import_module(f"pyclick.click_models.{name}"), name) for name in MODELS}
    return classes, LogLikelihood, Perplexity, SearchSession, SearchResult


def compare(name, train, test, pyclick_path, models=MODELS):
    """Fit ours and PyClick's models on ``train``; print test perplexity, log-likelihood and fit times."""
    classes, LogLikelihood, Perplexity, SearchSession, SearchResult = _import_pyclick(pyclick_path)

    # PyClick's sessions must come in the same order as the log's pages (the adapter indexes them).
    order = np.argsort(np.asarray(test.session_ids), kind="stable")
    assert np.all(order == np.arange(len(order))), "the test log's pages are not sorted by id"
    train_sessions = pyclick_sessions(train, SearchSession, SearchResult)
    test_sessions = pyclick_sessions(test, SearchSession, SearchResult)
    seen_queries = set(np.asarray(train.query_ids).astype(str))
    seen = np.array([s.query in seen_queries for s in test_sessions])
    print(f"\n{name}: {len(train)} training pages, {len(test)} held-out pages ({seen.sum()} of queries seen in "
          "training); perplexity on all held-out pages / on pages of seen queries; log-likelihood per result "
          "(PyClick's LogLikelihood) on all held-out pages")
    print(f"  {'model':5s} {'ours ppl':>17s} {'PyClick ppl':>17s} {'ppl diff':>8s} {'ours LL':>8s} "
          f"{'PyClick LL':>10s} {'ours s':>7s} {'PyClick s':>9s} {'speed-up':>8s}")
    results = {}
    for model_name in models:
        # Both models are built (and so their modules imported) before the clock starts: the first
        # model of a run would otherwise be charged our package's import (some 30 ms).
        ours, theirs = _ours(model_name), classes[model_name]()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.process_time()
            ours.fit(train)
            ours_time = time.process_time() - start
        start = time.process_time()
        theirs.train(train_sessions)
        theirs_time = time.process_time() - start
        adapter = _Adapter(ours, test).bind(test_sessions)
        row = {"ours_time": ours_time, "pyclick_time": theirs_time}
        for label, mask in (("all", np.ones(len(test), dtype=bool)), ("seen", seen)):
            sessions = [s for s, keep in zip(test_sessions, mask) if keep]
            row[f"ours_{label}"] = Perplexity().evaluate(adapter, sessions)[0]
            row[f"theirs_{label}"] = Perplexity().evaluate(theirs, sessions)[0]
            if label == "all":   # our own perplexity agrees with PyClick's evaluator on our probabilities
                assert abs(ours.perplexity(test) - row["ours_all"]) < 1e-9, (ours.perplexity(test), row["ours_all"])
        row["ours_ll"] = LogLikelihood().evaluate(adapter, test_sessions)
        try:
            row["theirs_ll"] = LogLikelihood().evaluate(theirs, test_sessions)
        except ValueError:     # a probability 0 (CM's clicks below the first click)
            row["theirs_ll"] = float("-inf")
        diff = 100 * (row["ours_all"] / row["theirs_all"] - 1)
        print(f"  {model_name:5s} {row['ours_all']:8.5f}/{row['ours_seen']:8.5f} "
              f"{row['theirs_all']:8.5f}/{row['theirs_seen']:8.5f} {diff:+7.2f}% {row['ours_ll']:8.5f} "
              f"{row['theirs_ll']:10.5f} {ours_time:7.2f} {theirs_time:9.2f} {theirs_time / max(ours_time, 1e-9):7.1f}x",
              flush=True)
        results[model_name] = row
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pyclick", type=Path, required=True, help="work tree of markovi/PyClick")
    p.add_argument("--sessions", type=int, default=20000, help="pages of the simulated log")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    p.add_argument("--simulated-model", default="dbn", help="click model of the simulated log (click_sim.cascade; "
                   "'pbm' for click_sim.raw's position-based clicks)")
    args = p.parse_args(argv)
    models = tuple(args.models.split(","))
    if not (args.pyclick / "pyclick" / "click_models" / "PBM.py").is_file():
        print(f"{args.pyclick}: not a PyClick work tree (pyclick/click_models/PBM.py missing)", file=sys.stderr)
        return 2
    import pandas as pd

    from click_sim.cascade import simulate_cascade_events
    from click_sim.raw import simulate_raw_events
    from counterfactual_ltr import ClickLog
    from experiments._common import shared_data_dir

    warnings.simplefilter("ignore", SyntaxWarning)   # PyClick's source has an `is` comparison with a literal
    trec = shared_data_dir() / "real-logs" / "trec-session-2014"
    if (trec / "train.csv").is_file():
        train, test = (ClickLog.from_events(pd.read_csv(trec / f"{part}.csv"), session="page")
                       for part in ("train", "test"))
        compare("TREC Session 2014 (shared real log)", train, test, args.pyclick, models)
    else:
        print(f"(the TREC log is not under {trec}: skipped)")
    if args.simulated_model == "pbm":
        frame, _ = simulate_raw_events(args.sessions, random_state=args.seed)
    else:
        frame, _ = simulate_cascade_events(args.sessions, args.simulated_model, random_state=args.seed)
    held_out = np.random.default_rng(args.seed).random(args.sessions) < 0.2
    page = frame["session"].str[1:].astype(int).to_numpy()
    # Two logs built separately, so that the held-out log's ids are not in the training log's table.
    train, test = (ClickLog.from_events(frame[np.isin(page, np.flatnonzero(keep))], session="session")
                   for keep in (~held_out, held_out))
    compare(f"simulated raw log ({args.sessions} pages, {args.simulated_model} clicks, drifting rankings)", train,
            test, args.pyclick, models)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
