"""Bad inputs to the newest surfaces (issue 38) end in a ``ValueError`` naming what is wrong and where.

* A raw log (``ClickLog.from_events``, no features) is refused by every evaluation entry and every
  learner's ``fit`` with the same advice (join features with ``with_data``), never an
  ``AttributeError`` from deep inside.
* ``GBDTPropDCG``'s ``lgb_params`` are checked against LightGBM's own parameter tables; tree
  options that give a constant ranker warn; the dict form of ``monotone_constraints`` saves.
* Ids typed differently on the two sides of a join, resampling too small for its interval,
  a repeated row that would start a phantom page, and the ids the messages name.
* A table of bad inputs walked through the public entry points: none ends in ``AttributeError``,
  ``KeyError``, ``IndexError``, NumPy's conversion errors or an empty message.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import counterfactual_ltr as cltr
from counterfactual_ltr import ClickLog, RankingDataset
from counterfactual_ltr.evaluation import fit_relevance, session_contributions, true_click_values, true_values

FEATURES = "needs document features"


@pytest.fixture(scope="module")
def raw_log():
    return ClickLog.from_events({"query": ["q1"] * 3 + ["q2"] * 2, "doc": ["a", "b", "c", "a", "d"],
                                 "position": [1, 2, 3, 1, 2], "click": [1, 0, 0, 0, 1]})


class _Zero:
    def predict(self, X):
        return np.zeros(len(X))


SCORES = np.zeros(5)

# ----------------------------------------------------------------------------- 1. raw logs

RAW_LOG_ENTRIES = {
    **{name: (lambda log, f=getattr(cltr, name): f(log, SCORES), f"the {name.split('_estimate')[0].upper()} estimate")
       for name in ("ips_estimate", "snips_estimate", "clipped_ips_estimate", "dr_estimate",
                    "policy_aware_estimate")},
    **{name: (lambda log, f=getattr(cltr, name): f()(_Zero(), log), f"the {name.split('_scorer')[0].upper()} estimate")
       for name in ("ips_scorer", "snips_scorer", "clipped_ips_scorer", "dr_scorer", "policy_aware_scorer")},
    "session_contributions": (lambda log: session_contributions(log, SCORES), "session_contributions"),
    "true_values": (lambda log: true_values(log, SCORES, SCORES), "true_values"),
    "true_click_values": (lambda log: true_click_values(log, SCORES, SCORES), "true_click_values"),
    "fit_relevance": (lambda log: fit_relevance(log), "fit_relevance"),
    "compare_rankers scores": (lambda log: cltr.compare_rankers(log, SCORES), "compare_rankers"),
    "compare_rankers ranker": (lambda log: cltr.compare_rankers(log, _Zero(), _Zero()), "compare_rankers"),
    "compare_rankers several": (lambda log: cltr.compare_rankers(log, {"a": SCORES, "b": SCORES}), "compare_rankers"),
    "validation_report": (lambda log: cltr.validation_report({"a": _Zero()}, log), "validation_report"),
    "validation_report scores": (lambda log: cltr.validation_report({"a": SCORES}, log, estimators=["ips"]),
                                 "validation_report"),
    "aggregate": (lambda log: log.aggregate(), "the aggregate"),
    **{f"{name}.fit": (lambda log, e=name: getattr(cltr, e)().fit(log), "the aggregate")
       for name in ("RankSVM", "SVMPropRank", "SVMPropDCG", "SVMPropRBP", "SLAMRanker", "DeepPropDCG",
                    "GBDTPropDCG")},
}

@pytest.mark.parametrize("entry", sorted(RAW_LOG_ENTRIES))
def test_a_raw_log_is_refused_with_advice_by_every_evaluation_and_fit(entry, raw_log):
    call, who = RAW_LOG_ENTRIES[entry]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=FEATURES) as err:
            call(raw_log)
    assert who in str(err.value) and "with_data" in str(err.value)


def test_the_same_log_with_features_evaluates(raw_log):
    data = RankingDataset.from_frame({"query": ["q1"] * 3 + ["q2"] * 2, "doc": ["a", "b", "c", "a", "d"],
                                      "f": [3.0, 2.0, 1.0, 2.0, 1.0]})
    joined = raw_log.with_data(data)
    assert np.isfinite(cltr.snips_estimate(joined, data.X[:, 0], n_bootstrap=0).value)
    assert cltr.evaluation.on_policy_value(raw_log) > 0      # the logged rankings' value needs no features


# ----------------------------------------------------------------------------- 2, 3. tree options

@pytest.fixture(scope="module")
def small():
    from click_sim import make_ranking, simulate_clicks

    data = make_ranking(n_queries=20, n_docs=(4, 8), n_features=4, random_state=0)
    return data, simulate_clicks(data, data.X[:, 0], n_passes=2, random_state=0)


BAD_LGB_PARAMS = [  # (lgb_params, fragments the message must hold)
    ({"max_bim": 7}, ["'max_bim'", "not a LightGBM parameter", "'max_bin'"]),
    ({"eta": 0.9}, ["'eta'", "alias of LightGBM's 'learning_rate'", "learning_rate=..."]),
    ({"num_leaf": 3}, ["'num_leaf'", "'num_leaves'", "num_leaves=..."]),
    ({"max_leaves": 3}, ["'max_leaves'", "num_leaves=..."]),
    ({"min_data": 3}, ["'min_data'", "'min_data_in_leaf'", "min_child_samples=..."]),
    ({"sub_feature": 0.5}, ["'sub_feature'", "'feature_fraction'", "colsample_bytree=..."]),
    ({"lambda": 1.0}, ["'lambda'", "'lambda_l2'", "reg_lambda=..."]),
    ({"num_boost_round": 50}, ["'num_boost_round'", "'num_iterations'", "n_estimators=..."]),
    ({"num_leaves": 3}, ["'num_leaves'", "num_leaves=..."]),
    ({"seed": 3}, ["'seed'", "random_state"]),
    ({"early_stopping_rounds": 3}, ["'early_stopping_rounds'", "early_stopping"]),
    ({"verbose": 1}, ["'verbose'", "Python warnings"]),
    ({"metric": "ndcg"}, ["'metric'", "metric"]),
    ({"linear_tree": True}, ["'linear_tree'", "linear trees", "load_model"]),
    ({"linear_trees": True}, ["'linear_trees'", "'linear_tree'", "load_model"]),
    ({"categorical_feature": [0]}, ["'categorical_feature'", "categorical", "one-hot"]),
    ({"cat_feature": "0"}, ["'cat_feature'", "categorical"]),
    ({1: 2}, ["keys must be LightGBM parameter names"]),
    ({"max_bin": 1}, ["LightGBM refused", "max_bin"]),
    ({"max_bin": "abc"}, ["LightGBM refused", "max_bin"]),
]


@pytest.mark.parametrize("params, fragments", BAD_LGB_PARAMS, ids=[repr(p) for p, _ in BAD_LGB_PARAMS])
def test_lgb_params_are_checked_against_lightgbms_own_tables(params, fragments, small):
    pytest.importorskip("lightgbm")
    with pytest.raises(ValueError) as err:
        cltr.GBDTPropDCG(n_estimators=2, num_leaves=4, lgb_params=params).fit(small[1])
    for fragment in fragments:
        assert fragment in str(err.value), (fragment, str(err.value))


def test_the_alias_table_is_lightgbms_own():
    lgb = pytest.importorskip("lightgbm")
    from counterfactual_ltr.estimators.gbdt import _lgb_aliases

    table = lgb.basic._ConfigAliases
    aliases = _lgb_aliases(lgb)
    assert set(table.aliases) <= set(aliases.values())
    assert all(aliases[alias] == name for name in table.aliases for alias in table.get_sorted(name))


def test_good_lgb_params_fit_and_the_logger_is_restored(small):
    lgb = pytest.importorskip("lightgbm")
    before = lgb.basic._LOGGER
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # every feature: on this tiny set, a tree on half of them may find no split (LightGBM warns, rightly)
        model = cltr.GBDTPropDCG(n_estimators=2, num_leaves=4, colsample_bytree=1.0,
                                 lgb_params={"max_bin": 15, "min_data_in_bin": 1}).fit(small[1])
    assert model.n_estimators_ == 2 and lgb.basic._LOGGER is before


def test_lightgbms_warnings_and_a_constant_ranker_reach_the_user(small):
    pytest.importorskip("lightgbm")
    from counterfactual_ltr.estimators.gbdt import ConstantRankerWarning, LightGBMWarning

    data, log = small
    with pytest.warns(ConstantRankerWarning, match=r"min_child_samples=100000 .* training rows") as record:
        model = cltr.GBDTPropDCG(n_estimators=3, num_leaves=4, min_child_samples=100000).fit(log)
    assert any(issubclass(w.category, LightGBMWarning) and "(3 times)" in str(w.message) for w in record)
    assert np.ptp(model.predict(data)) == 0


def test_cltr_fit_refuses_to_write_a_constant_tree_model(small, tmp_path, capsys):
    pytest.importorskip("lightgbm")
    from sklearn.datasets import dump_svmlight_file

    from counterfactual_ltr.cli import main
    from counterfactual_ltr.files import write_click_log

    data, log = small
    dump_svmlight_file(data.X, data.y, str(tmp_path / "d.txt"), query_id=data.qid, zero_based=False)
    write_click_log(log, tmp_path / "log.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main(["fit", str(tmp_path / "log.parquet"), str(tmp_path / "d.txt"), "--model", "gbdt-propdcg",
                       "--min-child-samples", "100000", "--n-estimators", "2", "--cv", "2", "-q",
                       "-o", str(tmp_path / "m.npz")])
    err = capsys.readouterr().err
    assert status == 2 and not (tmp_path / "m.npz").exists()
    assert "ranks every document equal" in err and "--min-child-samples" in err


# ----------------------------------------------------------------------------- 4. ids typed differently

def _events(query, doc):
    return ClickLog.from_events({"query": query, "doc": doc, "position": [1, 2, 1], "click": [1, 0, 1]})


ID_TYPES = [  # (log query, log doc, table query, table doc, fragments)
    (["1", "1", "2"], [5, 6, 5], [1, 1, 2], [5, 6, 5], ["query ids are strings", "'1'", "are integers", "1 and '1'"]),
    ([1, 1, 2], [5, 6, 5], ["1", "1", "2"], [5, 6, 5], ["query ids are integers", "are strings"]),
    ([1, 1, 2], ["5", "6", "5"], [1, 1, 2], [5, 6, 5], ["document ids are strings", "'5'", "feature table"]),
    ([1, 1, 2], [5, 6, 5], [1, 1, 2], ["5", "6", "5"], ["document ids are integers (e.g. 5)", "strings (e.g. '5')"]),
    ([1, 1, 2], [2**63, 6, 5], [1, 1, 2], ["5", "6", "5"], ["document ids are integers"]),
]


@pytest.mark.parametrize("lq, ld, tq, td, fragments", ID_TYPES)
@pytest.mark.parametrize("missing", ["raise", "drop_rows"])
def test_ids_typed_differently_on_the_two_sides_are_named(lq, ld, tq, td, fragments, missing):
    data = RankingDataset.from_frame({"query": tq, "doc": td, "f": [0.0, 1.0, 2.0]})
    with pytest.raises(ValueError) as err:
        _events(lq, ld).with_data(data, missing=missing)
    for fragment in fragments:
        assert fragment in str(err.value), (fragment, str(err.value))


def test_a_letor_data_set_joined_to_string_ids_says_so():
    data = RankingDataset(np.eye(3), [1, 0, 1], [5, 5, 7])
    with pytest.raises(ValueError, match="query ids are strings .* are integers"):
        _events(["5", "5", "7"], [0, 1, 2]).with_data(data)


def test_csv_files_typing_an_id_column_differently_are_named(tmp_path):
    import pandas as pd

    pd.DataFrame({"query": ["a", "a"], "doc": [1, 2], "position": [1, 2], "click": [1, 0]}).to_csv(
        tmp_path / "r1.csv", index=False)
    pd.DataFrame({"query": ["b", "b"], "doc": ["x", "y"], "position": [1, 2], "click": [1, 0]}).to_csv(
        tmp_path / "r2.csv", index=False)
    pd.DataFrame({"query": ["a", "a", "b", "b"], "doc": [1, 2, "x", "y"], "position": [1, 2, 1, 2],
                  "click": [1, 0, 1, 0]}).to_csv(tmp_path / "r3.csv", index=False)
    data = RankingDataset.from_frame({"query": ["a", "a", "b", "b"], "doc": ["1", "2", "x", "y"],
                                      "f": [0.0, 1.0, 2.0, 3.0]})
    for session in (None, "query"):
        with pytest.raises(ValueError) as err:
            cltr.aggregate_clicks([tmp_path / "r1.csv", tmp_path / "r2.csv"], data, query="query", session=session)
        message = str(err.value)
        assert "'doc'" in message and "r1.csv" in message and "r2.csv" in message and "every file" in message
        assert "batch_size" not in message
    with pytest.raises(ValueError, match=r"row 2 of .*r3.csv.*batch_size"):
        cltr.aggregate_clicks(tmp_path / "r3.csv", data, query="query", batch_size=2)


@pytest.mark.parametrize("session", [None, "query"])
def test_aggregate_clicks_names_ids_typed_differently_from_the_data_set(session, tmp_path):
    import pandas as pd

    pd.DataFrame({"query": ["a", "a"], "doc": [1, 2], "position": [1, 2], "click": [1, 0]}).to_csv(
        tmp_path / "r.csv", index=False)
    data = RankingDataset.from_frame({"query": ["a", "a"], "doc": ["1", "2"], "f": [0.0, 1.0]})
    with pytest.raises(ValueError, match=r"document ids are integers \(e.g. 1\) but .* strings \(e.g. '1'\)"):
        cltr.aggregate_clicks(tmp_path / "r.csv", data, query="query", session=session)


# ----------------------------------------------------------------------------- 5. Dask inputs

@pytest.mark.slow      # about 15 s: a cluster, and Dask's shuffle of each frame
def test_from_dask_names_the_column_partition_and_value(tmp_path):
    """One in-process cluster for the few Dask cases (each a frame of a few rows)."""
    dask = pytest.importorskip("dask")
    import dask.dataframe as dd
    import pandas as pd
    from dask.distributed import Client, LocalCluster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                               silence_logs=50)
    frame = pd.DataFrame({"query": [1, 1, 2, 2], "doc": [1, 2, 1, 2], "f0": ["0.5", "abc", "1", "2"],
                          "f1": [0.0, 1.0, 2.0, 3.0]})
    pd.DataFrame({"query": [1, 1], "doc": [1, 2], "f0": [0.0, 1.0], "f9": [1.0, 2.0]}).to_csv(tmp_path / "a.csv",
                                                                                             index=False)
    pd.DataFrame({"query": [2, 2], "doc": [1, 2], "f0": [0.0, 1.0]}).to_csv(tmp_path / "b.csv", index=False)
    with Client(cluster) as client:
        def build(df, features=("f0", "f1"), **kw):
            return RankingDataset.from_dask(df, query="query", doc="doc", features=list(features), client=client,
                                            **kw)

        for shuffle in (True, False):
            with pytest.raises(ValueError, match=r"partition \d: feature column 'f0' holds 'abc' \(row \d of the "
                                                 r"partition\), not a number"):
                build(dd.from_pandas(frame, npartitions=2), shuffle=shuffle)
            with pytest.raises(ValueError, match=r"lacks the columns \['f9'\].*different columns"):
                build(dd.read_csv([str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]), ("f0", "f9"), shuffle=shuffle)
        with pytest.raises(ValueError, match="column 'query' must hold ids .* float64"):
            build(dd.from_pandas(frame.assign(query=[1.5, 1.5, 2.0, 2.0], f0=0.0), npartitions=1), shuffle=False)
        with dask.config.set({"dataframe.convert-string": False}):
            mixed = frame.assign(query=pd.Series([1, 1, "b", "b"], dtype=object), f0=0.0)
            with pytest.raises(ValueError, match="column 'query' mixes strings with other values"):
                build(dd.from_pandas(mixed, npartitions=1), shuffle=False)
        good = build(dd.from_pandas(frame.assign(f0=0.0), npartitions=2))
        assert good.n_docs == 4
        # A log with a row twice, aggregated over the distributed data set: the session check's own words.
        log = pd.DataFrame({"session": [0, 0, 0, 1, 1], "qid": [1, 1, 1, 2, 2], "doc": [1, 2, 2, 1, 2],
                            "position": [1, 2, 2, 1, 2], "click": [True, False, False, False, True]})
        with pytest.raises(ValueError, match=r"partition \d: session 0: positions must run 1..n .* repeats"):
            cltr.aggregate_clicks(dd.from_pandas(log, npartitions=1), good, engine="dask")
    cluster.close()


# ----------------------------------------------------------------------------- 6. messages that locate

def _two_queries():
    data = RankingDataset.from_frame({"query": ["q", "q", "r", "r"], "doc": ["a", "b", "a", "b"],
                                      "f": [0.0, 1.0, 2.0, 3.0]})
    log = ClickLog.from_events({"query": ["q", "q", "r", "r"], "doc": ["a", "b", "a", "b"], "position": [1, 2, 1, 2],
                                "click": [1, 0, 0, 1]}).with_data(data)
    return data, log


@pytest.mark.parametrize("events, session, fragment", [
    ({"query": ["q"] * 3, "doc": ["a", "b", "a"], "position": [1, 2, 3], "page": ["p1"] * 3}, "page",
     "page 'p1' (query 'q') shows document 'a' twice, at positions 1 and 3"),
    ({"query": ["q"] * 4, "doc": ["b", "a", "b", "b"], "position": [1, 1, 2, 4]}, None,
     "page 1 (query 'q') shows document 'b' twice, at positions 2 and 4"),
])
@pytest.mark.parametrize("missing", ["raise", "drop_rows"])
def test_a_page_showing_a_document_twice_is_named_by_the_users_ids(events, session, fragment, missing):
    events = dict(events, click=[0] * len(events["doc"]))
    log = ClickLog.from_events(events, session=session)
    data = RankingDataset.from_frame({"query": ["q", "q"], "doc": ["a", "b"], "f": [0.0, 1.0]})
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        log.with_data(data, missing=missing, repeated="raise")
    import warnings

    with warnings.catch_warnings(record=True) as caught:     # the default drops such pages, naming them
        warnings.simplefilter("always")
        try:
            log.with_data(data, missing=missing)
            said = " ".join(str(w.message) for w in caught if "twice" in str(w.message))
        except ValueError as err:                             # when that drops every page
            said = str(err)
    assert "pages show a document twice" in said or "every page shows a document twice" in said
    assert "query 'q', document '" in said


BAD_IDS = [  # (column values, fragment)
    ([2**64, 3], r"holds 18446744073709551616 at frame row 0, beyond 64-bit integers"),
    ([-2**63 - 1, 3], r"beyond 64-bit integers"),
    (["a", ""], r"column 'doc' has an empty id at frame row 1"),
    (["", "a"], r"empty id at frame row 0"),
    (["a", "b\udc80"], r"holds 'b\\udc80' at frame row 1, which is not valid Unicode"),
]


@pytest.mark.parametrize("values, fragment", BAD_IDS)
@pytest.mark.parametrize("dtype", [object, "string[python]"])
def test_bad_ids_are_refused_by_events_and_feature_tables_alike(values, fragment, dtype):
    import pandas as pd

    if dtype != object and not all(isinstance(v, str) for v in values):
        pytest.skip("integers beyond 64 bits are not strings")
    doc = pd.Series(values, dtype=dtype)
    with pytest.raises(ValueError, match=fragment):
        ClickLog.from_events(pd.DataFrame({"query": ["q", "q"], "doc": doc, "position": [1, 2], "click": [1, 0]}))
    with pytest.raises(ValueError, match=fragment):
        RankingDataset.from_frame(pd.DataFrame({"query": ["q", "q"], "doc": doc, "f": [0.0, 1.0]}))


def test_an_empty_query_id_is_refused_in_a_frame_as_a_csv_refuses_it(tmp_path):
    import pandas as pd

    from counterfactual_ltr.files import read_click_log

    frame = pd.DataFrame({"query": ["", ""], "doc": ["a", "b"], "position": [1, 2], "click": [1, 0]})
    with pytest.raises(ValueError, match="column 'query' has an empty id"):
        ClickLog.from_events(frame)
    frame.to_csv(tmp_path / "e.csv", index=False)
    with pytest.raises(ValueError, match="'query'"):
        read_click_log(tmp_path / "e.csv")


@pytest.mark.parametrize("call, fragment", [
    (lambda log: cltr.compare_rankers(log, np.zeros(4), np.array([0, 0, np.nan, 0])),
     r"the baseline: scores hold a non-finite value \(nan\) at data-set row 2 \(query 'r', document 'a'\)"),
    (lambda log: cltr.compare_rankers(log, np.array([np.inf, 0, 0, 0])), r"the candidate: .*\(query 'q', document 'a'\)"),
    (lambda log: cltr.compare_rankers(log, {"x": np.zeros(4), "y": np.zeros(3)}), r"candidate 'y': scores have shape"),
    (lambda log: cltr.validation_report({"x": np.zeros(4), "y": np.array([0, np.inf, 0, 0])}, log),
     r"ranker 'y': scores hold a non-finite value \(inf\) at data-set row 1"),
    (lambda log: cltr.snips_estimate(log, np.array([0, np.nan, 0, 0])), r"document 'b'"),
])
def test_bad_scores_are_named_by_whose_they_are(call, fragment):
    _, log = _two_queries()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=fragment):
            call(log)


# ----------------------------------------------------------------------------- 7. resampling

@pytest.fixture(scope="module")
def sim():
    from click_sim import make_ranking, simulate_clicks

    data = make_ranking(n_queries=20, n_docs=(3, 6), random_state=0)
    return data, simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)


@pytest.mark.parametrize("n_bootstrap, several, confidence, least", [
    (1, False, 0.95, 40), (39, False, 0.95, 40), (50, True, 0.95, 80), (199, False, 0.99, 200), (2, False, 0.5, 4)])
def test_too_few_resamples_for_the_interval_are_refused_naming_the_minimum(sim, n_bootstrap, several, confidence,
                                                                           least):
    data, log = sim
    candidate = {"a": data.X[:, 1], "b": data.X[:, 2]} if several else data.X[:, 1]
    with pytest.raises(ValueError, match=rf"n_bootstrap={n_bootstrap} is too few .* at least {least} "):
        cltr.compare_rankers(log, candidate, n_bootstrap=n_bootstrap, confidence=confidence)
    if not several:
        with pytest.raises(ValueError, match=rf"^pair_bootstrap={n_bootstrap} is too few"):   # its own name
            cltr.validation_report({"x": data.X[:, 1]}, log, metrics=("dcg",), estimators=("snips",),
                                   pair_bootstrap=n_bootstrap, confidence=confidence, n_bootstrap=0)


def test_few_resamples_warn_and_enough_or_none_do_not(sim):
    from counterfactual_ltr.evaluation import EstimateWarning

    data, log = sim
    with pytest.warns(EstimateWarning, match="n_bootstrap=40: .* fewer than 5 replicates"):
        cltr.compare_rankers(log, data.X[:, 1], n_bootstrap=40, random_state=0)
    for n in (0, 200):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            comparison = cltr.compare_rankers(log, data.X[:, 1], n_bootstrap=n, random_state=0)
        assert not [w for w in record if "n_bootstrap" in str(w.message)]
        assert np.isfinite(comparison.improvement)


# ----------------------------------------------------------------------------- 8. the dict form saves

@pytest.mark.parametrize("constraints", [{0: 1}, {np.int64(2): -1, 0: 1}, [1] + [0] * 8 + [-1]])
def test_monotone_constraints_in_every_documented_form_save_and_load(constraints, sim, tmp_path):
    from counterfactual_ltr import load_model, save_model

    data, log = sim
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = cltr.SVMPropDCG(monotone_constraints=constraints).fit(log)
    save_model(model, tmp_path / "m.npz")
    back = load_model(tmp_path / "m.npz")
    expected = {int(k): v for k, v in constraints.items()} if isinstance(constraints, dict) else constraints
    assert back.monotone_constraints == expected
    assert all(type(k) is int for k in (back.monotone_constraints if isinstance(expected, dict) else {}))
    np.testing.assert_array_equal(back.predict(data), model.predict(data))


def test_a_mapping_that_json_cannot_hold_and_a_tampered_one_are_refused():
    from counterfactual_ltr.model_files.persistence import _Reader, _Writer

    with pytest.raises(ValueError, match="neither all strings nor all integers"):
        _Writer().value({0: 1, "a": 2}, "monotone_constraints")
    stored = _Writer().value({0: 1, 3: -1}, "monotone_constraints")
    assert _Reader({}).value(stored, "monotone_constraints") == {0: 1, 3: -1}
    for bad in ([[0, 1], [0, -1]], [["0", 1]], [[0]], [[True, 1]], []):
        with pytest.raises(ValueError, match="monotone_constraints"):
            _Reader({}).value({"__int_keys__": bad}, "monotone_constraints")


# ----------------------------------------------------------------------------- 9. a phantom page

@pytest.mark.parametrize("doc, position, warned, example", [
    (["a", "b", "b", "c"], [1, 2, 2, 3], True, "frame row 2 (query 'q', document 'b', position 2)"),
    (["a", "b", "c", "b"], [1, 2, 3, 2], True, "frame row 3 (query 'q', document 'b', position 2)"),
    (["a", "a", "b", "c"], [1, 1, 2, 3], True, "frame row 1 (query 'q', document 'a', position 1)"),
    (["a", "b", "a", "b"], [1, 2, 1, 2], False, None),        # the query issued again, its page shown again
    (["a", "b", "c", "d"], [1, 2, 1, 2], False, None),
    (["a", "b", "c", "d"], [1, 2, 3, 4], False, None),
])
def test_a_row_logged_twice_without_a_page_column_warns(doc, position, warned, example):
    from counterfactual_ltr.logs.raw_events import RepeatedRowWarning

    events = {"query": ["q"] * 4, "doc": doc, "position": position, "click": [0, 1, 1, 0]}
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        log = ClickLog.from_events(events)
    found = [str(w.message) for w in record if issubclass(w.category, RepeatedRowWarning)]
    assert bool(found) == warned, found
    if warned:
        assert found[0].startswith("1 page(s)") and example in found[0] and "session=" in found[0]
        assert log.n_sessions == 2                      # kept, as documented
    if position[0] != position[1] and position[2] != position[3]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")              # a page column says what the pages are: no guess
            ClickLog.from_events(dict(events, page=["p"] * 2 + ["r"] * 2), session="page")


def test_the_count_covers_every_repeat():
    from counterfactual_ltr.logs.raw_events import RepeatedRowWarning

    events = {"query": ["q"] * 3 + ["r"] * 3, "doc": ["a", "b", "b", "x", "x", "y"],
              "position": [1, 2, 2, 1, 1, 2], "click": [0, 1, 1, 1, 1, 0]}
    with pytest.warns(RepeatedRowWarning, match=r"^2 page\(s\)"):
        ClickLog.from_events(events)


# ----------------------------------------------------------------------------- a walk through the entry points

def _entry_points():
    """Public entry points of the newer modules, each a function of one possibly bad input ``x``."""
    from counterfactual_ltr.evaluation import on_policy_value

    scores = np.zeros(4)
    entries = {name: (lambda x, f=getattr(cltr, name): f(x, scores, n_bootstrap=0))
               for name in ("ips_estimate", "snips_estimate", "clipped_ips_estimate", "dr_estimate",
                            "policy_aware_estimate")}
    entries.update({
        "scorer": lambda x: cltr.snips_scorer()(_Zero(), x),
        "compare_rankers log": lambda x: cltr.compare_rankers(x, scores),
        "compare_rankers candidate": lambda x: cltr.compare_rankers(_two_queries()[1], x),
        "compare_rankers baseline": lambda x: cltr.compare_rankers(_two_queries()[1], scores, x),
        "validation_report log": lambda x: cltr.validation_report({"a": scores}, x),
        "validation_report rankers": lambda x: cltr.validation_report(x, _two_queries()[1]),
        "fit_relevance": lambda x: fit_relevance(x),
        "on_policy_value": lambda x: on_policy_value(x),
        "true_click_values": lambda x: true_click_values(x, scores, scores),
        "session_contributions": lambda x: session_contributions(x, scores),
        "from_events": lambda x: ClickLog.from_events(x),
        "from_frame": lambda x: RankingDataset.from_frame(x),
        "with_data": lambda x: _events(["q", "q", "r"], ["a", "b", "a"]).with_data(x),
        "aggregate_clicks": lambda x: cltr.aggregate_clicks(x, _two_queries()[0], query="query"),
        "GBDTPropDCG.fit": lambda x: cltr.GBDTPropDCG(n_estimators=2).fit(x),
        "GBDTPropDCG lgb_params": lambda x: cltr.GBDTPropDCG(n_estimators=2, lgb_params=x).fit(_two_queries()[1]),
        "SVMPropDCG monotone": lambda x: cltr.SVMPropDCG(monotone_constraints=x).fit(_two_queries()[1]),
        "save_model": lambda x: cltr.save_model(x, "/nonexistent-dir/m.npz"),
    })
    return entries


def _bad_inputs():
    import pandas as pd

    return {
        "None": None, "text": "abc", "number": 3.5, "nan": float("nan"), "empty dict": {}, "empty list": [],
        "array 2-D": np.zeros((2, 2)), "array of text": np.array(["a", "b"]), "a data set": _two_queries()[0],
        "a raw log": _events(["q", "q", "r"], ["a", "b", "a"]), "empty frame": pd.DataFrame(),
        "frame of ids only": pd.DataFrame({"query": ["q"], "doc": ["a"]}),
        "frame with text features": pd.DataFrame({"query": ["q", "q"], "doc": ["a", "b"], "f": ["x", "y"]}),
        "frame with NaN ids": pd.DataFrame({"query": [np.nan, "q"], "doc": ["a", "b"], "position": [1, 2],
                                            "click": [0, 1], "f": [0.0, 1.0]}),
        "frame with text positions": pd.DataFrame({"query": ["q", "q"], "doc": ["a", "b"], "position": ["1", "x"],
                                                   "click": [0, 1]}),
        "frame with big ids": pd.DataFrame({"query": ["q", "q"], "doc": [2**64, 1], "position": [1, 2],
                                            "click": [0, 1], "f": [0.0, 1.0]}),
        "frame with empty ids": pd.DataFrame({"query": ["", ""], "doc": ["a", "b"], "position": [1, 2],
                                              "click": [0, 1], "f": [0.0, 1.0]}),
        "frame with repeated columns": pd.DataFrame([[1, 2, 1, 0]], columns=["query", "query", "position", "click"]),
        "a log without clicks": ClickLog.from_events({"query": ["q", "q"], "doc": ["a", "b"], "position": [1, 2],
                                                      "click": [0, 0]}).with_data(_two_queries()[0]),
        "dict of scalars": {"query": "q", "doc": "a"}, "int-keyed dict": {0: 1, 7: -1},
        "mapping to None": {"a": None}, "nested": [[1, 2], [3]],
    }


ALLOWED = (ValueError, TypeError, NotImplementedError, FileNotFoundError, IsADirectoryError)
FORBIDDEN = (AttributeError, KeyError, IndexError)


@pytest.mark.parametrize("entry", sorted(_entry_points()))
def test_bad_inputs_through_every_entry_point_fail_with_a_clear_error(entry):
    call = _entry_points()[entry]
    failures = []
    for name, bad in _bad_inputs().items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                call(bad)
        except FORBIDDEN as err:
            failures.append(f"{name}: {type(err).__name__}: {err}")
        except ALLOWED as err:
            if not str(err).strip() or "could not convert" in str(err) or "broadcast" in str(err):
                failures.append(f"{name}: {type(err).__name__} says {str(err)!r}")
        except Exception as err:        # anything else is not a message about the input
            failures.append(f"{name}: {type(err).__name__}: {err}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("build", [
    lambda: ClickLog.from_events({"query": ["q\ud800"] * 2, "doc": ["a", "b"], "position": [1, 2], "click": [1, 0]}),
    lambda: RankingDataset.from_frame({"query": ["q", "q"], "doc": ["a", "b\udc80"], "f": [0.0, 1.0]}),
])
def test_a_lone_surrogate_in_a_mapping_of_columns_is_named(build):
    with pytest.raises(ValueError, match=r"column '(query|doc)' holds .* at row \d, which is not valid Unicode"):
        build()
