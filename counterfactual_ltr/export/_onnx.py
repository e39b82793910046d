"""ONNX graphs of linear rankers and of Deep PropDCG's MLP, built with ``onnx.helper``.

Input ``features``: ``[N, n_features]`` of raw features in the order of the names kept in the
model's ``doc_string`` and ``metadata_props["feature_names"]`` (a JSON list); output ``score``:
``[N]``. Both are float32 by default (``dtype="float32"``), what serving stacks feed; the
arithmetic is float64 inside the graph (the input is cast first), so folding a scaler's mean into
a bias loses nothing beyond the float32 of the input and of the score (up to about 1e-5 relative
against ``model.predict`` on float64 features). With ``dtype="float64"`` input and output are
double and the graph has no cast: scores equal ``model.predict`` to float64 rounding (1e-9).
``onnx`` is imported here only, when an ONNX export is asked for.
"""

from __future__ import annotations

import json

import numpy as np

#: ONNX operator set and IR version of the graphs: read by onnxruntime 1.14 and later.
OPSET, IR_VERSION = 17, 8
#: The input/output element types an ONNX export can have.
DTYPES = ("float32", "float64")
_ACTIVATION_OPS = {"sigmoid": "Sigmoid", "relu": "Relu", "tanh": "Tanh", "identity": None}


def _onnx():
    try:
        import onnx
    except ImportError:
        raise ValueError("the onnx format needs the onnx package: pip install 'counterfactual-ltr[export]'") from None
    return onnx


def check_dtype(dtype) -> str:
    """``dtype`` as ``"float32"`` or ``"float64"`` (the ONNX input/output type), else a ValueError."""
    if dtype not in DTYPES:
        raise ValueError(f"onnx_dtype={dtype!r} is not one of {', '.join(DTYPES)}")
    return dtype


def onnx_layers(kind: str, layers, names, version: str, dtype: str = "float32") -> bytes:
    """A serialized ONNX model computing ``layers`` (``[(W, b, activation), ...]``) on ``features``.

    ``dtype``: the element type of input and output, ``"float32"`` (cast to double inside) or ``"float64"``.
    """
    onnx = _onnx()
    from onnx import TensorProto, helper, numpy_helper

    double = check_dtype(dtype) == "float64"
    io_type = TensorProto.DOUBLE if double else TensorProto.FLOAT
    nodes = [helper.make_node("Cast", ["features"], ["x0"], to=TensorProto.DOUBLE)] if not double else []
    inits = []
    current = "features" if double else "x0"
    for k, (W, b, activation) in enumerate(layers):
        inits += [numpy_helper.from_array(np.asarray(W, dtype=np.float64), f"W{k}"),
                  numpy_helper.from_array(np.asarray(b, dtype=np.float64).reshape(-1), f"b{k}")]
        nodes += [helper.make_node("MatMul", [current, f"W{k}"], [f"m{k}"]),
                  helper.make_node("Add", [f"m{k}", f"b{k}"], [f"z{k}"])]
        current = f"z{k}"
        op = _ACTIVATION_OPS[activation]
        if op is not None:
            nodes.append(helper.make_node(op, [current], [f"a{k}"]))
            current = f"a{k}"
    inits.append(numpy_helper.from_array(np.array([1], dtype=np.int64), "squeeze_axes"))
    if not double:
        nodes.append(helper.make_node("Cast", [current], ["score_column"], to=TensorProto.FLOAT))
        current = "score_column"
    nodes.append(helper.make_node("Squeeze", [current, "squeeze_axes"], ["score"]))
    n = len(names)
    graph = helper.make_graph(
        nodes, f"cltr_{kind.lower()}",
        [helper.make_tensor_value_info("features", io_type, ["N", n])],
        [helper.make_tensor_value_info("score", io_type, ["N"])], initializer=inits)
    graph.input[0].doc_string = "raw features, columns in order: " + ", ".join(names)
    model = helper.make_model(graph, producer_name="counterfactual_ltr", producer_version=version,
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    describe(model, kind, names, dtype, "[N]")
    onnx.checker.check_model(model)
    return model.SerializeToString()


def describe(model, kind: str, names, dtype: str, output_shape: str, input_name: str = "features",
             output_name: str = "score") -> None:
    """Write what a serving engineer needs into an ONNX model: its ``doc_string`` and ``metadata_props``.

    The doc string names the input, its type and the raw features in column order, and the output;
    ``metadata_props`` holds ``feature_names`` (a JSON list), ``model_class``, ``input`` and ``output``.
    """
    model.doc_string = (f"{kind} exported by counterfactual_ltr.export: input '{input_name}' {dtype} "
                        f"[N, {len(names)}] of raw features, columns in order: {', '.join(names)}; output "
                        f"'{output_name}' {dtype} {output_shape}, higher ranks first")
    del model.metadata_props[:]
    for key, value in (("feature_names", json.dumps(list(names))), ("model_class", kind), ("input", input_name),
                       ("output", output_name)):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
