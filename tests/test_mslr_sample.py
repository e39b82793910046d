"""The MSLR-WEB10K sample that the learner-choice benchmark measures on: fetched, checked, log-scaled."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import _mslr


@pytest.fixture(scope="module")
def sample():
    try:
        return _mslr.load_mslr_sample(timeout=30)
    except OSError as err:
        pytest.skip(f"the MSLR sample could not be fetched from PyPI ({err})")


def test_the_sample_is_mslr_fold1s_first_rows(sample):
    train, test = sample
    for data in (train, test):
        assert data.n_queries == 43 and data.X.shape == (5000, 136)
        assert np.isfinite(data.X).all() and set(np.unique(data.y)) == {0, 1, 2, 3, 4}
    assert np.abs(train.X).max() < 20         # log-scaled: raw values reach 2e8


def test_log_scale_is_monotone_and_odd():
    x = np.array([-1e8, -3.0, -0.5, 0.0, 0.5, 3.0, 1e8])
    y = _mslr.log_scale(x)
    assert np.all(np.diff(y) > 0) and np.allclose(y, -_mslr.log_scale(-x)) and y[3] == 0
    np.testing.assert_allclose(y[4:], np.log1p(x[4:]))


def test_a_wrong_checksum_is_refused(tmp_path, monkeypatch):
    class Response:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self):
            return b"not the archive"

    monkeypatch.setenv("CLTR_CACHE", str(tmp_path))
    monkeypatch.setattr(_mslr.urllib.request, "urlopen", lambda url, timeout: Response())
    with pytest.raises(OSError, match="SHA-256"):
        _mslr.mslr_sample_files()
    assert not (tmp_path / "mslr-sample").exists()
