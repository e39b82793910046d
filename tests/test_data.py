"""Ranking data: LETOR loading, RankingDataset validation, subsets, binarisation, synthetic generators."""

from __future__ import annotations

import re

import numpy as np
import pytest

from click_sim import load_letor, make_ranking, make_separable_ranking
from counterfactual_ltr import RankingDataset, binarize
from counterfactual_ltr.datasets import DEFAULT_RELEVANCE_THRESHOLD

from conftest import mq2008_dir, requires_mq2008


def _write(tmp_path, text, name="data.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- load_letor

LETOR_TEXT = """\
# a comment line before the data
2 qid:30 1:0.5 3:1.25 # doc a
0 qid:30 2:-1.0
1 qid:5 1:0.25 2:0.75 3:-0.5

0 qid:5 3:2
1 qid:12 2:4.5   # trailing comment
"""


def test_load_letor_values_and_query_order(tmp_path):
    data = load_letor(_write(tmp_path, LETOR_TEXT))
    expected_X = np.array([
        [0.5, 0.0, 1.25],
        [0.0, -1.0, 0.0],
        [0.25, 0.75, -0.5],
        [0.0, 0.0, 2.0],
        [0.0, 4.5, 0.0],
    ])
    np.testing.assert_array_equal(data.X, expected_X)
    assert data.X.dtype == np.float64
    np.testing.assert_array_equal(data.y, [2, 0, 1, 0, 1])
    assert data.y.dtype == np.int64
    # the file's query order (30, 5, 12) is kept, not sorted
    assert data.query_ids.tolist() == [30, 5, 12]
    assert data.qid.tolist() == [30, 30, 5, 5, 12]
    assert data.query_offsets.tolist() == [0, 2, 4, 5]
    assert data.n_queries == 3 and data.n_features == 3 and len(data) == 5


def test_load_letor_n_features(tmp_path):
    path = _write(tmp_path, LETOR_TEXT)
    data = load_letor(path, n_features=6, sparse=False)
    assert data.X.shape == (5, 6)
    np.testing.assert_array_equal(data.X[:, 3:], 0.0)
    np.testing.assert_array_equal(data.X[:, :3], load_letor(path).X)
    # three empty columns leave at most a third of the values non-zero: CSR by default
    assert load_letor(path, n_features=6).is_sparse
    # fewer columns than the file uses is an error, not a silent truncation
    with pytest.raises(ValueError):
        load_letor(path, n_features=2)


def _line_error(tmp_path, text):
    with pytest.raises(ValueError) as info:
        load_letor(_write(tmp_path, text))
    return str(info.value)


@pytest.mark.parametrize("text, line", [
    # bad token (no index:value form); line 3 because of the comment line
    ("1 qid:1 1:0.5\n# comment\n0 qid:1 foo 2:0.3\n", 3),
    # bad feature value
    ("1 qid:1 1:0.5\n0 qid:1 1:abc\n", 2),
    # bad label, after a blank line
    ("1 qid:1 1:0.5\n\nx qid:1 1:0.2\n", 3),
])
def test_load_letor_malformed_line_names_line(tmp_path, text, line):
    message = _line_error(tmp_path, text)
    assert re.search(rf"\bline {line}\b", message), message


def test_load_letor_missing_qid_names_line(tmp_path):
    message = _line_error(tmp_path, "1 qid:1 1:0.5\n0 qid:1 1:0.1\n# c\n0 1:0.3\n")
    assert re.search(r"\bline 4\b", message) and "qid" in message, message


def test_load_letor_non_contiguous_qids_names_line(tmp_path):
    # rows: qid 1, 2, 1 -> qid 1 reappears at data row 2 = file line 4 (a comment precedes it)
    message = _line_error(tmp_path, "1 qid:1 1:0.5\n# x\n0 qid:2 1:0.1\n0 qid:1 1:0.3\n")
    assert re.search(r"\bline 4\b", message), message
    assert "contiguous" in message


@pytest.mark.parametrize("text, line", [
    ("1 qid:1 1:0.5\n-1 qid:1 1:0.1\n", 2),
    ("1 qid:1 1:0.5\n# c\n0.5 qid:1 1:0.1\n", 3),
])
def test_load_letor_bad_labels_name_line(tmp_path, text, line):
    message = _line_error(tmp_path, text)
    assert re.search(rf"\bline {line}\b", message), message


def test_load_letor_empty_file(tmp_path):
    with pytest.raises(ValueError):
        load_letor(_write(tmp_path, "# only a comment\n"))


# ----------------------------------------------------------------------------- RankingDataset


def test_dataset_direct(tiny_data):
    data = tiny_data
    assert data.query_offsets.tolist() == [0, 3, 5, 9]
    assert data.query_ids.tolist() == [10, 4, 7]
    assert data.query_lengths.tolist() == [3, 2, 4]
    assert data.query_index.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    assert data.X.dtype == np.float64 and data.y.dtype == np.int64 and data.qid.dtype == np.int64


def test_dataset_accepts_sparse_and_integral_floats():
    import scipy.sparse as sp

    X = sp.csr_matrix(np.array([[0.0, 1.0], [2.0, 0.0]]))
    data = RankingDataset(X, np.array([1.0, 0.0]), np.array([3.0, 3.0]))
    assert data.is_sparse                                  # kept sparse (CSR), not densified
    np.testing.assert_array_equal(data.X.toarray(), [[0.0, 1.0], [2.0, 0.0]])
    assert data.y.tolist() == [1, 0] and data.y.dtype == np.int64


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_dataset_non_finite_feature_names_row_and_column(bad):
    X = np.zeros((5, 4))
    X[3, 2] = bad
    with pytest.raises(ValueError) as info:
        RankingDataset(X, np.zeros(5, int), [1, 1, 2, 2, 2])
    message = str(info.value)
    assert re.search(r"\brow 3\b", message) and re.search(r"\bcolumn 2\b", message), message


@pytest.mark.parametrize("y", [[0, 1, -1], [0, 1.5, 2], [0, np.nan, 1], ["a", "b", "c"]])
def test_dataset_rejects_bad_labels(y):
    with pytest.raises(ValueError):
        RankingDataset(np.zeros((3, 2)), y, [1, 1, 1])


@pytest.mark.parametrize("X, y, qid", [
    (np.zeros((3, 2)), [0, 1], [1, 1, 1]),
    (np.zeros((3, 2)), [0, 1, 1], [1, 1]),
    (np.zeros((3, 2)), [[0, 1, 1]], [1, 1, 1]),
    (np.zeros(3), [0, 1, 1], [1, 1, 1]),
    (np.zeros((0, 2)), [], []),
])
def test_dataset_rejects_mismatched_shapes(X, y, qid):
    with pytest.raises(ValueError):
        RankingDataset(X, y, qid)


def test_dataset_non_contiguous_qid_names_row():
    with pytest.raises(ValueError, match=r"row 4\b"):
        RankingDataset(np.zeros((5, 1)), np.zeros(5, int), [1, 1, 2, 2, 1])
    with pytest.raises(ValueError):
        RankingDataset(np.zeros((3, 1)), np.zeros(3, int), [1.0, 1.5, 2.0])


def test_subset_and_rows_of(tiny_data):
    data = tiny_data
    rows = data.rows_of([2, 0])
    assert rows.tolist() == [5, 6, 7, 8, 0, 1, 2]
    assert data.rows_of([1]).tolist() == [3, 4]
    sub = data.subset([2, 0])
    np.testing.assert_array_equal(sub.X, data.X[rows])
    np.testing.assert_array_equal(sub.y, data.y[rows])
    assert sub.query_ids.tolist() == [7, 10]
    assert sub.query_offsets.tolist() == [0, 4, 7]
    # the subset owns its features: editing it leaves the original untouched
    sub.X[0, 0] = -100.0
    assert data.X[5, 0] == 10.0
    mask = data.subset(np.array([False, True, True]))
    assert mask.query_ids.tolist() == [4, 7] and mask.n_docs == 6


@pytest.mark.parametrize("queries", [[], [3], [-1], np.array([True, False])])
def test_subset_bad_queries(tiny_data, queries):
    with pytest.raises(ValueError):
        tiny_data.subset(queries)


def test_subset_repeated_query_is_rejected(tiny_data):
    with pytest.raises(ValueError, match="repeat|duplicate|twice"):
        tiny_data.subset([0, 0])


def test_rows_of_boolean_mask(tiny_data):
    mask = np.array([True, False, True])
    try:
        rows = tiny_data.rows_of(mask)
    except ValueError:
        return  # rejecting masks is an acceptable fix too
    assert rows.tolist() == tiny_data.rows_of([0, 2]).tolist()


@pytest.mark.parametrize("queries", [[3], [-1]])
def test_rows_of_out_of_range(tiny_data, queries):
    with pytest.raises(ValueError, match="range"):
        tiny_data.rows_of(queries)


def test_binarize_default_threshold_is_one(tiny_data):
    assert DEFAULT_RELEVANCE_THRESHOLD == 1
    assert binarize([0, 1, 2, 3, 0]).tolist() == [0, 1, 1, 1, 0]
    assert binarize([0, 1, 2], threshold=2).tolist() == [0, 0, 1]
    assert binarize([0, 1, 2]).dtype == np.int64
    assert tiny_data.relevance().tolist() == [1, 0, 1, 0, 1, 0, 0, 1, 1]
    assert tiny_data.relevance(threshold=2).tolist() == [1, 0, 0, 0, 0, 0, 0, 1, 0]


# ----------------------------------------------------------------------------- synthetic generators


def _pairwise_min_gap(data, w, n_docs):
    """Smallest w.x_i - w.x_j over all pairs of one query with y_i > y_j (vectorised)."""
    s = (data.X @ w).reshape(data.n_queries, n_docs)
    y = data.y.reshape(data.n_queries, n_docs)
    gap = s[:, :, None] - s[:, None, :]
    better = y[:, :, None] > y[:, None, :]
    assert better.any()
    return gap[better].min()


@pytest.mark.parametrize("margin, n_levels", [(0.5, 5), (0.1, 3), (2.0, 2)])
def test_make_separable_ranking_margin(margin, n_levels):
    n_docs = 12
    data, w = make_separable_ranking(n_queries=80, n_docs=n_docs, n_features=7, n_levels=n_levels,
                                     margin=margin, random_state=1, return_ranker=True)
    assert data.n_queries == 80 and data.n_docs == 80 * n_docs and data.n_features == 7
    assert np.isclose(np.linalg.norm(w), 1.0)
    assert set(np.unique(data.y)) == set(range(n_levels))
    assert np.all(data.query_lengths == n_docs)
    gap = _pairwise_min_gap(data, w, n_docs)
    assert gap >= margin - 1e-9
    # the bound is the stated one, not a much looser one (80 queries give many close pairs)
    assert gap < 1.2 * margin


def test_make_separable_ranking_reproducible():
    a, wa = make_separable_ranking(30, n_docs=6, n_features=4, random_state=5, return_ranker=True)
    b, wb = make_separable_ranking(30, n_docs=6, n_features=4, random_state=5, return_ranker=True)
    c = make_separable_ranking(30, n_docs=6, n_features=4, random_state=6)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(wa, wb)
    assert not np.array_equal(a.X, c.X)


@pytest.mark.parametrize("kwargs", [dict(n_docs=1), dict(margin=0), dict(n_levels=1), dict(n_queries=0)])
def test_make_separable_ranking_bad_args(kwargs):
    with pytest.raises(ValueError):
        make_separable_ranking(**{"n_queries": 5, **kwargs})


def test_make_ranking_shapes_and_labels():
    data = make_ranking(n_queries=300, n_docs=(5, 40), n_features=8, random_state=0)
    lengths = data.query_lengths
    assert data.n_queries == 300 and data.n_features == 8
    assert lengths.min() >= 5 and lengths.max() <= 40
    assert len(np.unique(lengths)) > 10  # varying lengths
    assert set(np.unique(data.y)) == {0, 1, 2}
    rel_per_query = np.bincount(data.query_index, weights=data.relevance(), minlength=data.n_queries)
    assert np.any(rel_per_query == 0), "some queries should have no relevant document"
    assert np.any(rel_per_query > 0)
    shares = np.bincount(data.y, minlength=3) / data.n_docs
    np.testing.assert_allclose(shares, [0.65, 0.22, 0.13], atol=0.01)
    fixed = make_ranking(n_queries=10, n_docs=7, random_state=0)
    assert np.all(fixed.query_lengths == 7)


def test_make_ranking_reproducible():
    a, wa = make_ranking(n_queries=40, random_state=11, return_ranker=True)
    b, wb = make_ranking(n_queries=40, random_state=11, return_ranker=True)
    c = make_ranking(n_queries=40, random_state=12)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.qid, b.qid)
    np.testing.assert_array_equal(wa, wb)
    assert a.n_docs != c.n_docs or not np.array_equal(a.X, c.X)


def test_make_ranking_latent_model_is_informative():
    """Without noise the labels are monotone in w*.x + query shift; w*.x alone correlates strongly."""
    data, w = make_ranking(n_queries=200, noise=0.0, random_state=2, return_ranker=True)
    assert np.isclose(np.linalg.norm(w), 1.0)
    assert np.corrcoef(data.X @ w, data.y)[0, 1] > 0.5


@pytest.mark.parametrize("kwargs", [dict(n_docs=(10, 5)), dict(noise=-1), dict(level_shares=(0.5, 0.5)),
                                    dict(n_docs=0)])
def test_make_ranking_bad_args(kwargs):
    with pytest.raises(ValueError):
        make_ranking(**{"n_queries": 5, **kwargs})


# ----------------------------------------------------------------------------- MQ2008


@requires_mq2008
def test_mq2008_fold1_train_shape(mq2008_fold1_train):
    data = mq2008_fold1_train
    assert data.X.shape == (9630, 46)
    assert data.n_queries == 471
    assert set(np.unique(data.y)) == {0, 1, 2}
    assert np.all(np.isfinite(data.X))


@requires_mq2008
def test_mq2008_fold1_train_is_s1_s2_s3(mq2008_fold1_train):
    """LETOR's Fold1 training set is the concatenation of the subsets S1, S2, S3."""
    parts = [load_letor(mq2008_dir() / f"S{i}.txt", n_features=46) for i in (1, 2, 3)]
    np.testing.assert_array_equal(np.concatenate([p.X for p in parts]), mq2008_fold1_train.X)
    np.testing.assert_array_equal(np.concatenate([p.y for p in parts]), mq2008_fold1_train.y)
    np.testing.assert_array_equal(np.concatenate([p.query_ids for p in parts]), mq2008_fold1_train.query_ids)
