"""Shared fixtures and helpers of the test suite.

The real-data tests use the shared MQ2008 copy next to the repository,
``<repo>/../shared/data/MQ2008`` (``Fold1..Fold5`` and ``S1..S5.txt``). Set
``CLTR_DATA`` to the folder that holds ``MQ2008`` to use another copy; the
tests that need it are skipped (``requires_mq2008``) when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

# One BLAS/OpenMP thread per test process, set before NumPy loads its BLAS. On a busy 2-core
# machine a second BLAS thread only competes with the other processes for the same cores (and
# OpenBLAS threads spin while they wait); the tests' matrices are too small to gain from it.
# An explicit setting in the environment wins.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402


def pytest_configure(config):
    # Libraries loaded before this file (a plugin importing NumPy) ignore the variables above.
    if os.environ.get("OPENBLAS_NUM_THREADS") == "1":
        from threadpoolctl import threadpool_limits

        config._cltr_thread_limits = threadpool_limits(limits=1)

REPO = Path(__file__).resolve().parents[1]

# Modules whose tests run in one pytest-xdist worker, in order: the code blocks of the README and the
# user guide share one folder (a fresh clone) and run each block once (later blocks read what earlier ones wrote); test_distributed shares one
# Dask cluster; test_online_learners shares costly module fixtures that each worker would compute anew.
# (xdist_group marks are not applied under pytest 9 with pytest-xdist 3.8: the group
# suffix it adds to item._nodeid never reaches the scheduler, so the grouping is done here.)
ONE_WORKER_MODULES = ("tests/test_readme.py", "tests/test_distributed.py", "tests/test_online_learners.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``'s scheduler (one test per unit, largest units first), with each module of
    ``ONE_WORKER_MODULES`` as one unit."""
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerModules(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in ONE_WORKER_MODULES else nodeid

    return OneWorkerModules(config, log)


def mq2008_dir() -> Path:
    """Path of the MQ2008 folder: ``$CLTR_DATA/MQ2008``, else ``<repo>/../shared/data/MQ2008``.

    ``CLTR_DATA`` names the data folder that contains ``MQ2008`` (as in
    ``experiments._common``); a ``CLTR_DATA`` pointing at the MQ2008 folder
    itself is accepted too. The path is returned whether or not it exists:
    use :func:`mq2008_available` or the ``requires_mq2008`` marker.
    """
    env = os.environ.get("CLTR_DATA")
    if env:
        root = Path(env).expanduser()
        if not (root / "MQ2008").exists() and (root / "Fold1").exists():
            return root
        return root / "MQ2008"
    return REPO.parent / "shared" / "data" / "MQ2008"


def mq2008_available() -> bool:
    return (mq2008_dir() / "Fold1" / "train.txt").is_file()


requires_mq2008 = pytest.mark.skipif(
    not mq2008_available(),
    reason=f"MQ2008 not found at {mq2008_dir()} (Fold1/train.txt missing); "
           "set CLTR_DATA to the folder that contains MQ2008",
)


@pytest.fixture(name="mq2008_dir")
def mq2008_dir_fixture() -> Path:
    """The MQ2008 folder (the test is skipped when it is absent)."""
    if not mq2008_available():
        pytest.skip(f"MQ2008 not found at {mq2008_dir()}")
    return mq2008_dir()


@pytest.fixture(scope="session")
def mq2008_fold1_train():
    """``load_letor`` of MQ2008 Fold1/train.txt, loaded once per session."""
    if not mq2008_available():
        pytest.skip(f"MQ2008 not found at {mq2008_dir()}")
    from click_sim import load_letor

    return load_letor(mq2008_dir() / "Fold1" / "train.txt")


# ----------------------------------------------------------------------------- small shared data


@pytest.fixture
def tiny_data():
    """Three queries (qids 10, 4, 7) of lengths 3, 2, 4; labels 0..2."""
    from counterfactual_ltr import RankingDataset

    X = np.arange(18, dtype=float).reshape(9, 2)
    y = [2, 0, 1, 0, 1, 0, 0, 2, 1]
    qid = [10, 10, 10, 4, 4, 7, 7, 7, 7]
    return RankingDataset(X, y, qid)


@pytest.fixture(scope="module")
def synthetic_data():
    """``make_ranking(60 queries)``: varying list lengths, some queries without relevant documents."""
    from click_sim import make_ranking

    return make_ranking(n_queries=60, n_docs=(3, 15), random_state=3)


def least_squares_scores(data) -> np.ndarray:
    """A simple fixed ranker: the least-squares fit of the labels on the features (with intercept)."""
    A = np.c_[data.X, np.ones(data.n_docs)]
    coef, *_ = np.linalg.lstsq(A, data.y.astype(float), rcond=None)
    return A @ coef


def trec_joined(files=("train", "test", "labels")):
    """The TREC Session 2014 log's impression features over ``files`` (train.csv among them) and its training
    clicks joined to them.

    Returns ``(data, log, names)``: the feature table as a RankingDataset, train.csv's pages joined to it
    (pages that show a document twice dropped), and the feature columns. Skips when the log is absent.
    """
    import warnings

    import pandas as pd
    from click_sim import data_path
    from counterfactual_ltr import ClickLog, RankingDataset
    from counterfactual_ltr.logs import impression_features

    try:
        folder = data_path("real-logs/trec-session-2014")
    except (OSError, ValueError) as err:
        pytest.skip(f"the TREC Session 2014 log is absent (set CLTR_DATA to the folder holding real-logs/): {err}")
    frames = {name: pd.read_csv(folder / f"{name}.csv", dtype={"query": str, "doc": str}) for name in files}
    table = impression_features(*frames.values(), page="page")
    data = RankingDataset.from_frame(table, query="query", doc="doc")
    names = [c for c in table.columns if c not in ("query", "doc")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # pages that show a document twice are dropped, and said so
        log = ClickLog.from_events(frames["train"], session="page").with_data(data, missing="drop_sessions")
    return data, log, names

