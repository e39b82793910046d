"""Model and propensity files trust nothing they hold: every bad entry a ValueError naming the file and the entry.

Each test edits a file that ``save_model`` wrote (its JSON header or one of its arrays) the way a
corrupted or hostile file would differ, then loads it. The property is "a ValueError naming the file
(and the entry), or the same model": never a loaded model that predicts NaN, complex or misshapen
scores, never a MemoryError, RecursionError, AttributeError or UFuncTypeError.
"""

from __future__ import annotations

import io
import json
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.preprocessing import MinMaxScaler, QuantileTransformer, StandardScaler

from click_sim import make_ranking, simulate_clicks
from counterfactual_ltr.model_files._model_state import STATE
from counterfactual_ltr.estimators import DeepPropDCG, GBDTPropDCG, RankSVM, SLAMRanker, SVMPropDCG, SVMPropRank, SVMPropRBP
from counterfactual_ltr.persistence import (_estimator_classes, load_model, load_propensity, propensity_from_dict,
                                            propensity_to_dict, save_model)
from counterfactual_ltr.propensity import (EstimatedPropensity, EstimatedTrustBias, PositionBasedPropensity,
                                           TabularPropensity, TrustBiasPropensity, estimate_propensities)


@pytest.fixture(scope="module")
def data_and_log():
    data = make_ranking(n_queries=25, n_docs=(4, 9), n_features=5, random_state=4)
    return data, simulate_clicks(data, data.X[:, 0], n_passes=4, random_state=1)


def _fit(kind, data, log):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"ranksvm": lambda: RankSVM(C=2.0, preprocessor=StandardScaler()).fit(data),
                "propdcg": lambda: SVMPropDCG(C=1.0, preprocessor=MinMaxScaler()).fit(log),
                "proprank": lambda: SVMPropRank(C=1.0).fit(log),
                "proprbp": lambda: SVMPropRBP(C=1.0, preprocessor=QuantileTransformer(n_quantiles=20)).fit(log),
                "slam": lambda: SLAMRanker(C=10.0).fit(data),
                "deep": lambda: DeepPropDCG(hidden_layer_sizes=(3,), max_epochs=2, random_state=0,
                                            preprocessor=StandardScaler()).fit(log),
                "gbdt": lambda: GBDTPropDCG(n_estimators=3, num_leaves=4, preprocessor=StandardScaler()).fit(log)}[kind]()


KINDS = ("ranksvm", "propdcg", "proprank", "proprbp", "slam", "deep", "gbdt")


@pytest.fixture(scope="module")
def saved(data_and_log, tmp_path_factory):
    data, log = data_and_log
    folder = tmp_path_factory.mktemp("models")
    paths = {}
    for kind in KINDS:
        paths[kind] = folder / f"{kind}.npz"
        save_model(_fit(kind, data, log), paths[kind])
    return paths


def _entries(path) -> tuple[dict, dict]:
    with np.load(path) as archive:
        entries = {k: archive[k] for k in archive.files}
    return entries, json.loads(str(entries["__meta__"]))


def _write(path, entries, meta=None):
    entries = dict(entries)
    if meta is not None:
        entries["__meta__"] = np.array(json.dumps(meta))
    with open(path, "wb") as fh:
        np.savez(fh, **entries)
    return path


def _refused(path, *needles):
    """Loading fails with a ValueError naming the file and every needle."""
    with pytest.raises(ValueError) as info:
        load_model(path)
    message = str(info.value)
    assert str(path) in message, message
    for needle in needles:
        assert needle in message, message
    return message


def _array_key(meta, name):
    """The npz entry holding fitted attribute ``name`` (a plain array or a list)."""
    value = meta["state"][name]
    value = value.get("__list__", value)
    return value["__array__"]


# ----------------------------------------------------------------------------- arrays that make the scores

BAD_ARRAYS = {
    "nan": lambda a: np.where(np.arange(a.size).reshape(a.shape) == 0, np.nan, a),
    "inf": lambda a: np.full_like(a, np.inf),
    "complex": lambda a: a.astype(np.complex128),
    "2-D": lambda a: a.reshape(1, -1),
    "strings": lambda a: a.astype(str),
    "shorter": lambda a: a.ravel()[:-1],
    "float32": lambda a: a.astype(np.float32),
    "int64": lambda a: a.astype(np.int64),
    "bool": lambda a: a > 0,
    "empty": lambda a: np.zeros(0),
}


@pytest.mark.parametrize("bad", sorted(BAD_ARRAYS))
@pytest.mark.parametrize("kind", ["ranksvm", "proprank", "slam"])
def test_a_bad_coef_is_refused(kind, bad, saved, tmp_path):
    entries, meta = _entries(saved[kind])
    key = _array_key(meta, "coef_")
    entries[key] = BAD_ARRAYS[bad](entries[key])
    path = _write(tmp_path / "bad.npz", entries)
    message = _refused(path)
    assert "coef_" in message or key in message, message


@pytest.mark.parametrize("bad", sorted(BAD_ARRAYS))
@pytest.mark.parametrize("layer", [0, 1, 2, 3])
def test_bad_network_parameters_are_refused(layer, bad, saved, tmp_path):
    entries, meta = _entries(saved["deep"])
    key = meta["state"]["model_"]["__mlp__"]["params"][layer]["__array__"]
    entries[key] = BAD_ARRAYS[bad](entries[key])
    message = _refused(_write(tmp_path / "bad.npz", entries))
    assert f"model_.params[{layer}]" in message or key in message, message


@pytest.mark.parametrize("name, value, needle", [
    ("hidden_layer_sizes", [4], "model_.params[0]"),        # layers the arrays do not hold: never initialised
    ("hidden_layer_sizes", [10**9], "hidden_layer_sizes"),
    ("hidden_layer_sizes", [], "hidden_layer_sizes"),
    ("hidden_layer_sizes", "3", "hidden_layer_sizes"),
    ("dtype", "float16", "dtype"),
    ("dtype", "object", "dtype"),
    ("activation", "softmax", "activation"),
    ("n_features", 6, "n_features_in_"),
    ("params", [], "parameter arrays"),
])
def test_a_bad_network_description_is_refused(name, value, needle, saved, tmp_path):
    entries, meta = _entries(saved["deep"])
    meta["state"]["model_"]["__mlp__"][name] = value
    _refused(_write(tmp_path / "bad.npz", entries, meta), needle)


# ----------------------------------------------------------------------------- the fitted attributes

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["predict", "fit", "score", "__class__", "__dict__", "get_params", "coef"])
def test_state_names_are_a_fixed_list_per_class(kind, name, saved, tmp_path):
    """A state entry named like a method (or any other name) is refused, never set on the model."""
    entries, meta = _entries(saved[kind])
    meta["state"][name] = 3
    _refused(_write(tmp_path / "bad.npz", entries, meta), repr(name))


@pytest.mark.parametrize("kind", KINDS)
def test_every_missing_fitted_attribute_is_named(kind, saved, tmp_path):
    entries, meta = _entries(saved[kind])
    for name in list(meta["state"]):
        edited = json.loads(json.dumps(meta))
        del edited["state"][name]
        kept = {k: v for k, v in entries.items()}
        message = _refused(_write(tmp_path / "bad.npz", kept, edited))
        assert name in message, message


@pytest.mark.parametrize("kind, name, value, needle", [
    ("slam", "n_features_in_", 7, "coef_"),
    ("ranksvm", "n_features_in_", 7, "features"),
    ("ranksvm", "n_features_in_", "x", "n_features_in_"),
    ("ranksvm", "n_features_in_", -1, "n_features_in_"),
    ("ranksvm", "n_features_in_", 10**12, "n_features_in_"),
    ("ranksvm", "n_features_in_", True, "n_features_in_"),
    ("ranksvm", "n_iter_", -3, "n_iter_"),
    ("ranksvm", "n_iter_", 2.5, "n_iter_"),
    ("ranksvm", "converged_", "yes", "converged_"),
    ("ranksvm", "objective_", "low", "objective_"),
    ("proprank", "n_ccp_iter_", 5, "n_ccp_iter_"),
    ("deep", "n_iter_", 7, "n_iter_"),
    ("deep", "best_epoch_", 99, "best_epoch_"),
    ("deep", "initial_loss_", {"__float__": "nan"}, "initial_loss_"),
    ("slam", "coef_", [1, 2, 3, 4, 5], "coef_"),
    ("slam", "coef_", {"__float__": "1e"}, "coef_"),
    ("slam", "coef_", {"__dtype__": "object"}, "coef_"),
    ("slam", "coef_", {"__array__": "a99"}, "a99"),
    ("slam", "preprocessor_", {"__transformer__": {"class": "PCA", "params": {}, "state": {}}}, "preprocessor"),
])
def test_bad_fitted_values_are_refused(kind, name, value, needle, saved, tmp_path):
    entries, meta = _entries(saved[kind])
    meta["state"][name] = value
    _refused(_write(tmp_path / "bad.npz", entries, meta), needle)


@pytest.mark.parametrize("kind, attribute, bad", [
    ("ranksvm", "scale_", lambda a: np.zeros_like(a)),             # a StandardScaler dividing by 0
    ("ranksvm", "mean_", lambda a: np.r_[a, 1.0]),                 # for 6 features, the model has 5
    ("ranksvm", "mean_", lambda a: np.full_like(a, np.nan)),
    ("propdcg", "min_", lambda a: a[:2]),
    ("proprbp", "quantiles_", lambda a: a[::-1]),                  # no longer sorted
    ("proprbp", "references_", lambda a: a * 3),                   # beyond [0, 1]
])
def test_bad_preprocessor_state_is_refused(kind, attribute, bad, saved, tmp_path):
    entries, meta = _entries(saved[kind])
    key = meta["state"]["preprocessor_"]["__transformer__"]["state"][attribute]["__array__"]
    entries[key] = bad(entries[key])
    _refused(_write(tmp_path / "bad.npz", entries), attribute)


def test_a_preprocessor_of_another_width_or_with_bad_parameters_is_refused(saved, tmp_path):
    entries, meta = _entries(saved["ranksvm"])
    transformer = meta["state"]["preprocessor_"]["__transformer__"]
    transformer["state"]["n_features_in_"] = 4
    _refused(_write(tmp_path / "width.npz", entries, meta), "n_features_in_")
    entries, meta = _entries(saved["ranksvm"])
    meta["state"]["preprocessor_"]["__transformer__"]["params"]["with_mean"] = "sometimes"
    _refused(_write(tmp_path / "params.npz", entries, meta), "with_mean")
    entries, meta = _entries(saved["ranksvm"])
    meta["state"]["preprocessor_"]["__transformer__"]["state"]["transform"] = 1
    _refused(_write(tmp_path / "method.npz", entries, meta), "transform")


@pytest.mark.parametrize("kind, name, value, needle", [
    ("ranksvm", "C", "abc", "C"),
    ("ranksvm", "C", {"__float__": "nan"}, "C"),
    ("ranksvm", "C", -1, "C"),
    ("ranksvm", "l1_ratio", 5, "l1_ratio"),                     # checked whatever the penalty
    ("ranksvm", "penalty", "l3", "penalty"),
    ("ranksvm", "bogus", 1, "bogus"),
    ("propdcg", "max_ccp_iter", 2.5, "max_ccp_iter"),
    ("propdcg", "monotone_constraints", [1, 0, 2, 0, 0], "monotone_constraints"),
    ("propdcg", "monotone_constraints", [1, 0], "monotone_constraints"),
    ("proprbp", "p", 1.5, "p"),
    ("proprank", "propensity", {"__propensity__": {"kind": "tabular", "values": [1.0, 2.0]}}, "values"),
    ("proprank", "propensity", {"__propensity__": {"kind": "position_based", "eta": 1, "clips": 0.1}}, "clips"),
    ("slam", "weights", "mrr", "weights"),
    ("deep", "dtype", {"__dtype__": "int64"}, "dtype"),
    ("deep", "dtype", {"__dtype__": "object"}, "dtype"),
    ("deep", "alpha", -1.0, "alpha"),
    ("deep", "random_state", "seed", "random_state"),
    ("ranksvm", "preprocessor", {"__transformer__": {"class": "MinMaxScaler", "params": {"feature_range": "wide"},
                                                     "state": {}}}, "feature_range"),
])
def test_bad_parameters_are_refused_as_fit_would(kind, name, value, needle, saved, tmp_path):
    entries, meta = _entries(saved[kind])
    meta["params"][name] = value
    _refused(_write(tmp_path / "bad.npz", entries, meta), needle)


@pytest.mark.parametrize("edit, needle", [
    (lambda e, m: m.__setitem__("state", []), "state"),
    (lambda e, m: m.__setitem__("params", None), "params"),
    (lambda e, m: m.__setitem__("extra", 1), "header"),
    (lambda e, m: m.__setitem__("class", "os.system"), "unknown estimator class"),
    (lambda e, m: m.__setitem__("format_version", 99), "version"),
    (lambda e, m: e.__setitem__("a99", np.zeros(2)), "a99"),                 # an array no attribute uses
    (lambda e, m: e.__setitem__("__meta__", np.arange(3)), "__meta__"),
])
def test_malformed_headers_and_entries_are_refused(edit, needle, saved, tmp_path):
    entries, meta = _entries(saved["ranksvm"])
    edit(entries, meta)
    if not isinstance(entries.get("__meta__"), np.ndarray) or entries["__meta__"].dtype.kind == "U":
        entries["__meta__"] = np.array(json.dumps(meta))
    _refused(_write(tmp_path / "bad.npz", entries), needle)


# ----------------------------------------------------------------------------- sizes and nesting

def _npy_bytes(array, shape_text=None) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    raw = buffer.getvalue()
    return raw if shape_text is None else raw.replace(f"{array.shape}".encode(), shape_text.encode(), 1)


@pytest.mark.parametrize("shape", ["(10000000000,)", "(100000, 100000)", "(5,)", "(4,)"])
def test_declared_sizes_are_checked_before_any_allocation(shape, saved, tmp_path):
    """A 4 KB file whose array header declares 10^10 floats is refused without allocating them."""
    entries, meta = _entries(saved["slam"])
    key = _array_key(meta, "coef_")
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as archive:
        for name, value in entries.items():
            archive.writestr(name + ".npy", _npy_bytes(np.ones(3), shape) if name == key else _npy_bytes(value))
    tracemalloc.start()
    try:
        _refused(path, key)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6, f"{peak / 1e6:.0f} MB allocated"


def test_a_compressed_member_that_would_expand_past_deflate_is_refused(saved, tmp_path):
    entries, _ = _entries(saved["slam"])
    path = tmp_path / "deflated.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, value in entries.items():
            archive.writestr(name + ".npy", _npy_bytes(value))
    assert load_model(path).n_features_in_ == 5          # a compressed archive of the same model still loads
    # The central directory's first record declares its member 10^9 bytes long, uncompressed.
    raw = bytearray(path.read_bytes())
    record = raw.find(b"PK\x01\x02")
    raw[record + 24: record + 28] = (10**9).to_bytes(4, "little")
    bomb = tmp_path / "bomb.npz"
    bomb.write_bytes(bytes(raw))
    tracemalloc.start()
    try:
        _refused(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 5000 + "1" + "}" * 5000,
                                  "x" * 2_000_000, "not json"])
def test_the_json_header_is_bounded(text, saved, tmp_path):
    entries, _ = _entries(saved["ranksvm"])
    entries["__meta__"] = np.array(text)
    message = _refused(_write(tmp_path / "bad.npz", entries))
    assert "RecursionError" not in message


def test_save_refuses_what_load_would_refuse(data_and_log, tmp_path):
    data, log = data_and_log
    model = RankSVM().fit(data)
    model.coef_ = np.r_[model.coef_[:-1], np.nan]
    with pytest.raises(ValueError, match="coef_"):
        save_model(model, tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()
    model = RankSVM().fit(data)
    model.extra_ = 1
    with pytest.raises(ValueError, match="extra_"):
        save_model(model, tmp_path / "m.npz")


def test_every_saveable_class_lists_its_fitted_attributes():
    """A class registered for saving without its list in _model_state.STATE could not be checked on load."""
    assert set(_estimator_classes()) <= set(STATE)


@pytest.mark.parametrize("kind", KINDS)
def test_round_trips_stay_identical(kind, data_and_log, saved):
    data, log = data_and_log
    again = load_model(saved[kind])
    np.testing.assert_array_equal(again.predict(data), _fit(kind, data, log).predict(data))


# ----------------------------------------------------------------------------- propensity models

def _estimated(seed: int, K: int, method: str = "swap") -> EstimatedPropensity:
    rng = np.random.default_rng(seed)
    relative = np.r_[1.0, np.sort(rng.uniform(0.05, 1.0, K - 1))[::-1]]
    lower, upper = relative * 0.9, np.minimum(relative * 1.1, 1.0)
    return EstimatedPropensity(relative, lower, upper, method=method, confidence=0.9, n_sessions=int(rng.integers(1, 10**6)))


def _same_function(a, b, positions):
    def values(model):
        try:
            if getattr(model, "is_affine", False):
                return np.stack([model.alpha(positions), model.beta(positions), model(positions)])
            return model(positions)
        except ValueError as err:
            return str(err)
    va, vb = values(a), values(b)
    if isinstance(va, str) or isinstance(vb, str):
        assert va == vb
    else:
        np.testing.assert_array_equal(va, vb)


@st.composite
def propensity_models(draw):
    kind = draw(st.sampled_from(["position", "clipped", "tabular", "trust", "estimated", "estimated_trust"]))
    floats = st.floats(0.01, 1.0, allow_nan=False)
    K = draw(st.integers(2, 12))
    if kind == "position":
        return PositionBasedPropensity(draw(st.floats(0.0, 3.0)))
    if kind == "clipped":
        return PositionBasedPropensity(draw(st.floats(0.0, 3.0)), clip=draw(floats))
    if kind == "tabular":
        return TabularPropensity(draw(st.lists(floats, min_size=1, max_size=12)))
    if kind == "estimated":
        return _estimated(draw(st.integers(0, 10**6)), K, draw(st.sampled_from(["swap", "harvest", "em"])))
    theta = np.asarray(draw(st.lists(floats, min_size=K, max_size=K)))
    plus = np.asarray(draw(st.lists(st.floats(0.6, 1.0), min_size=K, max_size=K)))
    minus = np.asarray(draw(st.lists(st.floats(0.0, 0.5), min_size=K, max_size=K)))
    if kind == "trust":
        return TrustBiasPropensity(theta, plus, minus)
    return EstimatedTrustBias(theta, plus, minus, intervals={"examination": (theta * 0.9, theta)}, n_sessions=K)


@settings(max_examples=150, deadline=None)
@given(propensity_models())
def test_every_propensity_model_round_trips_as_the_same_function(model):
    """JSON (as cltr propensity writes it) and a model file give back the same function at positions 1..1000."""
    positions = np.arange(1, 1001)
    again = propensity_from_dict(json.loads(json.dumps(propensity_to_dict(model))))
    assert type(again) is type(model)
    _same_function(model, again, positions)


def test_an_estimate_keeps_its_power_law_tail_in_files_and_in_model_files(data_and_log, tmp_path):
    """The issue's case: an EstimatedPropensity read back as a TabularPropensity lost its tail (4-7x off at 20)."""
    data, _ = data_and_log
    from click_sim import PositionBasedClickModel, SwapIntervention

    log = simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(eta=1.0), n_passes=300, random_state=0,
                          intervention=SwapIntervention(0.5, max_position=4))
    estimate = estimate_propensities(log, "swap", max_position=4, n_bootstrap=20, random_state=0)
    positions = np.arange(1, 1001)
    path = tmp_path / "propensity.json"
    path.write_text(json.dumps({"method": "swap", "propensity": propensity_to_dict(estimate)}))
    again = load_propensity(str(path))
    assert isinstance(again, EstimatedPropensity) and again([20])[0] == estimate([20])[0] < estimate([4])[0]
    np.testing.assert_array_equal(again(positions), estimate(positions))
    np.testing.assert_array_equal(again.lower_, estimate.lower_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SVMPropDCG(C=1.0, propensity=estimate).fit(log)
    save_model(model, tmp_path / "m.npz")
    np.testing.assert_array_equal(load_model(tmp_path / "m.npz").propensity(positions), estimate(positions))


@pytest.mark.parametrize("edit, needle", [
    (lambda s: s.__setitem__("eta", s["eta"] + 0.5), "inconsistent"),
    (lambda s: s.__setitem__("values", s["values"][:-1]), "inconsistent"),
    (lambda s: s.__setitem__("relative", [1.0, -0.5, 0.2]), "positive"),
    (lambda s: s.__setitem__("lower", [0.1]), "lower"),
    (lambda s: s.__setitem__("method", "magic"), "method"),
    (lambda s: s.__setitem__("confidence", 2), "confidence"),
    (lambda s: s.__setitem__("relative", "abc"), "relative"),
    (lambda s: s.__setitem__("tail", 1.0), "tail"),
    (lambda s: s.pop("eta"), "eta"),
])
def test_inconsistent_estimate_descriptions_are_refused(edit, needle):
    spec = propensity_to_dict(_estimated(0, 3))
    edit(spec)
    with pytest.raises(ValueError, match=needle):
        propensity_from_dict(spec)


@pytest.mark.parametrize("text, needle", [
    ("[" * 50_000 + "]" * 50_000, "nested"),
    ('{"kind": "position_based", "eta": NaN}', "eta"),
    ('{"kind": "tabular", "values": [1, true]}', "values"),
    ('{"kind": "tabular", "values": ["1"]}', "values"),
    ('{"kind": "trust_bias", "examination": [1], "eps_plus": [0.1], "eps_minus": [0.5]}', "eps_plus"),
    ('"position_based"', "JSON object"),
])
def test_bad_propensity_files_are_clear_errors(text, needle, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=needle) as info:
        load_propensity(str(path))
    assert str(path) in str(info.value)


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "-0.5"])
def test_a_bad_eta_is_named_as_such(value):
    with pytest.raises(ValueError, match="not a valid eta"):
        load_propensity(value)


# ----------------------------------------------------------------------------- GBDTPropDCG's trees

def _booster_text(path) -> tuple[dict, dict, str, str]:
    entries, meta = _entries(path)
    key = meta["state"]["booster_"]["__booster__"]["__array__"]
    return entries, meta, key, entries[key].tobytes().decode("utf-8")


@pytest.mark.parametrize("edit, needle", [
    (lambda text: text.replace("max_feature_idx=4", "max_feature_idx=6"), "booster"),
    (lambda text: "not a model", "booster"),
    (lambda text: text[: text.index("end of trees") // 2], "booster_"),   # crashes LightGBM's own parser
    (lambda text: text.replace("tree_sizes=", "tree_sizes=1"), "tree_sizes"),
    (lambda text: text.replace("left_child=1 ", "left_child=0 ", 1), "node 0 has the child node 0"),  # a cycle
    (lambda text: text.replace("num_cat=0", "num_cat=1"), "categorical"),
])
def test_a_tampered_booster_is_refused(edit, needle, saved, data_and_log, tmp_path):
    entries, meta, key, text = _booster_text(saved["gbdt"])
    assert "max_feature_idx=4" in text
    entries[key] = np.frombuffer(edit(text).encode("utf-8"), dtype=np.uint8)
    _refused(_write(tmp_path / "bad.npz", entries, meta), needle)


def test_trees_of_another_width_are_refused(saved, tmp_path):
    other = make_ranking(n_queries=25, n_docs=(4, 9), n_features=3, random_state=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        narrow = GBDTPropDCG(n_estimators=3, num_leaves=4).fit(simulate_clicks(other, other.X[:, 0], n_passes=4,
                                                                                random_state=1))
    entries, meta, key, _ = _booster_text(saved["gbdt"])
    entries[key] = narrow.booster_to_array()
    _refused(_write(tmp_path / "bad.npz", entries, meta), "booster_", "take 3 features", "n_features_in_ is 5")


def test_a_booster_that_is_not_text_is_refused(saved, tmp_path):
    entries, meta, key, _ = _booster_text(saved["gbdt"])
    entries[key] = np.full(8, 0xFF, dtype=np.uint8)
    _refused(_write(tmp_path / "bad.npz", entries, meta), "UTF-8")
    entries[key] = np.zeros(8)
    _refused(_write(tmp_path / "bad.npz", entries, meta), "uint8")


def test_the_saved_trees_score_as_the_fitted_ones(saved, data_and_log):
    data, log = data_and_log
    np.testing.assert_array_equal(load_model(saved["gbdt"]).predict(data), _fit("gbdt", data, log).predict(data))


_MUTATION_CHARS = "0123456789-.e \n=Tabc"


@settings(max_examples=150, deadline=None)
@given(edits=st.lists(st.tuples(st.integers(0, 4), st.floats(0, 1, exclude_max=True),
                                st.integers(0, len(_MUTATION_CHARS) - 1)), min_size=1, max_size=3))
def test_an_edited_booster_text_is_refused_or_scores_finitely(edits, saved, data_and_log):
    """Truncations, edited, deleted and repeated characters and lines: a ValueError or a model whose scores
    are finite, never a crash (LightGBM's parser alone segfaults on some)."""
    data, _ = data_and_log
    _, _, _, text = _booster_text(saved["gbdt"])
    for kind, where, char in edits:
        p, c = int(where * len(text)), _MUTATION_CHARS[char]
        lines, j = text.split("\n"), int(where * text.count("\n"))
        text = [text[:p], text[:p] + c + text[p + 1:], "\n".join(lines[:j] + lines[j + 1:]),
                "\n".join(lines[:j] + [lines[j]] + lines[j:]), text[:p] + c + text[p:]][kind]
    try:
        booster = GBDTPropDCG.booster_from_array(np.frombuffer(text.encode("utf-8"), dtype=np.uint8), 5)
    except ValueError:
        return
    assert np.all(np.isfinite(booster.predict(data.X)))


def test_the_fuzz_script_counts_no_crash():
    """experiments.bench_fuzz_trees with few edits (the docs' figures come from its default 18,000)."""
    from experiments import bench_fuzz_trees

    out = bench_fuzz_trees.main(["--edits", "150", "--batches", "1", "--seed", "3"])
    assert out["total"]["crashed"] == 0 and out["total"]["not_finite"] == 0
    assert out["total"]["refused"] + out["total"]["loaded"] == 150 and out["total"]["refused"] > 100
