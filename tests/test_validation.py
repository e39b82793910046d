"""Scalar hyper-parameter checks and the trust-bias propensity interface."""

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from counterfactual_ltr._validation import check_int, check_probability, check_real
from counterfactual_ltr.propensity import (PositionBasedPropensity, TrustBiasPropensity, affine_parts,
                                           is_affine)


@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**20, 10**20),
                 st.text(max_size=5), st.booleans(), st.none()))
def test_check_real_clear_error_or_finite_in_range(value):
    try:
        out = check_real(value, "tol", min_value=0, include_min=False)
    except TypeError as err:
        assert "tol" in str(err)
        assert isinstance(value, (str, bool)) or value is None
    except ValueError as err:
        assert "tol" in str(err)
        assert not (math.isfinite(value) and value > 0)
    else:
        assert math.isfinite(out) and out > 0


@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32), st.integers(-5, 10**6)))
def test_check_int_never_truncates(value):
    try:
        out = check_int(value, "n_passes", min_value=1)
    except ValueError as err:
        assert "n_passes" in str(err)
        assert not (math.isfinite(value) and value == int(value) and value >= 1)
    else:
        assert out == value and isinstance(out, int)


def test_checks_reject_wrong_types_and_accept_numpy_scalars():
    with pytest.raises(TypeError, match="C"):
        check_real("10", "C")
    with pytest.raises(TypeError, match="n_passes"):
        check_int(True, "n_passes")
    with pytest.raises(TypeError, match="T"):
        check_int(np.array([1, 2]), "T")
    assert check_int(np.int64(4), "T") == 4 and check_real(np.float32(0.5), "eta") == 0.5
    assert check_int(np.array(3.0), "T") == 3
    with pytest.raises(ValueError, match="eps"):
        check_probability(1.5, "eps")


def test_trust_bias_parts_match_the_click_probability_and_reduce_to_ipw():
    theta, plus, minus = [1.0, 0.6, 0.3], [0.95, 0.9, 0.8], [0.3, 0.2, 0.1]
    model = TrustBiasPropensity(theta, eps_plus=plus, eps_minus=minus)
    r = np.array([1, 2, 3, 7])
    alpha, beta = affine_parts(model, r)
    t, p, m = (np.array(v)[np.minimum(r, 3) - 1] for v in (theta, plus, minus))
    # P(click | relevant) = alpha + beta, P(click | irrelevant) = beta
    np.testing.assert_allclose(alpha + beta, t * p)
    np.testing.assert_allclose(beta, t * m)
    q, zero = affine_parts(PositionBasedPropensity(1.0), r)
    np.testing.assert_allclose(q, 1.0 / r)
    assert not zero.any() and is_affine(model) and not is_affine(PositionBasedPropensity(1.0))


def test_trust_bias_rejects_bad_values_and_plain_ipw_use(tiny_data):
    with pytest.raises(ValueError, match="eps_plus must exceed eps_minus"):
        TrustBiasPropensity([1.0, 0.5], eps_plus=0.5, eps_minus=[0.1, 0.6])
    with pytest.raises(ValueError, match="examination"):
        TrustBiasPropensity([1.0, 0.0])
    from counterfactual_ltr import ClickLog

    log = ClickLog(tiny_data, [0], [0, 3], [0, 1, 2], [1, 0, 0])
    with pytest.raises(ValueError, match="trust-bias"):
        log.propensities(TrustBiasPropensity([1.0, 0.5], 0.9, 0.1))
