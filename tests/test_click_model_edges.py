"""Click models on edge cases: logs that do not identify theta, held-out ids of another type."""

import warnings

import numpy as np
import pytest

from counterfactual_ltr import ClickLog
from counterfactual_ltr.propensity import IdentificationWarning
from counterfactual_ltr.propensity.click_models import DocumentOnlyModel, PositionBasedModel, RankOnlyModel


def _log(queries, docs, positions, clicks):
    return ClickLog.from_events({"query": queries, "doc": docs, "position": positions, "click": clicks})


def _varied_log(seed=0, pages=300):
    rng = np.random.default_rng(seed)
    docs = np.array([rng.permutation(4) for _ in range(pages)]).ravel()
    positions = np.tile(np.arange(1, 5), pages)
    clicks = rng.random(docs.size) < (1 / positions) * 0.6
    return docs, positions, clicks


def test_a_log_without_clicks_warns():
    with pytest.warns(IdentificationWarning, match="no clicks"):
        PositionBasedModel().fit(_log(["q"] * 4, [1, 2, 2, 1], [1, 2, 1, 2], [0, 0, 0, 0]))


@pytest.mark.parametrize("name, names", [("UserBrowsingModel", "gamma_"), ("DependentClickModel", "lambda_"),
                                         ("DynamicBayesianNetworkModel", "sigma_ and gamma_"),
                                         ("SimplifiedDBNModel", "sigma_")])
def test_a_cascade_model_on_a_log_without_clicks_warns(name, names):
    from counterfactual_ltr import click_models

    with pytest.warns(IdentificationWarning, match=f"{name}: the log has no clicks, so {names} .* not identified"):
        getattr(click_models, name)().fit(_log(["q"] * 4, [1, 2, 2, 1], [1, 2, 1, 2], [0, 0, 0, 0]))


def test_a_single_page_warns_that_theta_is_not_identified():
    with pytest.warns(IdentificationWarning, match="no \\(query, document\\) pair is shown at two positions"):
        PositionBasedModel().fit(_log(["q"] * 3, [1, 2, 3], [1, 2, 3], [1, 0, 1]))


def test_a_position_no_varied_pair_reaches_warns_by_name():
    docs, positions, clicks = _varied_log()
    # position 5 only ever shows document 9, never shown elsewhere
    pages = len(docs) // 4
    docs = np.c_[docs.reshape(pages, 4), np.full(pages, 9)].ravel()
    positions = np.c_[positions.reshape(pages, 4), np.full(pages, 5)].ravel()
    clicks = np.c_[clicks.reshape(pages, 4), np.zeros(pages, bool)].ravel()
    with pytest.warns(IdentificationWarning, match="positions 5 show no"):
        PositionBasedModel().fit(_log(["q"] * docs.size, docs, positions, clicks))


def test_a_varied_log_fits_without_identification_warnings():
    docs, positions, clicks = _varied_log()
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentificationWarning)
        PositionBasedModel().fit(_log(["q"] * docs.size, docs, positions, clicks))


@pytest.mark.parametrize("model", [PositionBasedModel(), DocumentOnlyModel()])
def test_held_out_ids_of_another_type_are_an_error_not_all_unseen(model):
    docs, positions, clicks = _varied_log(pages=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(_log([7] * docs.size, docs, positions, clicks))
    as_text = _log(["7"] * docs.size, [str(d) for d in docs], positions, clicks)
    with pytest.raises(ValueError, match="query ids are strings and the training log's are integers"):
        model.perplexity(as_text)
    same = _log([7] * docs.size, docs, positions, clicks)        # neighbour: same types score fine
    assert np.isfinite(model.perplexity(same))
    other_ids = _log([8] * docs.size, docs + 100, positions, clicks)   # unseen but of the same type: no error
    assert np.isfinite(model.perplexity(other_ids))


def test_rank_only_model_reads_no_ids_and_scores_any_log():
    docs, positions, clicks = _varied_log(pages=50)
    model = RankOnlyModel().fit(_log([7] * docs.size, docs, positions, clicks))
    assert np.isfinite(model.perplexity(_log(["7"] * docs.size, [str(d) for d in docs], positions, clicks)))


def test_the_prior_of_unseen_pairs_does_not_collapse_where_a_group_got_no_click():
    rng = np.random.default_rng(3)
    pages = 400
    # documents 0-3 shuffled over positions 1-4 (clicked), document 9 + page always at 5, never clicked
    docs = np.c_[np.array([rng.permutation(4) for _ in range(pages)]), np.full(pages, 9)].ravel()
    positions = np.tile(np.arange(1, 6), pages)
    clicks = (rng.random(docs.size) < 0.3 / positions) & (positions < 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = PositionBasedModel().fit(_log(["q"] * docs.size, docs, positions, clicks))
    assert model.prior_mean_[4] > 1e-3                    # EM's own prior mean there is 1e-10
    unseen = _log(["new"] * 5, [20, 21, 22, 23, 24], [1, 2, 3, 4, 5], [0, 0, 0, 0, 1])
    p = model._click_probability(unseen)
    assert np.all(p[:4] > 1e-3)
    # neighbour: a group with many clicked impressions barely moves
    assert model.prior_mean_[0] == pytest.approx(0.3, rel=0.35)
