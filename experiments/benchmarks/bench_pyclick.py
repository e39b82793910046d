"""The position-based model side by side with PyClick's PBM: held-out perplexity and fit time.

    python -m experiments.benchmarks.bench_pyclick --pyclick PATH [--sessions 20000] [--seed 0]

``PATH`` is a work tree of PyClick (markovi/PyClick, the reference click-model library; it is not
part of this project and nothing of it is copied here: the script imports it from ``PATH``).
Two train/test splits, the same for both libraries:

1. the shared TREC Session 2014 log: ``train.csv`` for fitting, ``test.csv`` held out (pages by
   the ``page`` column);
2. a simulated raw log (:func:`click_sim.raw.simulate_raw_events`, ``--sessions`` pages, rankings
   drifting between sessions), its pages split 80/20 at random.

Every page becomes a PyClick ``SearchSession`` (query id, then the shown document ids with their
clicks in position order). Both PBMs are fitted on the training pages and scored on the held-out
pages by both libraries' perplexity (PyClick's ``Perplexity().evaluate`` and
``PositionBasedModel.perplexity``; the same definition, per-position perplexity averaged over
positions 1-10), on all held-out pages and on the held-out pages of queries seen in training
(PyClick's own example evaluates only those). Fit times are CPU seconds of one process.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np


class _Adapter:
    """Our fitted model's click probabilities where PyClick's evaluator asks a model for them."""

    def __init__(self, model, log):
        probs = model._click_probability(log)
        self._by_page = np.split(probs, log.session_offsets[1:-1])
        self._index = {}

    def bind(self, sessions):
        self._index = {id(s): i for i, s in enumerate(sessions)}
        return self

    def get_full_click_probs(self, session):
        return list(self._by_page[self._index[id(session)]])


def pyclick_sessions(log, SearchSession, SearchResult):
    """Every page of ``log`` as a PyClick search session (ids as strings)."""
    frame = log.to_frame()
    sessions = []
    for _, page in frame.groupby("session", sort=False):
        s = SearchSession(str(page["query"].iloc[0]))
        s.web_results = [SearchResult(str(d), int(c)) for d, c in zip(page["doc"], page["click"])]
        sessions.append(s)
    return sessions


def compare(name, train, test, pyclick_path):
    """Fit both PBMs on ``train``, print both perplexities on ``test`` and the fit times."""
    sys.path.insert(0, str(pyclick_path))
    from pyclick.click_models.Evaluation import Perplexity
    from pyclick.click_models.PBM import PBM
    from pyclick.search_session.SearchResult import SearchResult
    from pyclick.search_session.SearchSession import SearchSession

    from counterfactual_ltr.propensity.click_models import PositionBasedModel

    # PyClick's sessions must come in the same order as the log's pages (the adapter indexes them).
    order = np.argsort(np.asarray(test.session_ids), kind="stable")
    assert np.all(order == np.arange(len(order))), "the test log's pages are not sorted by id"
    train_sessions = pyclick_sessions(train, SearchSession, SearchResult)
    test_sessions = pyclick_sessions(test, SearchSession, SearchResult)
    start = time.process_time()
    ours = PositionBasedModel().fit(train)
    ours_time = time.process_time() - start
    start = time.process_time()
    theirs = PBM()
    theirs.train(train_sessions)
    theirs_time = time.process_time() - start
    seen_queries = set(np.asarray(train.query_ids).astype(str))
    seen = np.array([s.query in seen_queries for s in test_sessions])
    print(f"\n{name}: {len(train)} training pages, {len(test)} held-out pages ({seen.sum()} of queries seen in "
          "training)")
    print(f"  fit (CPU s): ours {ours_time:.2f} ({ours.n_iter_} EM iterations, prior_strength "
          f"{ours.prior_strength}), PyClick {theirs_time:.2f} (50 EM iterations, its default)")
    adapter = _Adapter(ours, test)
    for label, mask in (("all held-out pages", np.ones(len(test), dtype=bool)), ("pages of seen queries", seen)):
        sessions = [s for s, keep in zip(test_sessions, mask) if keep]
        sub = test[np.flatnonzero(mask)]
        ours_ppl = Perplexity().evaluate(adapter.bind(test_sessions), sessions)[0]
        theirs_ppl = Perplexity().evaluate(theirs, sessions)[0]
        print(f"  perplexity on {label}: ours {ours.perplexity(sub):.5f} (PyClick's evaluator: {ours_ppl:.5f}), "
              f"PyClick PBM {theirs_ppl:.5f}")
    return {"ours_time": ours_time, "pyclick_time": theirs_time}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pyclick", type=Path, required=True, help="work tree of markovi/PyClick")
    p.add_argument("--sessions", type=int, default=20000, help="pages of the simulated log")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if not (args.pyclick / "pyclick" / "click_models" / "PBM.py").is_file():
        print(f"{args.pyclick}: not a PyClick work tree (pyclick/click_models/PBM.py missing)", file=sys.stderr)
        return 2
    import pandas as pd

    from click_sim.raw import simulate_raw_events
    from counterfactual_ltr import ClickLog
    from experiments._common import shared_data_dir

    warnings.simplefilter("ignore", SyntaxWarning)   # PyClick's source has an `is` comparison with a literal
    trec = shared_data_dir() / "real-logs" / "trec-session-2014"
    if (trec / "train.csv").is_file():
        train, test = (ClickLog.from_events(pd.read_csv(trec / f"{part}.csv"), session="page")
                       for part in ("train", "test"))
        compare("TREC Session 2014 (shared real log)", train, test, args.pyclick)
    else:
        print(f"(the TREC log is not under {trec}: skipped)")
    frame, _ = simulate_raw_events(args.sessions, random_state=args.seed)
    log = ClickLog.from_events(frame, session="session")
    held_out = np.random.default_rng(args.seed).random(len(log)) < 0.2
    compare(f"simulated raw log ({args.sessions} pages, drifting rankings)", log[~held_out], log[held_out],
            args.pyclick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
