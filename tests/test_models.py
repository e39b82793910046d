"""Scoring models (LinearModel, MLP) and Adam: back-propagation against finite differences, and behaviour."""

import pickle

import numpy as np
import pytest

from counterfactual_ltr.models import ACTIVATIONS, MLP, Adam, LinearModel


def _numeric_grads(model, loss_fn, X, h=1e-6):
    """Central differences of ``loss_fn(model.forward(X))`` for every parameter entry."""
    grads = []
    for p in model.params:
        g = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + h
            up = loss_fn(model.forward(X))[0]
            p[idx] = old - h
            down = loss_fn(model.forward(X))[0]
            p[idx] = old
            g[idx] = (up - down) / (2 * h)
        grads.append(g)
    return grads


def _smooth_loss(c):
    """A smooth non-linear loss of the scores and its gradient."""
    def loss(s):
        return float(c @ s + 0.5 * np.sum(np.sin(s) ** 2)), c + np.sin(s) * np.cos(s)
    return loss


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("hidden", [(5,), (4, 3)])
def test_mlp_backward_matches_finite_differences(activation, hidden):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((7, 3))
    net = MLP(hidden, activation, random_state=2).initialize(3)
    for k in range(1, len(net.params), 2):  # non-zero biases so every path is exercised
        net.params[k][:] = rng.standard_normal(net.params[k].shape) * 0.3
    loss = _smooth_loss(rng.standard_normal(7))
    _, g_scores = loss(net.forward(X))
    analytic = net.backward(g_scores)
    numeric = _numeric_grads(net, loss, X)
    assert [a.shape for a in analytic] == [p.shape for p in net.params]
    for a, n in zip(analytic, numeric):
        np.testing.assert_allclose(a, n, rtol=1e-6, atol=1e-8)


def test_linear_model_backward_and_equivalence_with_empty_mlp():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 4))
    lin = LinearModel(n_features=4, init="normal", init_scale=1.0, random_state=0)
    lin.params[1][:] = 0.7
    loss = _smooth_loss(rng.standard_normal(6))
    _, g = loss(lin.forward(X))
    for a, n in zip(lin.backward(g), _numeric_grads(lin, loss, X)):
        np.testing.assert_allclose(a, n, rtol=1e-6, atol=1e-8)
    net = MLP((), "identity").initialize(4)
    net.set_parameters(lin.get_parameters())
    np.testing.assert_allclose(net.forward(X), lin.forward(X), rtol=0, atol=1e-14)
    for a, b in zip(net.backward(g), lin.backward(g)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)


@pytest.mark.parametrize("model", [MLP((4,), "tanh", random_state=0).initialize(3), LinearModel(3)])
def test_weight_decay_gradient(model):
    rng = np.random.default_rng(3)
    for p in model.params:
        p[...] = rng.standard_normal(p.shape)
    alpha = 0.37
    penalty, grads = model.weight_decay(alpha)
    weights = [p for p in model.params if p.ndim == 2]
    assert penalty == pytest.approx(0.5 * alpha * sum(np.sum(w * w) for w in weights))
    h = 1e-6
    for p, g in zip(model.params, grads):
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + h
            up = model.weight_decay(alpha)[0]
            p[idx] = old - h
            down = model.weight_decay(alpha)[0]
            p[idx] = old
            assert g[idx] == pytest.approx((up - down) / (2 * h), rel=1e-6, abs=1e-9)
    for p, g in zip(model.params, grads):  # biases are not decayed
        if p.ndim == 1:
            assert not g.any()


def test_initialisation_is_seeded_and_glorot():
    a = MLP((50,), "sigmoid", random_state=5).initialize(10)
    b = MLP((50,), "sigmoid", random_state=5).initialize(10)
    c = MLP((50,), "sigmoid", random_state=6).initialize(10)
    assert all(np.array_equal(p, q) for p, q in zip(a.params, b.params))
    assert not np.array_equal(a.params[0], c.params[0])
    assert np.abs(a.params[0]).max() <= np.sqrt(2 / 60)
    assert [p.dtype for p in a.params] == [np.float64] * 4
    assert not a.params[1].any()


def test_float32_and_pickle():
    X = np.random.default_rng(0).standard_normal((5, 3))
    net = MLP((4,), "relu", random_state=0, dtype=np.float32).initialize(3)
    s = net.forward(X)
    assert s.dtype == np.float32 and [p.dtype for p in net.params] == [np.float32] * 4
    clone = pickle.loads(pickle.dumps(net))
    assert clone._cache is None
    np.testing.assert_array_equal(clone.predict(X), net.predict(X))


def test_model_errors():
    with pytest.raises(ValueError, match="activation"):
        MLP((3,), "softsign")
    with pytest.raises(ValueError, match="hidden_layer_sizes"):
        MLP((3, 0))
    net = MLP((3,))
    with pytest.raises(RuntimeError, match="initialize"):
        net.forward(np.zeros((2, 2)))
    net.initialize(2)
    with pytest.raises(RuntimeError, match="forward"):
        net.backward(np.zeros(2))
    with pytest.raises(ValueError, match="shape"):
        net.forward(np.zeros((2, 3)))
    net.forward(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="grad_scores"):
        net.backward(np.zeros(3))
    with pytest.raises(ValueError, match="shape"):
        net.set_parameters([np.zeros((3, 3))] + net.params[1:])
    with pytest.raises(ValueError, match="learning_rate"):
        Adam(net.params, learning_rate=0.0)
    with pytest.raises(ValueError, match="learning_rate"):
        Adam(net.params, learning_rate=np.nan)


def test_adam_matches_reference_and_minimises():
    # Two steps by hand: m_t, v_t with bias correction.
    p = [np.array([1.0, -1.0])]
    opt = Adam(p, learning_rate=0.1, beta1=0.9, beta2=0.999, epsilon=1e-8)
    g1, g2 = np.array([0.5, -2.0]), np.array([1.0, 1.0])
    ref = np.array([1.0, -1.0])
    m = v = np.zeros(2)
    for t, g in enumerate((g1, g2), start=1):
        opt.step([g])
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        ref = ref - 0.1 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8 / np.sqrt(1 - 0.999**t))
    np.testing.assert_allclose(p[0], ref, rtol=1e-12)
    # Minimises a quadratic.
    q = [np.array([3.0, -4.0])]
    opt = Adam(q, learning_rate=0.05)
    for _ in range(2000):
        opt.step([2 * q[0]])
    assert np.abs(q[0]).max() < 1e-2
