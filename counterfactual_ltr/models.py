"""Differentiable scoring functions (NumPy only) and the Adam optimiser.

A *model* maps a feature matrix ``X`` (n_docs, n_features) to one score per
row. It holds its parameters as a list of NumPy arrays (``model.params``,
float64 by default) and does the two passes of back-propagation:

* ``forward(X) -> scores`` (shape ``(n_docs,)``), caching what the backward
  pass needs;
* ``backward(grad_scores) -> grads``: the gradients, one array per entry of
  ``params`` and of the same shape, of ``sum_i grad_scores[i] * scores[i]``,
  i.e. the chain rule from ``d loss / d scores`` (given by a surrogate such as
  :func:`counterfactual_ltr.surrogates.lambda_hinge_bound`) to the parameters.

``predict(X)`` scores without caching. Regularisation is not part of the
models: :meth:`MLP.weight_decay` returns the L2 penalty
``alpha / 2 * sum ||W||^2`` over the weight matrices (biases are not
penalised) and its gradient, for the estimator to add.

:class:`Adam` updates a parameter list in place. (The toolkit's design puts
the stochastic optimisers in :mod:`counterfactual_ltr.solvers`; Adam lives
here for now.)

Examples
--------
>>> import numpy as np
>>> X = np.random.default_rng(0).standard_normal((5, 3))
>>> net = MLP(hidden_layer_sizes=(4,), activation="tanh", random_state=0).initialize(3)
>>> scores = net.forward(X)
>>> grads = net.backward(np.ones(5))          # d(sum of scores) / d params
>>> [g.shape for g in grads] == [p.shape for p in net.params]
True
>>> opt = Adam(net.params, learning_rate=1e-2)
>>> opt.step(grads)                            # one descent step on the sum of scores
>>> bool(net.predict(X).sum() < scores.sum())
True
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from ._docs import common_doc
from ._validation import check_bool, check_int, check_real

__all__ = ["LinearModel", "MLP", "Adam", "ACTIVATIONS"]


# ----------------------------------------------------------------------------- activations
# Each activation is (function, derivative expressed through the activation's *output*).

def _identity(z):
    return z


def _identity_grad(a):
    return np.ones_like(a)


def _sigmoid(z):
    return expit(z)  # numerically stable for large |z|


def _sigmoid_grad(a):
    return a * (1.0 - a)


def _tanh(z):
    return np.tanh(z)


def _tanh_grad(a):
    return 1.0 - a * a


def _relu(z):
    return np.maximum(z, 0.0)


def _relu_grad(a):
    # a > 0 iff z > 0; the subgradient at 0 is taken as 0.
    return (a > 0).astype(a.dtype)


#: name -> (activation, derivative from the output)
ACTIVATIONS = {
    "identity": (_identity, _identity_grad),
    "sigmoid": (_sigmoid, _sigmoid_grad),
    "tanh": (_tanh, _tanh_grad),
    "relu": (_relu, _relu_grad),
}
_ALIASES = {"logistic": "sigmoid", "linear": "identity"}


def _check_float_dtype(dtype, name: str = "dtype") -> np.dtype:
    """``dtype`` as float32 or float64: parameters, scores and gradients are floating point."""
    try:
        checked = np.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"{name} must be a NumPy floating dtype (float32 or float64), got {dtype!r}: {err}") from None
    if checked not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"{name} must be float32 or float64 (parameters, scores and gradients are floating point), "
                         f"got {checked}")
    return checked


def _check_activation(activation) -> str:
    if not isinstance(activation, str):
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    name = _ALIASES.get(activation, activation)
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    return name


def _rng(random_state) -> np.random.Generator:
    """A Generator from ``random_state`` (None, int >= 0, Generator, RandomState), or a TypeError naming it."""
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    if isinstance(random_state, (bool, np.bool_, float, str, bytes)):
        # default_rng would take a bool as 0/1 and fail on the others without naming the parameter.
        raise TypeError(f"random_state must be None, an int >= 0, a Generator or a RandomState, "
                        f"got {type(random_state).__name__} {random_state!r}")
    try:
        return np.random.default_rng(random_state)
    except (TypeError, ValueError) as err:
        kind = ValueError if isinstance(random_state, (int, np.integer)) else TypeError  # e.g. a negative seed
        raise kind(f"random_state must be None, an int >= 0, a Generator or a RandomState, "
                   f"got {type(random_state).__name__} {random_state!r} ({err})") from None


class _Model:
    """Shared plumbing: input checks, prediction, weight decay, parameter copies.

    Subclasses implement :meth:`initialize`, :meth:`forward` and :meth:`backward`, documented here.
    """

    params: list | None = None
    dtype = np.float64

    @property
    def n_features(self) -> int:
        self._check_initialized()
        return self.params[0].shape[0]

    @property
    def n_params(self) -> int:
        self._check_initialized()
        return int(sum(p.size for p in self.params))

    def initialize(self, n_features: int):
        """Draw fresh parameters for ``n_features`` inputs; returns ``self``.

        Parameters
        ----------
        n_features : int >= 1
            Number of input features.

        Returns
        -------
        self
        """
        raise NotImplementedError

    @common_doc
    def forward(self, X) -> np.ndarray:
        """Scores of the rows of ``X``, keeping what :meth:`backward` needs.

        {feature_rows_scores}
        """
        raise NotImplementedError

    def backward(self, grad_scores) -> list:
        """Gradient of a loss with respect to every parameter, from its gradient with respect to the scores.

        Chain rule through the last :meth:`forward` pass.

        Parameters
        ----------
        grad_scores : array of shape (n_docs,)
            ``d loss / d scores`` of the rows of the last forward pass.

        Returns
        -------
        list of arrays
            One gradient per parameter, shaped as :attr:`params`.
        """
        raise NotImplementedError

    def _check_initialized(self):
        if self.params is None:
            raise RuntimeError(f"{type(self).__name__} has no parameters yet: call initialize(n_features)")

    def _check_X(self, X) -> np.ndarray:
        self._check_initialized()
        X = np.asarray(X, dtype=self.dtype)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X has shape {X.shape}, expected (n_docs, {self.n_features})")
        return X

    def _weight_flags(self) -> list:
        """True for the parameters weight decay applies to (weight matrices)."""
        return [p.ndim == 2 for p in self.params]

    def weight_decay(self, alpha: float):
        """L2 penalty ``alpha / 2 * sum ||W||^2`` over the weight matrices, and its gradient per parameter.

        Parameters
        ----------
        alpha : float >= 0
            Strength of the penalty.

        Returns
        -------
        penalty : float
        grads : list of arrays
            One per parameter (zeros for the biases).
        """
        self._check_initialized()
        penalty = 0.0
        grads = []
        for p, is_weight in zip(self.params, self._weight_flags()):
            if is_weight and alpha:
                penalty += 0.5 * alpha * float(np.sum(p * p))
                grads.append(alpha * p)
            else:
                grads.append(np.zeros_like(p))
        return penalty, grads

    @common_doc
    def predict(self, X) -> np.ndarray:
        """Scores of the rows of ``X`` (no cache kept).

        {feature_rows_scores}
        """
        scores = self.forward(X)
        self.clear_cache()
        return scores

    def clear_cache(self):
        """Drop what ``forward`` cached (saves memory before pickling)."""
        self._cache = None

    def get_parameters(self) -> list:
        """A copy of the parameter list."""
        self._check_initialized()
        return [p.copy() for p in self.params]

    def set_parameters(self, params) -> None:
        """Copy ``params`` (same shapes) into the model's parameters, in place.

        Parameters
        ----------
        params : list of arrays
            New values, shaped as :attr:`params`.
        """
        self._check_initialized()
        if len(params) != len(self.params):
            raise ValueError(f"expected {len(self.params)} parameter arrays, got {len(params)}")
        for p, new in zip(self.params, params):
            if np.shape(new) != p.shape:
                raise ValueError(f"parameter shape {np.shape(new)} does not match {p.shape}")
            p[...] = new

    def all_finite(self) -> bool:
        """Whether every parameter is finite."""
        return self.params is not None and all(bool(np.all(np.isfinite(p))) for p in self.params)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_cache"] = None
        return state


class LinearModel(_Model):
    """Linear scoring function ``s = X @ w + b``.

    Parameters are ``[w (n_features, 1), b (1,)]``; ``w`` starts at zero
    (``init="zeros"``) or small Gaussian values (``init="normal"``, scale
    ``init_scale``). The intercept does not change rankings; its gradient is
    ``sum(grad_scores)`` (0 for pairwise losses).

    Parameters
    ----------
    n_features : int, optional
        Initialise at once for this many features.
    fit_intercept : bool, default True
        Add the intercept ``b`` to the scores.
    init : {"zeros", "normal"}, default "zeros"
        Initial weights: zeros, or Gaussian of scale ``init_scale``.
    init_scale : float, default 0.01
        Standard deviation of the ``"normal"`` initialisation.
    random_state : int, Generator or None
        Seeds the ``"normal"`` initialisation.
    dtype : {float64, float32}, default float64
        Dtype of the parameters and of the computation.

    Examples
    --------
    >>> import numpy as np
    >>> m = LinearModel(n_features=2)
    >>> m.set_parameters([np.array([[1.0], [2.0]]), np.array([0.5])])
    >>> m.forward(np.array([[1.0, 1.0]])).tolist()
    [3.5]
    >>> [g.ravel().tolist() for g in m.backward(np.array([2.0]))]
    [[2.0, 2.0], [2.0]]
    """

    def __init__(self, n_features: int | None = None, *, fit_intercept: bool = True, init: str = "zeros",
                 init_scale: float = 0.01, random_state=None, dtype=np.float64):
        if init not in ("zeros", "normal"):
            raise ValueError(f"init must be 'zeros' or 'normal', got {init!r}")
        self.fit_intercept = check_bool(fit_intercept, "fit_intercept")
        self.init = init
        self.init_scale = init_scale
        self.random_state = random_state
        self.dtype = _check_float_dtype(dtype)
        self.params = None
        self._cache = None
        if n_features is not None:
            self.initialize(n_features)

    def initialize(self, n_features: int) -> "LinearModel":
        n_features = int(n_features)
        if n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        if self.init == "zeros":
            w = np.zeros((n_features, 1), dtype=self.dtype)
        else:
            w = (self.init_scale * _rng(self.random_state).standard_normal((n_features, 1))).astype(self.dtype)
        self.params = [w, np.zeros(1, dtype=self.dtype)]
        self._cache = None
        return self

    def _weight_flags(self):
        return [True, False]

    def forward(self, X) -> np.ndarray:
        X = self._check_X(X)
        self._cache = X
        s = X @ self.params[0][:, 0]
        if self.fit_intercept:
            s = s + self.params[1][0]
        return s

    def backward(self, grad_scores) -> list:
        X = self._cache
        if X is None:
            raise RuntimeError("backward needs a forward pass first")
        g = np.asarray(grad_scores, dtype=self.dtype)
        if g.shape != (X.shape[0],):
            raise ValueError(f"grad_scores has shape {g.shape}, expected ({X.shape[0]},)")
        gw = (X.T @ g)[:, None]
        gb = np.array([g.sum()], dtype=self.dtype) if self.fit_intercept else np.zeros(1, dtype=self.dtype)
        return [gw, gb]

    @property
    def coef_(self) -> np.ndarray:
        return self.params[0][:, 0]

    def __repr__(self):
        return f"LinearModel(n_features={None if self.params is None else self.n_features})"


class MLP(_Model):
    """Multi-layer perceptron scoring function: ``s = W_L^T a_{L-1} + b_L``, ``a_k = act(W_k^T a_{k-1} + b_k)``.

    Parameters
    ----------
    hidden_layer_sizes : tuple of int
        Units of each hidden layer; ``()`` gives a linear model.
    activation : {"sigmoid", "relu", "tanh", "identity"}
        Hidden-layer non-linearity ("logistic" is accepted for "sigmoid").
        The output layer is linear.
    random_state : int, Generator or None
        Seeds the Glorot-uniform initialisation (as scikit-learn's MLP:
        bound ``sqrt(6 / (fan_in + fan_out))``, ``sqrt(2 / ...)`` for sigmoid);
        biases start at 0.
    dtype : {float64, float32}, default float64
        Dtype of the parameters (any other dtype is a ValueError).
    n_features : int, optional
        Initialise at once for this many input features.

    Attributes
    ----------
    params : list ``[W_1, b_1, ..., W_L, b_L]``, ``W_k`` of shape (fan_in, fan_out)

    Examples
    --------
    >>> net = MLP((8,), "relu", random_state=0).initialize(5)
    >>> [p.shape for p in net.params]
    [(5, 8), (8,), (8, 1), (1,)]
    """

    def __init__(self, hidden_layer_sizes=(200,), activation: str = "sigmoid", random_state=None,
                 dtype=np.float64, *, n_features: int | None = None):
        if isinstance(hidden_layer_sizes, (str, bytes)):
            raise TypeError(f"hidden_layer_sizes must be a tuple of positive integers, got {hidden_layer_sizes!r}")
        layers = np.atleast_1d(np.asarray(hidden_layer_sizes, dtype=object))
        if layers.ndim != 1:
            raise ValueError(f"hidden_layer_sizes must be a flat tuple of positive integers, got {hidden_layer_sizes}")
        # No truncation: (2.5,) is an error, not two units.
        sizes = tuple(check_int(h, f"hidden_layer_sizes[{n}]", min_value=1) for n, h in enumerate(layers))
        self.hidden_layer_sizes = sizes
        self.activation = _check_activation(activation)
        self.random_state = random_state
        self.dtype = _check_float_dtype(dtype)
        self.params = None
        self._cache = None
        if n_features is not None:
            self.initialize(n_features)

    @property
    def n_layers(self) -> int:
        """Number of affine layers (hidden layers + output)."""
        return len(self.hidden_layer_sizes) + 1

    def initialize(self, n_features: int) -> "MLP":
        n_features = int(n_features)
        if n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        rng = _rng(self.random_state)
        sizes = (n_features,) + self.hidden_layer_sizes + (1,)
        factor = 2.0 if self.activation == "sigmoid" else 6.0
        params = []
        try:
            for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
                bound = np.sqrt(factor / (fan_in + fan_out))
                params.append(rng.uniform(-bound, bound, (fan_in, fan_out)).astype(self.dtype))
                params.append(np.zeros(fan_out, dtype=self.dtype))
        except (ValueError, MemoryError, OverflowError) as err:
            raise ValueError(f"hidden_layer_sizes={self.hidden_layer_sizes} with {n_features} inputs: the weight "
                             f"matrices cannot be allocated ({type(err).__name__}: {err})") from None
        self.params = params
        self._cache = None
        return self

    def forward(self, X) -> np.ndarray:
        a = self._check_X(X)
        act = ACTIVATIONS[self.activation][0]
        activations = [a]
        for k in range(self.n_layers):
            W, b = self.params[2 * k], self.params[2 * k + 1]
            z = a @ W
            z += b
            a = act(z) if k < self.n_layers - 1 else z
            activations.append(a)
        self._cache = activations
        return a[:, 0]

    def backward(self, grad_scores) -> list:
        activations = self._cache
        if activations is None:
            raise RuntimeError("backward needs a forward pass first")
        n = activations[0].shape[0]
        g = np.asarray(grad_scores, dtype=self.dtype)
        if g.shape != (n,):
            raise ValueError(f"grad_scores has shape {g.shape}, expected ({n},)")
        dact = ACTIVATIONS[self.activation][1]
        grads = [None] * len(self.params)
        delta = g[:, None]  # d loss / d z of the current layer
        for k in range(self.n_layers - 1, -1, -1):
            a_in = activations[k]
            grads[2 * k] = a_in.T @ delta
            grads[2 * k + 1] = delta.sum(axis=0)
            if k > 0:
                delta = (delta @ self.params[2 * k].T) * dact(a_in)
        return grads

    def __repr__(self):
        return f"MLP(hidden_layer_sizes={self.hidden_layer_sizes}, activation={self.activation!r})"


class Adam:
    """Adam (Kingma & Ba 2015) on a list of parameter arrays, updated in place.

    ``step(grads, learning_rate=None)`` applies one update; ``learning_rate``
    overrides the base rate for this step (learning-rate schedules). L2
    weight decay, when wanted, is added to ``grads`` by the caller.

    Parameters
    ----------
    params : list of arrays
        Updated in place.
    learning_rate : float > 0, default 1e-3
        Base step size.
    beta1, beta2 : float in [0, 1), defaults 0.9, 0.999
        Decay rates of the first and second moment estimates.
    epsilon : float > 0, default 1e-8
        Added to the root of the second moment (numerical safety).

    Examples
    --------
    >>> import numpy as np
    >>> p = [np.array([1.0, -2.0])]
    >>> opt = Adam(p, learning_rate=0.1)
    >>> opt.step([np.array([3.0, -0.5])])
    >>> p[0].round(6).tolist()                 # first step moves each coordinate by ~lr
    [0.9, -1.9]
    """

    def __init__(self, params, learning_rate: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8):
        learning_rate = check_real(learning_rate, "learning_rate", min_value=0.0, include_min=False)
        beta1 = check_real(beta1, "beta1", min_value=0.0, max_value=1.0, include_max=False)
        beta2 = check_real(beta2, "beta2", min_value=0.0, max_value=1.0, include_max=False)
        epsilon = check_real(epsilon, "epsilon", min_value=0.0, include_min=False)
        self.params = params
        self.learning_rate = learning_rate
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, grads, learning_rate: float | None = None) -> None:
        """One Adam update of the parameters, in place.

        Parameters
        ----------
        grads : list of arrays
            The gradient of every parameter, in the order of ``params``.
        learning_rate : float, optional
            Step size of this update (default: the base ``learning_rate``).
        """
        lr = self.learning_rate if learning_rate is None else float(learning_rate)
        if len(grads) != len(self.params):
            raise ValueError(f"expected {len(self.params)} gradient arrays, got {len(grads)}")
        self.t += 1
        b1, b2 = self.beta1, self.beta2
        step = lr * np.sqrt(1.0 - b2 ** self.t) / (1.0 - b1 ** self.t)
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m *= b1
            m += (1.0 - b1) * g
            v *= b2
            v += (1.0 - b2) * (g * g)
            p -= step * m / (np.sqrt(v) + self.epsilon)
