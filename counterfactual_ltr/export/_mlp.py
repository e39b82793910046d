"""Deep PropDCG's MLP as layers ``(W, b, activation)`` on raw features, and Solr's NeuralNetworkModel of them.

The preprocessor before the network is folded into the first layer: its input rows move to the
raw columns they read (zero rows on the columns a selector dropped), ``W' = W / scale`` row-wise
and ``b' = b - (shift / scale) @ W``, so every writer sees one network on raw features. Solr's
NeuralNetworkModel holds layers whose activation is relu, sigmoid, identity or leakyrelu: a tanh
network is refused there (ONNX holds it).
"""

from __future__ import annotations

import json

import numpy as np

from ._affine import affine_of
from ._linear import model_name

#: Activations of Solr's NeuralNetworkModel layers that the MLP can have (leakyrelu it never has).
SOLR_ACTIVATIONS = ("relu", "sigmoid", "identity")


def mlp_layers(model):
    """``[(W, b, activation), ...]`` in float64, input first; the last layer's activation is ``identity``."""
    net = getattr(model, "model_", None)
    params = getattr(net, "params", None)
    if not params:
        raise ValueError(f"{type(model).__name__} is not fitted: fit it before exporting")
    params = [np.asarray(p, dtype=np.float64) for p in params]
    chain, shift, scale = affine_of(model, params[0].shape[0])
    folded = params[0] / scale[:, None]
    first_b = params[1] - shift @ folded
    first_W = np.zeros((chain.n_raw, params[0].shape[1]))
    first_W[chain.columns] = folded
    params = [first_W, first_b] + params[2:]
    n_layers = len(params) // 2
    layers = []
    for k in range(n_layers):
        activation = net.activation if k < n_layers - 1 else "identity"
        layers.append((params[2 * k], params[2 * k + 1], activation))
    if not all(np.all(np.isfinite(p)) for p in params):
        raise ValueError(f"{type(model).__name__} has non-finite parameters: nothing to export")
    return layers


def solr_network(model, layers, names) -> str:
    """Solr LTR ``NeuralNetworkModel`` JSON: each layer's ``matrix`` is one row of input weights per unit."""
    for W, b, activation in layers:
        if activation not in SOLR_ACTIVATIONS:
            raise ValueError(f"{type(model).__name__} uses the {activation} activation, which Solr's "
                             f"NeuralNetworkModel lacks (it has relu, sigmoid, identity, leakyrelu): "
                             "formats that can hold it: onnx")
    body = {"class": "org.apache.solr.ltr.model.NeuralNetworkModel", "name": model_name(type(model).__name__),
            "features": [{"name": name} for name in names],
            "params": {"layers": [{"matrix": W.T.tolist(), "bias": b.tolist(), "activation": activation}
                                  for W, b, activation in layers]}}
    return json.dumps(body, indent=1) + "\n"
