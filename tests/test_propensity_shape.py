"""Monotone estimates and the "auto" choice among propensity candidates."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from counterfactual_ltr import ClickLog, estimate_propensities
from counterfactual_ltr.propensity.estimation import non_increasing


def test_non_increasing_pools_rises_and_keeps_monotone_curves():
    rng = np.random.default_rng(0)
    curves = rng.uniform(0.1, 1.0, (50, 8))
    out = non_increasing(curves)
    assert np.all(np.diff(out, axis=1) <= 1e-15)
    np.testing.assert_allclose(out.sum(1), curves.sum(1))          # pooling keeps the total (equal weights)
    monotone = -np.sort(-curves, axis=1)
    np.testing.assert_array_equal(non_increasing(monotone), monotone)
    assert non_increasing([1.0, 0.5, 0.7, 0.2]).tolist() == [1.0, 0.6, 0.6, 0.2]


def _pbm_world(seed=0, pages=3000, n_queries=30, n_docs=8, eta=1.0):
    """Clicks by the position-based model; the logger ranks by attractiveness plus noise (so it varies)."""
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(0.05, 0.9, (n_queries, n_docs))
    q = rng.integers(0, n_queries, pages)
    score = alpha[q] + rng.normal(0, 0.25, (pages, n_docs))
    shown = np.argsort(-score, axis=1)[:, :5]
    positions = np.tile(np.arange(1, 6), pages)
    docs = shown.ravel()
    queries = np.repeat(q, 5)
    clicks = rng.random(docs.size) < positions ** -eta * alpha[queries, docs]
    frame = pd.DataFrame({"query": queries, "doc": docs, "position": positions, "click": clicks.astype(int),
                          "page": np.repeat(np.arange(pages), 5)})
    return frame, ClickLog.from_events(frame, session="page")


def test_monotone_estimate_is_non_increasing_and_equal_where_already_monotone():
    _, log = _pbm_world()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = estimate_propensities(log, "harvest", max_position=5, n_bootstrap=10, random_state=0,
                                      monotone=False)
        shaped = estimate_propensities(log, "harvest", max_position=5, n_bootstrap=10, random_state=0,
                                       monotone=True)
    assert np.all(np.diff(shaped.relative_) <= 1e-12)
    assert np.all(np.diff(shaped.bootstrap_, axis=1) <= 1e-12)
    if np.all(np.diff(plain.relative_) <= 0):
        np.testing.assert_allclose(shaped.relative_, plain.relative_)
    assert shaped.recipe_["options"] == {"monotone": True}
    with pytest.raises(TypeError, match="monotone is an option"):
        estimate_propensities(log, "swap", monotone=True)


def test_auto_chooses_an_examination_estimate_never_the_click_rate_by_position():
    from counterfactual_ltr.propensity.estimation import AUTO_CANDIDATES

    assert {method for _, method, _ in AUTO_CANDIDATES} <= {"smooth", "pbm", "harvest"}
    _, log = _pbm_world(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = estimate_propensities(log, "auto", max_position=5, n_bootstrap=20, random_state=0)
    names = [row["candidate"] for row in model.auto_table_]
    assert "rank-only" not in names and "document-only" not in names
    assert model.auto_choice_ in names and model.recipe_["method"] in ("smooth", "pbm", "harvest")
    assert model.bootstrap_.shape == (20, 5)          # replicates and a recipe, whichever is chosen
    truth = np.arange(1, 6) ** -1.0
    assert np.max(np.abs(model.relative_ / truth - 1)) < 0.25
    json.dumps(model.auto_table_, allow_nan=False)     # a JSON file can hold it


def test_auto_keeps_smooth_within_noise_and_says_why():
    _, log = _pbm_world(3, pages=600)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = estimate_propensities(log, "auto", max_position=5, n_bootstrap=0, random_state=0)
    from counterfactual_ltr.propensity.estimation import AUTO_MARGIN_SE

    gains = {row["candidate"]: row["gain_se"] for row in model.auto_table_}
    # smooth unless the choice is ahead of it beyond the noise
    assert model.auto_choice_ == "smooth" or gains[model.auto_choice_] > AUTO_MARGIN_SE
    assert model.auto_choice_ in model.auto_reason_


def test_cli_prints_the_table_auto_chose_from(tmp_path, capsys):
    from counterfactual_ltr.cli import main

    frame, _ = _pbm_world(2, pages=1500)
    frame.to_csv(tmp_path / "raw.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["propensity", str(tmp_path / "raw.csv"), "--method", "auto", "--session", "page",
                     "--max-position", "5", "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    assert "auto: held-out log-likelihood" in out
    for name in ("smooth", "pbm monotone", "harvest monotone"):
        assert name in out
    assert "rank-only" not in out
    assert out.count("<- chosen") == 1


def _rising_world(seed=0):
    """A harvest estimate that rises again at position 4 (too few varied clicks there), so shape matters."""
    frame, log = _pbm_world(seed, pages=400)
    return log


def test_defaults_harvest_monotone_pbm_plain_and_the_recipe_records_the_shape():
    from counterfactual_ltr.propensity.estimation import MONOTONE_DEFAULT

    assert MONOTONE_DEFAULT == {"harvest": True, "pbm": False}
    log = _rising_world()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = estimate_propensities(log, "harvest", max_position=5, n_bootstrap=0)
        shaped = estimate_propensities(log, "harvest", max_position=5, n_bootstrap=0, monotone=True)
        plain = estimate_propensities(log, "harvest", max_position=5, n_bootstrap=0, monotone=False)
        pbm = estimate_propensities(log, "pbm", max_position=5, n_bootstrap=0)
    np.testing.assert_array_equal(default.relative_, shaped.relative_)
    assert default.recipe_["options"] == {"monotone": True} and pbm.recipe_["options"] == {"monotone": False}
    assert plain.recipe_["options"] == {"monotone": False}
    if np.any(np.diff(plain.relative_) > 0):           # the default changed something: it pooled a rise
        assert not np.array_equal(default.relative_, plain.relative_)


def test_replicates_re_estimated_for_a_comparison_keep_the_estimates_shape():
    """A comparison's resamples re-estimate by the recipe: a monotone estimate gives monotone replicates."""
    from counterfactual_ltr.propensity.estimation import replicate_curves

    log = _rising_world(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shaped = estimate_propensities(log, "harvest", max_position=5, n_bootstrap=0, monotone=True)
        plain = estimate_propensities(log, "harvest", max_position=5, n_bootstrap=0, monotone=False)
    weights = np.random.default_rng(0).poisson(1.0, (30, log.n_queries)).astype(float)
    curves, how = replicate_curves(shaped, log, weights)
    assert how == "re-estimated" and np.all(np.diff(curves, axis=1) <= 1e-12)
    raw, _ = replicate_curves(plain, log, weights)
    assert np.any(np.diff(raw, axis=1) > 1e-9)        # the plain recipe's replicates do rise somewhere


def test_cli_monotone_option_shapes_the_curve(tmp_path):
    from click.testing import CliRunner

    from counterfactual_ltr.cli import cli

    frame, _ = _pbm_world(2, pages=400)
    frame.to_csv(tmp_path / "log.csv", index=False)
    base = [str(tmp_path / "log.csv"), "--session", "page", "--max-position", "5", "--bootstrap", "0", "-q"]
    out = {}
    for flag in ("--monotone", "--no-monotone"):
        result = CliRunner().invoke(cli, ["propensity", *base, "--method", "harvest", flag, "-o",
                                          str(tmp_path / f"{flag}.json")])
        assert result.exit_code == 0, result.output
        import json
        out[flag] = json.loads((tmp_path / f"{flag}.json").read_text())["propensity"]["recipe"]["options"]
    assert out == {"--monotone": {"monotone": True}, "--no-monotone": {"monotone": False}}
    result = CliRunner().invoke(cli, ["propensity", *base, "--method", "swap", "--monotone"])
    assert result.exit_code == 2 and "--monotone/--no-monotone shape a pbm or harvest curve" in result.output
