"""The validation report a person acts on: read top down, the same content in HTML, Markdown and JSON, the
numbers of compare_rankers, warnings where they apply, figures that fit a 1,200 px window; cltr evaluate."""

from __future__ import annotations

import base64
import io
import json
import re
import warnings

import numpy as np
import pytest

from click_sim import PositionBasedClickModel, StochasticRanker, make_ranking, simulate_clicks
from counterfactual_ltr.cli import main
from counterfactual_ltr.estimators import SVMPropDCG
from counterfactual_ltr.evaluation import compare_rankers, validation_report

pytestmark = pytest.mark.filterwarnings("ignore::counterfactual_ltr.evaluation.EstimateWarning")


@pytest.fixture(scope="module")
def setting():
    data = make_ranking(n_queries=60, n_docs=(5, 12), random_state=5)
    rng = np.random.default_rng(6)
    logger = data.X[:, 0] + 0.5 * rng.standard_normal(data.n_docs)
    clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    log = simulate_clicks(data, logger, clicks, n_passes=10, random_state=5)
    rankers = {"good": data.X @ np.linspace(1.0, 0.2, data.n_features), "other": data.X[:, 1],
               "tied": np.zeros(data.n_docs)}
    relevance = np.where(data.relevance() == 1, 1.0, 0.1)
    return data, logger, clicks, log, rankers, relevance


@pytest.fixture(scope="module")
def report(setting):
    _, _, _, log, rankers, relevance = setting
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return validation_report(rankers, log, true_relevance=relevance, random_state=0, pair_bootstrap=500)


def _strings(value):
    """Every string inside a nested structure of dicts, lists and tuples."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def test_the_page_reads_top_down(report):
    page = report.to_html()
    order = ["<h1>Offline evaluation: 3 candidates against the logging policy</h1>", "Log: 600 sessions",
             "Propensity model:", "Logging policy:", "<strong>Warnings</strong>", "<h2>dcg (higher is better)</h2>",
             "logging policy (baseline)", ">good<", "data:image/png;base64,", "<h2>avg_rank (lower is better)</h2>",
             "How to read the verdict tables", "<h2>Details</h2>", "Paired differences, dcg", "Every estimator, dcg",
             "<h2>Notes</h2>"]
    places = [page.find(marker) for marker in order]
    assert all(p >= 0 for p in places), [m for m, p in zip(order, places) if p < 0]
    assert places == sorted(places)
    # In each verdict table the logging policy is the first row.
    section = page[page.find("<h2>dcg"):page.find("<h2>avg_rank")]
    rows = re.findall(r"<tr[^>]*><td[^>]*>([^<]*)</td>", section)
    assert rows[:4] == ["logging policy (baseline)", "good", "other", "tied (see warnings)"]


def test_markdown_and_json_carry_the_same_content(report):
    content = report.content()
    md = report.to_markdown()
    page = report.to_html()
    data = json.loads(json.dumps(report.to_dict()))
    for text in _strings(content):
        escaped = text.replace("|", "\\|")
        assert text in md or escaped in md, text
        assert json.dumps(text)[1:-1] in json.dumps(data), text
        assert _html_escape(text) in page, text
    assert data["comparisons"]["dcg"]["good"]["difference"] == report.comparisons["dcg"][0].difference
    assert data["rankers"]["good"]["dcg"]["snips"]["value"] == report.rows[0]["dcg"]["snips"].value


def _html_escape(text):
    import html

    return html.escape(text)


def test_verdicts_are_compare_rankers(setting, report):
    _, _, _, log, rankers, _ = setting
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = compare_rankers(log, rankers, "logging", random_state=0, n_bootstrap=500)
    for c in report.comparisons["dcg"]:
        d = direct[c.candidate]
        assert (c.difference, c.ci_low, c.ci_high, c.p_value, c.lower_bound) == \
            (d.difference, d.ci_low, d.ci_high, d.p_value, d.lower_bound)
        assert c.boot_low == pytest.approx(d.boot_low) and c.n_comparisons == 3
    table = report.content()["metrics"][0]["rows"]
    assert table[1][0] == "good" and table[1][2] == f"{report.comparisons['dcg'][0].difference:+.4f}"
    assert report.verdict_lines()[0] == report.comparisons["dcg"][0].summary()


def test_warnings_where_they_apply(setting, report):
    data, logger, clicks, _, rankers, _ = setting
    content = report.content()
    assert any(w.startswith("tied: ranks every document equal") for w in content["warnings"])
    details = content["metrics"][0]["estimates_rows"]     # and in the detailed table's warnings cells
    assert all(row[-1].startswith("ranks every document equal") for row in details if row[0] == "tied")
    assert not any(row[-1].startswith("ranks every document equal") for row in details if row[0] == "good")
    assert any(n.startswith("DR equals IPS for every ranker here: the logger is deterministic") for n in
               content["notes"])
    assert report.propensity_source.startswith("the default (eta = 1)")
    # A stochastic logger showing its top 5: DR differs from IPS, and the report does not say otherwise.
    top5 = simulate_clicks(data, StochasticRanker(logger, temperature=1.0), clicks, n_passes=10, random_state=1,
                           max_shown=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = validation_report({"good": rankers["good"]}, top5, metrics=("dcg",), random_state=0,
                                  pair_bootstrap=0, n_bootstrap=0)
    assert not any("DR equals IPS" in n for n in other.notes)
    assert "sessions show at most 5 documents" in other.logger and "vary between sessions" in other.logger


def test_average_rank_is_compared_on_relevance_where_its_clicks_cannot_tell(report):
    """m(r) alpha_r = r / r: the expected sum of the ranks of the clicks is the same for every ranking."""
    assert report.comparisons["dcg"][0].value == "clicks"
    assert report.comparisons["avg_rank"][0].value == "relevance"
    section = report.content()["metrics"][1]
    assert "is the same for every ranking" in section["compared"]
    good = report.comparisons["avg_rank"][0]
    assert good.baseline_estimate.estimator == "logged_snips" and good.higher_is_better is False


def test_figures_fit_a_1200_pixel_window(report):
    from PIL import Image

    page = report.to_html()
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert len(images) == 2
    for data in images:
        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            assert image.width <= 1150
    assert "max-width:1150px" in page and "img{max-width:100%" in page


def test_a_ranker_baseline_and_no_baseline(setting):
    _, _, _, log, rankers, _ = setting
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        against = validation_report(rankers, log, metrics=("dcg",), baseline="other", pair_bootstrap=0,
                                    n_bootstrap=0)
        none = validation_report(rankers, log, metrics=("dcg",), baseline=None, n_bootstrap=0)
    assert [c.candidate for c in against.comparisons["dcg"]] == ["good", "tied"]
    assert against.comparisons["dcg"][0].value == "relevance"
    assert against.content()["metrics"][0]["rows"][0][0] == "other (baseline)"
    assert none.comparisons == {} and "rows" not in none.content()["metrics"][0]
    assert none.to_markdown().startswith("# Offline evaluation of 3 rankers")
    with pytest.raises(ValueError, match="baseline must be"):
        validation_report(rankers, log, baseline="nobody")
    with pytest.raises(ValueError, match="verdict_estimator"):
        validation_report(rankers, log, verdict_estimator="magic")


def test_a_single_query_is_named_and_pair_bootstrap_by_its_own_name(setting):
    data, _, _, log, _, _ = setting
    one = log[np.flatnonzero(log.session_query == log.session_query[0])]
    with pytest.raises(ValueError, match=r"validation_report: the log has a single query \(\d+\): a comparison's "
                                         r"interval is over queries .* or baseline=None"):
        validation_report({"f0": data.X[:, 0]}, one, estimators=("ips",), n_bootstrap=0, pair_bootstrap=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = validation_report({"f0": data.X[:, 0]}, one, estimators=("ips",), n_bootstrap=0, baseline=None)
    assert alone.comparisons == {}
    with pytest.raises(ValueError, match=r"^pair_bootstrap=20 is too few resamples"):
        validation_report({"f0": data.X[:, 0]}, log, estimators=("ips",), metrics=("dcg",), n_bootstrap=0,
                          pair_bootstrap=20)


def test_the_propensity_and_where_it_came_from(setting):
    _, _, _, log, _, _ = setting
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SVMPropDCG(C=1.0, propensity=0.8).fit(log)
        own = validation_report({"m": model}, log, metrics=("dcg",), pair_bootstrap=0, n_bootstrap=0)
        given = validation_report({"m": model}, log, metrics=("dcg",), propensity=1.5, pair_bootstrap=0,
                                  n_bootstrap=0)
    assert own.propensity == "PositionBasedPropensity(eta=0.8)" and "trained under" in own.propensity_source
    assert given.propensity == "PositionBasedPropensity(eta=1.5)" and given.propensity_source == "given"


# ----------------------------------------------------------------------------- cltr evaluate


@pytest.fixture(scope="module")
def files(tmp_path_factory, setting):
    from sklearn.datasets import dump_svmlight_file

    from counterfactual_ltr.estimators import RankSVM, SVMPropRank
    from counterfactual_ltr.persistence import save_model

    data, logger, clicks, log, _, _ = setting
    folder = tmp_path_factory.mktemp("evaluate")
    dump_svmlight_file(data.X, data.y, str(folder / "data.txt"), query_id=data.qid, zero_based=False)
    log.to_parquet(folder / "log.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_model(SVMPropRank(C=1.0).fit(log), folder / "model_a.npz")
        save_model(RankSVM(C=1.0).fit(log), folder / "model_b.npz")
    return folder


def test_cltr_evaluate_prints_the_verdicts(files, monkeypatch, capsys):
    monkeypatch.chdir(files)
    assert main(["evaluate", "model_a.npz", "model_b.npz", "log.parquet", "data.txt", "--baseline", "logging",
                 "-o", "report.html"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "wrote report.html: Offline evaluation: 2 candidates against the logging policy"
    verdicts = [line.strip() for line in out[1:]]
    assert len(verdicts) == 4   # two models, two metrics
    assert verdicts[0].startswith("model_a vs logging policy, dcg of clicks (SNIPS): ")
    assert verdicts[1].startswith("model_b vs logging policy, dcg of clicks (SNIPS): ")
    assert all(("lower bound" in v and ("better" in v or "worse" in v or "no difference found" in v))
               for v in verdicts)
    page = (files / "report.html").read_text()
    assert "logging policy (baseline)" in page and "Bonferroni" in page


def test_cltr_evaluate_against_a_model_and_bad_baselines(files, monkeypatch, capsys):
    monkeypatch.chdir(files)
    assert main(["evaluate", "model_a.npz", "model_b.npz", "log.parquet", "data.txt", "--baseline", "model_b",
                 "--metrics", "dcg", "--estimator", "ips", "-o", "r.json", "-q"]) == 0
    payload = json.loads((files / "r.json").read_text())
    assert payload["baseline"] == "model_b" and list(payload["comparisons"]["dcg"]) == ["model_a"]
    assert payload["comparisons"]["dcg"]["model_a"]["value"] == "relevance"
    assert payload["propensity_source"] == "the one the rankers were trained under"
    capsys.readouterr()
    assert main(["evaluate", "model_a.npz", "log.parquet", "data.txt", "--baseline", "model_c", "-o", "r.md"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model_c" in err[0] and "logging" in err[0]


def test_figures_is_a_boolean(report):
    with pytest.raises(ValueError, match="figures must be True or False, got str 'no'"):
        report.to_html(figures="no")
