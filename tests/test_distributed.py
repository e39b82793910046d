"""The linear learners on a Dask cluster (issue 32): partitions by query, the distributed aggregate,
products over partitions, fits equal to the in-memory ones, estimates, model selection, a lost worker.

One LocalCluster (processes, 2 workers, 1 thread each) serves the module: under pytest-xdist its
tests run in one process (``ONE_WORKER_MODULES`` in ``conftest.py``), so the cluster starts once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")

from click_sim import make_ranking, simulate_clicks  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from counterfactual_ltr import RankingDataset, aggregate_clicks  # noqa: E402
from counterfactual_ltr.distributed import newton  # noqa: E402
from counterfactual_ltr.distributed.fit import fit_linear  # noqa: E402
from counterfactual_ltr.estimators import RankSVM, SVMPropDCG, SVMPropRank  # noqa: E402
from counterfactual_ltr.estimators.svm import click_pairs  # noqa: E402


@pytest.fixture(scope="module")
def client():
    from dask.distributed import Client, LocalCluster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=50)
    with Client(cluster) as c:
        yield c
    cluster.close()


def _frame(data, query_ids, doc_ids):
    df = pd.DataFrame(data.X, columns=[f"f{k}" for k in range(data.n_features)])
    df.insert(0, "query", query_ids)
    df.insert(1, "doc", doc_ids)
    df["label"] = data.y
    return df


def _ids(data, kind):
    """Query ids per row and document ids per row, as strings, int64 or uint64 (beyond 2**63)."""
    q = data.query_index
    if kind == "str":
        return np.array([f"q{k}" for k in q], dtype=object), np.array([f"d{k}" for k in range(data.n_docs)], dtype=object)
    if kind == "uint64":
        return (q.astype(np.uint64) + np.uint64(2 ** 63 + 5),
                np.arange(data.n_docs, dtype=np.uint64) * np.uint64(3) + np.uint64(2 ** 63))
    return q.astype(np.int64) * 7 - 50, np.arange(data.n_docs, dtype=np.int64) + 10 ** 12


def _setup(client, kind="str", sparse=False, n_queries=60, npartitions=3, n_passes=3):
    """``(distributed data, in-memory copy in partition order, its ids, log, distributed aggregate)``."""
    data = make_ranking(n_queries=n_queries, random_state=0)
    qids, docs = _ids(data, kind)
    frame = dd.from_pandas(_frame(data, qids, docs), npartitions=npartitions)
    features = [f"f{k}" for k in range(data.n_features)]
    ddata = RankingDataset.from_dask(frame, query="query", doc="doc", features=features, label="label",
                                     sparse=sparse, client=client)
    mem, mq, md = ddata.to_dataset()
    first = mem.X[:, 0].toarray().ravel() if sparse else mem.X[:, 0]
    log = simulate_clicks(mem, first, n_passes=n_passes, random_state=0)
    lf = log.to_frame()
    rows = lf["doc"].to_numpy()
    lf["qid"], lf["doc"] = mq[mem.qid[rows]], md[rows]
    agg = aggregate_clicks(dd.from_pandas(lf, npartitions=2), ddata, engine="dask")
    return ddata, mem, (mq, md), log, agg


@pytest.fixture(scope="module")
def small(client):
    return _setup(client)


# ---------------------------------------------------------------------- partitions
@pytest.mark.parametrize("kind", ["str", "int64", "uint64"])
def test_from_dask_keeps_ids_and_whole_queries(client, kind):
    data = make_ranking(n_queries=30, random_state=1)
    qids, docs = _ids(data, kind)
    df = _frame(data, qids, docs)
    ddata = RankingDataset.from_dask(dd.from_pandas(df.sample(frac=1.0, random_state=0), npartitions=4),
                                     query="query", doc="doc", features=["f0", "f1", "f2"], label="label",
                                     client=client)
    mem, mq, md = ddata.to_dataset()
    assert (ddata.n_docs, ddata.n_queries, ddata.n_features) == (data.n_docs, data.n_queries, 3)
    assert md.dtype == docs.dtype and sorted(md.tolist()) == sorted(docs.tolist())   # ids exactly as given
    assert len(set(mq.tolist())) == data.n_queries                                   # every query in one piece
    # every row keeps its features and label, found by its (query, document) key
    by_key = df.set_index(["query", "doc"])
    expect = by_key.loc[list(zip(mq[mem.qid], md))]
    np.testing.assert_array_equal(mem.X, expect[["f0", "f1", "f2"]].to_numpy())
    np.testing.assert_array_equal(mem.y, expect["label"].to_numpy())


def test_a_query_split_across_partitions_is_joined_or_refused(client):
    df = pd.DataFrame({"query": [1, 1, 2, 1], "doc": [1, 2, 1, 3], "f": [0.0, 1.0, 2.0, 3.0]})
    frame = dd.from_pandas(df, npartitions=2, sort=False)
    with pytest.raises(ValueError, match="query 1 has rows in partitions 0 and 1"):
        RankingDataset.from_dask(frame, query="query", doc="doc", features=["f"], shuffle=False, client=client)
    joined = RankingDataset.from_dask(frame, query="query", doc="doc", features=["f"], client=client)
    mem, mq, md = joined.to_dataset()
    assert mem.query_lengths[list(mq).index(1)] == 3


def test_from_dask_refuses_bad_tables(client):
    df = pd.DataFrame({"query": [1, 1], "doc": [4, 4], "f": [0.0, 1.0]})
    with pytest.raises(ValueError, match=r"\(query 1, document 4\) appears twice"):
        RankingDataset.from_dask(dd.from_pandas(df, npartitions=1), query="query", doc="doc", features=["f"],
                                 client=client)
    with pytest.raises(ValueError, match=r"lacks the columns \['g'\]"):
        RankingDataset.from_dask(dd.from_pandas(df, npartitions=1), query="query", doc="doc", features=["g"],
                                 client=client)


# ---------------------------------------------------------------------- aggregate and estimates
def test_distributed_aggregate_equals_the_in_memory_one(small):
    ddata, mem, (mq, md), log, agg = small
    ref = log.aggregate()
    assert (agg.n_sessions, agg.n_clicks) == (ref.n_sessions, ref.n_clicks)
    parts = agg.client.gather(agg.parts)
    weights = np.concatenate([a.weights for a in parts])       # partition order = the in-memory copy's order
    np.testing.assert_array_equal(weights, ref.weights)
    model = RankSVM().fit(mem)
    for p in (None, 0.5):
        assert agg.ips_value(model, propensity=p) == pytest.approx(ref.ips_value(model, propensity=p), rel=1e-12)
        assert agg.snips_value(model, propensity=p) == pytest.approx(ref.snips_value(model, propensity=p), rel=1e-12)
    np.testing.assert_allclose(model.predict(ddata).compute(), model.predict(mem), rtol=1e-12)


def test_a_log_row_missing_from_the_data_set_is_an_error(small):
    ddata, mem, (mq, md), log, agg = small
    lf = log.to_frame()
    rows = lf["doc"].to_numpy()
    lf["qid"], lf["doc"] = mq[mem.qid[rows]], md[rows]
    lf.loc[3, "doc"] = "no-such-document"
    with pytest.raises(ValueError, match="no-such-document.*not in the data set"):
        aggregate_clicks(dd.from_pandas(lf, npartitions=2), ddata, engine="dask")


def _log_frame(log, mem, mq, md):
    lf = log.to_frame()
    rows = lf["doc"].to_numpy()
    lf["qid"], lf["doc"] = mq[mem.qid[rows]], md[rows]
    return lf


def test_a_session_split_across_log_partitions_is_one_session(small):
    """Rows of one session in two log partitions meet on their query's partition: counted as in memory."""
    ddata, mem, (mq, md), log, agg = small
    lf = _log_frame(log, mem, mq, md)
    moved = pd.concat([lf.iloc[1:], lf.iloc[:1]], ignore_index=True)      # session 0's first row last
    split = aggregate_clicks(dd.from_pandas(moved, npartitions=2, sort=False), ddata, engine="dask")
    assert (split.n_sessions, split.n_clicks) == (log.aggregate().n_sessions, log.aggregate().n_clicks)
    weights = np.concatenate([a.weights for a in split.client.gather(split.parts)])
    np.testing.assert_array_equal(weights, log.aggregate().weights)


def test_a_session_id_on_two_queries_in_two_partitions_is_an_error(small, tmp_path):
    ddata, mem, (mq, md), log, agg = small
    lf = _log_frame(log, mem, mq, md)
    last = lf["session"] == lf["session"].iloc[-1]              # its query is in the last data-set partition
    lf.loc[last, "session"] = lf["session"].iloc[0]             # ... and its id is the first session's
    with pytest.raises(ValueError, match=r"session 0 shows query 'q\d+' and query 'q\d+' \(data-set partitions 0 "
                                         r"and 2\): a session shows one query"):
        aggregate_clicks(dd.from_pandas(lf, npartitions=2, sort=False), ddata, engine="dask")
    # in memory the same log is refused as well (the session's positions repeat)
    path = tmp_path / "log.parquet"
    frame = log.to_frame()
    frame.loc[frame["session"] == frame["session"].iloc[-1], "session"] = frame["session"].iloc[0]
    frame.to_parquet(path)
    with pytest.raises(ValueError, match="session 0"):
        aggregate_clicks(str(path), mem)


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_the_distributed_aggregate_reads_log_files(small, tmp_path, suffix):
    from counterfactual_ltr.log_integrity import write_log_frame

    ddata, mem, (mq, md), log, agg = small
    lf = _log_frame(log, mem, mq, md)
    for k, piece in enumerate(np.array_split(np.arange(len(lf)), 2)):
        write_log_frame(lf.iloc[piece], str(tmp_path / f"part{k}.{suffix}"))
    from_files = aggregate_clicks(str(tmp_path), ddata, engine="dask")
    assert (from_files.n_sessions, from_files.n_clicks) == (agg.n_sessions, agg.n_clicks)
    np.testing.assert_array_equal(np.concatenate([a.weights for a in from_files.client.gather(from_files.parts)]),
                                  log.aggregate().weights)
    (tmp_path / f"part1.{suffix}").unlink()
    write_log_frame(lf.drop(columns="position"), str(tmp_path / f"part1.{suffix}"))
    with pytest.raises(ValueError, match=f"part1.{suffix}"):
        aggregate_clicks(str(tmp_path), ddata, engine="dask")
    with pytest.raises(ValueError, match="raw-log options"):
        aggregate_clicks(str(tmp_path), ddata, engine="dask", query="qid")


# ---------------------------------------------------------------------- products over partitions
def test_gradient_and_hessian_products_match_finite_differences(small, client):
    """The summed per-partition gradient and Hessian products of the smoothed objective."""
    ddata, mem, ids, log, agg = small
    built = [client.submit(__import__("counterfactual_ltr.distributed.fit", fromlist=["_"])._click_part, a,
                           click_pairs, False) for a in agg.parts]
    parts = [client.submit(lambda b: b[0], b) for b in built]
    C, margin, mu = 0.3, 1.0, 0.5
    rng = np.random.default_rng(0)
    d = mem.n_features

    def smoothed(w):
        states = [client.submit(newton._evaluate, p, None, w, C, margin, mu, mu) for p in parts]
        out = client.gather(states)
        # smoothed hinge: a z - mu a^2 / 2 summed; value from the state's z and weights
        value = 0.5 * w @ w
        for (z, Cc, *_), _s in out:
            a = np.clip(z / mu, 0, 1)
            value += float(Cc @ (a * z - 0.5 * mu * a * a))
        grad = w - sum(s[3] for _, s in out)
        return value, grad, [client.submit(lambda o: o[0], o) for o in states]

    w = rng.normal(size=d) * 0.3
    value, grad, states = smoothed(w)
    for _ in range(3):
        e = rng.normal(size=d)
        h = 1e-6
        fd = (smoothed(w + h * e)[0] - smoothed(w - h * e)[0]) / (2 * h)
        assert fd == pytest.approx(float(grad @ e), rel=1e-5, abs=1e-7)
        # H e against the difference of gradients (the band is locally constant for a small step)
        hv = e + sum(client.gather([client.submit(newton._hessian_product, p, s, e) for p, s in zip(parts, states)]))
        fd_h = (smoothed(w + 1e-7 * e)[1] - smoothed(w - 1e-7 * e)[1]) / 2e-7
        np.testing.assert_allclose(hv, fd_h, rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------------- fits equal to the in-memory ones
def _close(dist, mem, rel=1e-6, tol=1e-6):
    """Objectives within ``rel`` and the same certificate: each gap met the stopping rule, each dual bound holds."""
    assert dist.converged_ and mem.converged_
    assert abs(dist.objective_ - mem.objective_) <= rel * abs(mem.objective_)
    for est in (dist, mem):
        assert 0 <= est.duality_gap_ <= tol * max(1.0, abs(est.objective_))
    # objective - gap is a lower bound of the optimum: below the other path's objective too
    assert dist.objective_ - dist.duality_gap_ <= mem.objective_ * (1 + 1e-12)
    assert mem.objective_ - mem.duality_gap_ <= dist.objective_ * (1 + 1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("sparse", [False, True])
def test_fits_reach_the_in_memory_objective(client, sparse):
    ddata, mem, ids, log, agg = _setup(client, sparse=sparse)
    _close(RankSVM(C=1.0).fit(ddata), RankSVM(C=1.0).fit(mem))
    _close(SVMPropRank(C=3.0, propensity=0.8).fit(agg), SVMPropRank(C=3.0, propensity=0.8).fit(log))
    _close(RankSVM(C=1.0).fit(agg), RankSVM(C=1.0).fit(log))
    # Two CCP steps with subproblems solved to a gap of 1e-10 (the finisher's exact solves, on both
    # paths): the same majorisers from w = 0, so the same points (the CCP's own stopping rule, a
    # relative change, could let two runs stop one step apart: max_ccp_iter=2 fixes the count).
    params = dict(C=10.0, propensity=0.8, tol=0.0, solver_tol=1e-10, max_ccp_iter=2)
    fits = []
    for source in (agg, log):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fits.append(SVMPropDCG(**params).fit(source))
        # only the CCP's warning (two steps): every subproblem met its certificate
        assert [str(w.message) for w in caught if "convex-concave" not in str(w.message)] == []
        assert any("convex-concave" in str(w.message) for w in caught)
    dist, ref = fits
    np.testing.assert_allclose(dist.objective_history_, ref.objective_history_, rtol=1e-6)
    assert dist.n_ccp_iter_ == ref.n_ccp_iter_ == 2
    np.testing.assert_array_equal(dist.inner_tol_, ref.inner_tol_)
    assert 0 <= dist.duality_gap_ <= 1e-9 and 0 <= ref.duality_gap_ <= 1e-9      # subproblems' objectives ~ 10
    assert dist.train_snips_history_ == pytest.approx(ref.train_snips_history_, abs=1e-6)


@pytest.mark.slow
def test_the_finisher_ends_distributed_fits_in_the_in_memory_iterations(small):
    """At tol 1e-9 the exact solve near the kink certifies as in memory (without it: 39 Newton iterations)."""
    ddata, mem, ids, log, agg = small
    dist = SVMPropRank(C=30.0, propensity=0.8, solver_tol=1e-9).fit(agg)
    ref = SVMPropRank(C=30.0, propensity=0.8, solver_tol=1e-9).fit(log)
    _close(dist, ref, rel=1e-9, tol=1e-9)
    assert dist.n_iter_.sum() <= ref.n_iter_.sum() + 1


def test_unsupported_options_are_refused(small):
    ddata, mem, ids, log, agg = small
    with pytest.raises(ValueError, match="bounds is not supported on a distributed data set"):
        SVMPropRank(bounds=(0, 1)).fit(agg)
    with pytest.raises(ValueError, match="needs click data"):
        SVMPropRank().fit(ddata)


# ---------------------------------------------------------------------- model selection
@pytest.mark.slow
@pytest.mark.parametrize("n_folds", [2, 3])
def test_grid_search_reuses_the_partitions(small, client, n_folds):
    """Per-fold scores equal the in-memory fits' on the same folds. (Solves stopped at a gap of 1e-6
    by smoothing alone left w ~3e-4 apart and swapped near-tied documents: SNIPS 8e-4 apart on the
    2-fold split; both paths now end with the exact solve near the kink.)"""
    from sklearn.model_selection import GridSearchCV, KFold

    ddata, mem, ids, log, agg = small
    with distributed.get_task_stream(client) as stream:
        search = GridSearchCV(SVMPropRank(propensity=0.8), {"C": [0.1, 10.0]}, cv=KFold(n_folds)).fit(agg)
    ran = {t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in stream.data}
    assert not [k for k in ran if "from_pandas" in str(k) or "shuffle" in str(k) or "_build_partition" in str(k)]
    # the same folds in memory: a fold is the sessions of the queries of some partitions
    parts = client.gather(agg.parts)
    query_part = np.repeat(np.arange(len(parts)), [a.data.n_queries for a in parts])
    session_part = query_part[log.session_query]
    for k, (train, test) in enumerate(KFold(n_folds).split(np.arange(len(parts)))):
        for c_index, C in enumerate([0.1, 10.0]):
            model = SVMPropRank(C=C, propensity=0.8).fit(log[np.isin(session_part, train)])
            expect = model.score(log[np.isin(session_part, test)].aggregate())
            assert search.cv_results_[f"split{k}_test_score"][c_index] == pytest.approx(expect, abs=1e-9)


# ---------------------------------------------------------------------- a worker lost mid-fit
@pytest.mark.slow
def test_a_worker_killed_mid_fit_does_not_change_the_result(client):
    ddata, mem, ids, log, agg = _setup(client, n_queries=40)
    reference = SVMPropRank(C=1.0, propensity=0.8).fit(agg)
    killed = []

    def kill_one(it):
        if it == 3 and not killed:
            pid = list(client.run(os.getpid).values())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    est = fit_linear(SVMPropRank(C=1.0, propensity=0.8), agg, click_pairs, on_iteration=kill_one)
    assert killed
    client.wait_for_workers(2, timeout=60)
    np.testing.assert_allclose(est.coef_, reference.coef_, rtol=1e-12, atol=0)
    assert est.objective_ == pytest.approx(reference.objective_, rel=1e-12)


# ------------------------------------------------------- the user guide's real-cluster set-up (cluster.md)
@pytest.mark.slow
def test_the_readme_cluster_commands_fit_as_a_local_cluster_does(tmp_path):
    """The user guide's set-up for a real cluster (``dask scheduler``, ``dask worker ... --nthreads 1
    --memory-limit``, a ``Client`` by address), run as separate processes on this machine: the workers
    import the installed package themselves, and the fit equals the LocalCluster's."""
    from dask.distributed import Client

    dask_cli = os.path.join(os.path.dirname(sys.executable), "dask")
    assert os.path.exists(dask_cli), f"the dask command is missing beside {sys.executable}"
    address_file = tmp_path / "scheduler.json"
    logs = [open(tmp_path / name, "w") for name in ("scheduler.log", "worker.log")]
    processes = [subprocess.Popen([dask_cli, "scheduler", "--scheduler-file", str(address_file), "--port", "0",
                                   "--no-dashboard"], stdout=logs[0], stderr=subprocess.STDOUT)]
    try:
        deadline = time.monotonic() + 60
        while not address_file.exists():
            assert processes[0].poll() is None and time.monotonic() < deadline, \
                (tmp_path / "scheduler.log").read_text()[-2000:]
            time.sleep(0.2)
        processes.append(subprocess.Popen([dask_cli, "worker", "--scheduler-file", str(address_file), "--nthreads",
                                           "1", "--memory-limit", "1GB", "--no-dashboard"],
                                          stdout=logs[1], stderr=subprocess.STDOUT))
        with Client(scheduler_file=str(address_file), timeout=60) as remote:
            remote.wait_for_workers(1, timeout=60)
            ddata, mem, ids, log, agg = _setup(remote, n_queries=40)
            fitted = SVMPropRank(C=3.0, propensity=0.8).fit(agg)
            assert agg.client is remote and all(remote.who_has(agg.parts).values())   # held by the CLI worker
        _close(fitted, SVMPropRank(C=3.0, propensity=0.8).fit(log))
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        for handle in logs:
            handle.close()
