"""Export a fitted ranker to the stacks that serve learning-to-rank models: Solr, OpenSearch/Elasticsearch LTR,
Vespa and ONNX.

``export_model(model, format)`` gives the file's content (text, or bytes for ONNX) and
``write_export`` writes it; ``cltr export`` is the same on the command line. Every format scores
RAW features as ``model.predict`` does: the model's preprocessor (scalers, feature selectors, a
Pipeline of both; ``_affine``) is folded into the weights (Vespa, ONNX, RankLib, Solr's network;
weight 0 on a dropped column) or thresholds (trees), or written as the stack's own standard
normaliser (Solr's and the LTR plugin's linear models, which have no constant term). Which model kinds each format holds is :data:`FORMATS`;
a model a format cannot hold is refused with the formats that can. Feature names come from
``feature_names``, else the model's ``feature_names_in_``, else LETOR's numbers ``"1".."n"``.
GBDTPropDCG's writers live in ``_trees`` (``TREE_WRITERS``), imported only for a tree model.
docs/guide/serving.md shows the request that loads each file and how to check its scores.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["FORMATS", "export_model", "write_export"]

#: Format -> the model kinds it can hold: "linear" (RankSVM, SVMPropRank/DCG/RBP, SLAMRanker, the online
#: learners' ``coef_``), "mlp" (DeepPropDCG), "trees" (GBDTPropDCG, through ``_trees.TREE_WRITERS``).
FORMATS = {"solr": ("linear", "mlp", "trees"), "opensearch": ("linear", "trees"), "vespa": ("linear", "trees"),
           "onnx": ("linear", "mlp", "trees"), "lightgbm": ("trees",), "ranklib": ("linear", "trees")}
_KINDS = {"linear": "a linear ranker", "mlp": "an MLP (Deep PropDCG)", "trees": "gradient-boosted trees"}


def _kind(model) -> str:
    """``"trees"``, ``"mlp"`` or ``"linear"``: which writers a fitted model goes to (ValueError otherwise)."""
    name = type(model).__name__
    if any(cls.__name__ == "GBDTPropDCG" for cls in type(model).__mro__):
        return "trees"
    if hasattr(model, "model_") and hasattr(getattr(model, "model_"), "params"):
        return "mlp"
    if getattr(model, "coef_", None) is not None:
        return "linear"
    if hasattr(model, "hidden_layer_sizes") or hasattr(model, "C") or hasattr(model, "coef_"):
        raise ValueError(f"{name} is not fitted: fit it (or give it weights) before exporting")
    raise ValueError(f"{name} is not a ranker the export knows: it exports linear rankers (coef_), "
                     "DeepPropDCG and GBDTPropDCG")


def _refuse(model, fmt: str, kind: str, formats) -> None:
    raise ValueError(f"the {fmt!r} format cannot hold {type(model).__name__} ({_KINDS[kind]}); formats that can: "
                     f"{', '.join(sorted(formats))}")


def _export_trees(model, fmt, feature_names, onnx_dtype="float32"):
    from ._trees import TREE_WRITERS

    if feature_names is None and getattr(model, "n_features_in_", None) is not None:
        from ._names import resolve_names    # the fitted names, else LETOR's numbers, as for the other kinds

        feature_names = resolve_names(model, int(model.n_features_in_))

    if fmt == "opensearch":           # the plugin's _createmodel body around the XGBoost JSON dump, as for linear
        import json

        from ._linear import model_name

        dump = TREE_WRITERS["xgboost-json"](model, feature_names)
        body = {"model": {"name": model_name(type(model).__name__),
                          "model": {"type": "model/xgboost+json", "definition": dump}}}
        return json.dumps(body, indent=2) + "\n"
    if fmt == "ranklib":              # the plugin's _createmodel body around RankLib's LambdaMART text
        from ._linear import ranklib_body

        return ranklib_body(type(model).__name__, TREE_WRITERS["ranklib"](model, feature_names))
    if fmt not in TREE_WRITERS:
        _refuse(model, fmt, "trees", [f for f, kinds in FORMATS.items() if "trees" in kinds])
    if fmt == "onnx" and onnx_dtype == "float64":
        from ._trees import write_onnx_double

        return write_onnx_double(model, feature_names)
    return TREE_WRITERS[fmt](model, feature_names)


def export_model(model, format: str, *, feature_names=None, onnx_dtype: str = "float32") -> str | bytes:
    """The content of ``model`` exported to ``format``: text (JSON, a rank profile) or bytes (ONNX).

    Parameters
    ----------
    model : fitted ranker
        A linear ranker (``RankSVM``, ``SVMPropRank``, ``SVMPropDCG``, ``SVMPropRBP``, ``SLAMRanker``, an
        online learner with ``coef_``), ``DeepPropDCG`` or ``GBDTPropDCG``; its fitted ``preprocessor_``
        (StandardScaler, RobustScaler, MaxAbsScaler, MinMaxScaler without clip, any feature selector
        with ``get_support()``, or a Pipeline of these in any order) is folded in, so the export
        scores raw features; any other step (PCA, FunctionTransformer ...) is refused by name.
    format : {"solr", "opensearch", "vespa", "onnx", "lightgbm", "ranklib"}
        The stack's format (:data:`FORMATS` lists the model kinds each holds): Solr LTR's
        ``LinearModel`` / ``NeuralNetworkModel`` JSON, the OpenSearch/Elasticsearch LTR plugin's
        ``_createmodel`` body (``model/linear``), a Vespa rank profile, an ONNX model. For
        GBDTPropDCG, ``"vespa"`` gives the JSON model that Vespa's ``lightgbm("file.json")`` rank
        feature reads (LightGBM's ``dump_model`` form, raw thresholds, feature names as Vespa rank
        features); its rank profile is :func:`write_export`'s second file. ``"ranklib"`` is the
        LTR plugin's ``_createmodel`` body with a ``model/ranklib`` definition: RankLib's Linear
        Regression text (weights and a constant, the scaler folded in) for a linear ranker, its
        LambdaMART ensemble text for GBDTPropDCG; features are RankLib ids, the 1-based positions
        of ``feature_names`` in the plugin's feature set.
    feature_names : list of str, optional
        The raw features' names in column order, as the stack knows them; default the model's
        ``feature_names_in_``, else LETOR's feature numbers ``"1".."n"`` (Vespa: ``attribute(f1)`` ...).
    onnx_dtype : {"float32", "float64"}, default "float32"
        For ``"onnx"``: the element type of the input ``features`` and the output ``score``.
        float32 is what serving stacks feed; on float64 features its scores differ from
        ``model.predict`` by up to about 1e-5 relative (the input's rounding). float64 gives
        double scores equal to ``model.predict`` to double rounding (1e-9 relative): a linear
        model or MLP computes in double throughout; trees are one ``ai.onnx.ml`` operator set 5
        ``TreeEnsemble`` with double thresholds and leaves (ONNX Runtime 1.20 or later), routing
        every float64 input as LightGBM does. (The float32 tree model compares float32 inputs
        with float32 thresholds, chosen so that every float32 input is routed as LightGBM routes it.)
        Other formats accept only the default.

    Returns
    -------
    str or bytes
        The file's content; bytes for ``"onnx"``.

    Examples
    --------
    >>> import json
    >>> from click_sim import make_ranking
    >>> from counterfactual_ltr.estimators import RankSVM
    >>> data = make_ranking(n_queries=20, n_features=3, random_state=0)
    >>> model = RankSVM(C=1.0).fit(data)
    >>> solr = json.loads(export_model(model, "solr", feature_names=["bm25", "pagerank", "age"]))
    >>> solr["class"], sorted(solr["params"]["weights"])
    ('org.apache.solr.ltr.model.LinearModel', ['age', 'bm25', 'pagerank'])
    """
    from ._names import resolve_names

    if not isinstance(format, str) or format not in FORMATS:
        raise ValueError(f"format={format!r} is not one of {', '.join(FORMATS)}")
    from ._onnx import check_dtype

    check_dtype(onnx_dtype)
    if format != "onnx" and onnx_dtype != "float32":
        raise ValueError(f"onnx_dtype={onnx_dtype!r} applies to the onnx format only, not {format!r}")
    kind = _kind(model)
    if kind not in FORMATS[format]:
        _refuse(model, format, kind, [f for f, kinds in FORMATS.items() if kind in kinds])
    if kind == "trees":
        return _export_trees(model, format, feature_names, onnx_dtype)
    from .._version import __version__

    if kind == "mlp":
        from ._mlp import mlp_layers, solr_network

        layers = mlp_layers(model)
        names = resolve_names(model, layers[0][0].shape[0], feature_names)
        if format == "solr":
            return solr_network(model, layers, names)
        from ._onnx import onnx_layers

        return onnx_layers(type(model).__name__, layers, names, __version__, onnx_dtype)
    from . import _linear

    form = _linear.linear_form(model, lambda n: resolve_names(model, n, feature_names))
    if format == "onnx":
        from ._onnx import onnx_layers

        weights, bias = form.folded()
        return onnx_layers(form.kind, [(weights[:, None], [bias], "identity")], form.names, __version__, onnx_dtype)
    return {"solr": _linear.solr_linear, "opensearch": _linear.opensearch_linear,
            "vespa": _linear.vespa_linear, "ranklib": _linear.ranklib_linear}[format](form)


def write_export(model, format: str, path, *, feature_names=None, onnx_dtype: str = "float32") -> Path:
    """Write :func:`export_model`'s content to ``path`` (text as UTF-8, ONNX as bytes).

    The content is built before the file is opened, so a refused model leaves no file behind.
    For ``"vespa"`` and GBDTPropDCG, ``path`` (a ``.json`` file, for the application package's
    ``models/`` folder) receives LightGBM's JSON dump, and the rank profile that scores with it,
    ``first-phase { expression: lightgbm("<path's name>") }``, is written beside it with the suffix
    ``.profile`` (paste it into the schema).

    Parameters
    ----------
    model : fitted ranker
        As in :func:`export_model`.
    format : str
        As in :func:`export_model`.
    path : str or path-like
        The file to write (replaced if it exists).
    feature_names : list of str, optional
        As in :func:`export_model`.
    onnx_dtype : {"float32", "float64"}, default "float32"
        As in :func:`export_model`.

    Returns
    -------
    pathlib.Path
        The path written.

    Examples
    --------
    >>> import tempfile, os
    >>> from click_sim import make_ranking
    >>> from counterfactual_ltr.estimators import RankSVM
    >>> data = make_ranking(n_queries=20, n_features=3, random_state=0)
    >>> out = write_export(RankSVM().fit(data), "vespa", os.path.join(tempfile.mkdtemp(), "ranker.profile"))
    >>> out.read_text().splitlines()[1]
    'rank-profile cltr_ranksvm inherits default {'
    """
    content = export_model(model, format, feature_names=feature_names, onnx_dtype=onnx_dtype)
    path = Path(path)
    profile = None
    if format == "vespa" and _kind(model) == "trees":
        from ._trees import vespa_tree_profile

        if path.suffix != ".json":
            raise ValueError(f"path {str(path)!r}: Vespa's lightgbm(...) reads a .json file; name the file *.json")
        profile = vespa_tree_profile(path.name)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    if profile is not None:
        path.with_suffix(".profile").write_text(profile, encoding="utf-8")
    return path
