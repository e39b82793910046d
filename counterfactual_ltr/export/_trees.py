"""Writers of a fitted :class:`~counterfactual_ltr.estimators.GBDTPropDCG` in the formats that serve trees.

Every writer takes ``(model, feature_names)`` and returns the text (or, for ONNX, the bytes) of
one model that scores **raw** features as ``model.predict`` does:

* the booster's leaf values already hold LightGBM's shrinkage (the learning rate) and any init
  score (LightGBM adds a starting score into the first tree's leaves), so every format gets the
  plain sum of the leaves of its trees, with weight 1 and no base score;
* the model's ``preprocessor_`` (scalers, feature selectors and Pipelines of both, read by
  ``_affine.read_chain``) is folded in: a split on model input ``k`` becomes a split on the raw
  column it reads (so a selector's dropped columns appear in no split), and the scaling into the
  threshold: the trees compare ``x' = f(x) <= t`` with ``f`` monotone per feature, so each
  threshold is replaced by the largest raw value ``r`` (of the reader's number type) with
  ``f(r) <= t``, found among the representable numbers by galloping from the algebraic inverse
  ``f^-1(t)`` and bisecting, while checking ``f`` computed with the scaler's own operations. The
  decision is then identical for every input of that type, not only up to rounding. A decreasing
  ``f`` (a negative scale) swaps the two children;
* LightGBM goes left when ``x <= t``; the XGBoost dump goes to ``yes`` when ``x < c``: for the
  float32 inputs of the readers that use the dump, ``x <= r`` is ``x < nextafter(r, +inf)``;
* a threshold beyond the float32 range (LightGBM writes one near 1e300 on a node that only
  separates missing values from the others) becomes the largest float32, so the float32 formats
  route every finite input but that largest value (and infinities) as LightGBM does;
* LightGBM reads an input within 1e-35 of 0 as 0 (its zero threshold); the search above
  compares what LightGBM compares, so the float32 formats route such inputs as LightGBM does;
* a missing value (NaN) is routed as LightGBM routes it: to the ``default_left`` side on a node
  of missing type NaN, and on a node of missing type None (no NaN in training) to the side of
  ``0`` in the transformed space, since LightGBM replaces NaN by 0 there.

Formats ("lightgbm", "xgboost-json", "solr", "onnx", "vespa": LightGBM's JSON dump for Vespa's
``lightgbm(...)`` rank feature, compared in float64 on raw values with Vespa's strict ``<``;
"ranklib": RankLib's LambdaMART ensemble text, routed as Solr's but without Solr's 1e-6 slack)
and what they cannot hold:

* linear trees and categorical splits: only "lightgbm", and only without a preprocessor
  (GBDTPropDCG refuses both at ``fit``; a booster from elsewhere may hold them);
* LightGBM's ``zero_as_missing`` nodes (missing type Zero: ``|x'| <= 1e-35`` takes the default
  side): only "lightgbm" without a preprocessor;
* NaN in "xgboost-json" goes to the node's ``missing`` child, as XGBoost's dump defines it (the
  OpenSearch plugin gives a feature a document does not match NaN, so it takes that route);
* NaN in "solr": Solr's ``MultipleAdditiveTreesModel`` compares every feature value with
  ``<= threshold + 1e-6`` (its split slack; the writer compensates) and has no NaN route in the
  source read (apache/solr commit 1a87471); a feature that a document lacks takes its feature's
  default value (0 unless the feature defines another; Solr Reference Guide 9.x) before the model
  sees it, so the exported trees route such a document by that value, not by LightGBM's NaN route.
  Give missing features a default in the feature store that the trees route as you want.
"""

from __future__ import annotations

import json
import re

import numpy as np

from ._onnx import describe

__all__ = ["TREE_WRITERS"]

# LightGBM's text model separates feature names by spaces and its JSON dump quotes them: names
# holding whitespace or JSON's structural characters cannot travel through it.
_LGB_BAD_NAME = re.compile(r'[\s\[\]{}:,"]')
_LGB_NAME_FORMATS = ("lightgbm", "onnx")
# LightGBM decision_type bits: 1 categorical, 2 default left, (type >> 2) & 3: missing none/zero/NaN.
_DEFAULT_LEFT, _MISSING_NAN = 2, 8
# LightGBM's kZeroThreshold: an input value within it is read as 0 (a float32 1e-35, as a double).
_LGB_ZERO = float(np.float32(1e-35))
_SOLR_CLASS = "org.apache.solr.ltr.model.MultipleAdditiveTreesModel"
_MODEL_NAME = "cltr-gbdt-propdcg"
_ONNX_INPUT, _ONNX_OUTPUT = "features", "score"
_ONNX_OPSET = 15


# ----------------------------------------------------------------------------------------- checks
def _booster(model):
    """The fitted booster of ``model``, or a ValueError saying what is not a fitted GBDTPropDCG."""
    booster = getattr(model, "booster_", None)
    if booster is None or not hasattr(booster, "dump_model"):
        raise ValueError(f"tree export needs a fitted GBDTPropDCG (with booster_), got {type(model).__name__}"
                         + ("" if booster is None else " whose booster_ is not a LightGBM booster"))
    return booster


def _check_names(model, feature_names, fmt: str) -> list:
    """``feature_names`` checked against the model's raw width and the format's rules."""
    width = int(getattr(model, "n_features_in_", _booster(model).num_feature()))
    if isinstance(feature_names, (str, bytes)) or not hasattr(feature_names, "__len__"):
        raise ValueError(f"feature_names must be a list of {width} strings, got {type(feature_names).__name__}")
    names = list(feature_names)
    if len(names) != width:
        raise ValueError(f"feature_names has {len(names)} names but the model takes {width} features"
                         + (f" (first unnamed feature: column {len(names)})" if len(names) < width else
                            f" (first extra name: {names[width]!r} at position {width})"))
    seen = {}
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise ValueError(f"feature_names[{i}] must be a non-empty string, got {name!r}")
        if name in seen:
            raise ValueError(f"feature name {name!r} is given twice (positions {seen[name]} and {i})")
        seen[name] = i
        if fmt in _LGB_NAME_FORMATS and _LGB_BAD_NAME.search(name):
            raise ValueError(f"feature name {name!r} (position {i}) holds whitespace or one of []{{}}:,\" which "
                             f"LightGBM's model text cannot carry (format {fmt!r}); 'xgboost-json' and 'solr' "
                             "take any name")
    return names


# ------------------------------------------------------------------------------------ preprocessor
def _chain(model, width):
    """The model's preprocessor as a :class:`~counterfactual_ltr.export._affine.Chain` on ``width`` model inputs."""
    from ._affine import read_chain

    return read_chain(getattr(model, "preprocessor_", None), width)


def _seen(chain, x, k):
    """The value LightGBM compares for raw ``x`` at model input ``k``: the transform, ``|x'| <= 1e-35`` read as 0.

    LightGBM drops input values within its zero threshold (1e-35 as a float32) when it reads a
    row, so they are scored as 0; the map stays monotone, so the threshold search still holds.
    """
    x = chain.forward(x, k)
    return np.where(np.abs(x) <= _LGB_ZERO, 0.0, x)


def _key(v, dtype) -> int:
    """An integer that orders the values of ``dtype`` as the numbers do (one step per representable value)."""
    bits = 64 if dtype is np.float64 else 32
    b = int(np.asarray(v, dtype=dtype).view(np.int64 if bits == 64 else np.int32))
    return b if b >= 0 else -(b & ((1 << (bits - 1)) - 1))


def _from_key(key: int, dtype):
    """The value of ``dtype`` with :func:`_key` ``key``."""
    bits = 64 if dtype is np.float64 else 32
    b = key if key >= 0 else (-key) | (1 << (bits - 1))
    if b >= 1 << (bits - 1):
        b -= 1 << bits
    return np.asarray(b, dtype=np.int64 if bits == 64 else np.int32).view(dtype)[()]


def _first_true(pred, start: int, low: int, high: int) -> int:
    """The smallest key in ``[low, high]`` where the monotone ``pred`` (False then True) holds; ``high + 1`` if none.

    Gallops from ``start`` (a good guess: the algebraic inverse) and then bisects, so a scaler that maps
    thousands of raw values to one transformed value costs a hundred evaluations, not thousands.
    """
    start = min(max(start, low), high)
    if pred(start):
        hi, step = start, 1
        lo = hi - step
        while lo >= low and pred(lo):
            hi, step = lo, step * 2
            lo = hi - step
        if lo < low:
            if pred(low):
                return low
            lo = low
    else:
        lo, step = start, 1
        hi = lo + step
        while hi <= high and not pred(hi):
            lo, step = hi, step * 2
            hi = lo + step
        if hi > high:
            if not pred(high):
                return high + 1
            hi = high
    while hi - lo > 1:              # pred(lo) is False, pred(hi) is True
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _fold(affine, j: int, t: float, dtype, where: str, zero_band: bool = True):
    """The split ``f(x) <= t`` on raw ``x`` of type ``dtype`` as ``(r, swapped)``: ``x <= r`` (or ``x > r``).

    ``swapped`` is False when ``f`` increases (``f(x) <= t`` exactly when ``x <= r``), True when it
    decreases (``f(x) <= t`` exactly when ``x > r``). ``r`` is found among the representable numbers
    of ``dtype`` by galloping from the inverse and bisecting, so no input of that type is routed otherwise.
    ``zero_band`` says the reader is LightGBM itself (float64), which reads raw values within 1e-35
    of 0 as 0; a reader that compares raw values as they are (Vespa) passes False.
    """
    big = dtype(np.finfo(dtype).max)
    up, down = dtype(np.inf), dtype(-np.inf)
    with np.errstate(over="ignore"):
        c = dtype(np.clip(affine.inverse(t, j), -float(big), float(big)))

    def ok(v):
        with np.errstate(over="ignore"):        # near the type's largest value the transform may overflow
            return bool(_seen(affine, float(v), j) <= t)

    swapped = not affine.increasing(j)
    # f increasing: ok holds for x <= r, so r is just below the first x where ok fails; f decreasing: ok holds
    # for x >= c, and f(x) <= t exactly when x > prev(c). Either way: the first x where ``ok(x) == swapped`` fails.
    first = _first_true(lambda key: ok(_from_key(key, dtype)) == swapped, _key(c, dtype), _key(-big, dtype),
                        _key(big, dtype))
    r = _from_key(first - 1, dtype)
    if np.isfinite(r) and abs(r) < big and (ok(r) == swapped or ok(np.nextafter(r, up)) != swapped):
        raise ValueError(f"the threshold {t!r} of {where} could not be mapped back to raw {np.dtype(dtype).name} "
                         "values through the preprocessor (it is not monotone there)")
    if zero_band and dtype is np.float64 and affine.steps and abs(r) <= _LGB_ZERO:
        # The folded LightGBM text reads every raw value within 1e-35 as 0, so a raw threshold inside that
        # band cannot route them apart: any threshold inside it routes all others right; this one routes 0 right.
        r = np.float64(0.0) if (ok(0.0) != swapped) else np.nextafter(np.float64(0.0), -np.inf)
    # A threshold beyond the type's range (LightGBM writes one near 1e300 for a split of missing values
    # from all others) is held by the largest finite value: only +-inf and +-max itself may then go otherwise.
    return dtype(np.clip(r, -big, big)), swapped


# ----------------------------------------------------------------------------------------- trees
def _split_info(node, tree_index, feature_names) -> str:
    """Where a split node is, for error messages: tree, node and the raw feature's name."""
    return f"tree {tree_index}, node {node.get('split_index')} (feature {feature_names[node['raw_feature']]!r})"


def _raw_trees(model, feature_names, fmt: str, dtype):
    """The booster's trees in raw-feature space as nested dicts ``{split_index, feature, threshold, le, gt, nan}``.

    ``le`` is the child of ``x <= threshold``, ``gt`` the other, ``nan`` ("le" or "gt") the child
    of a missing value; leaves are ``{leaf_index, value}``. A ValueError names the first node
    the format cannot hold.
    """
    booster = _booster(model)
    dump = booster.dump_model()
    if int(dump.get("num_tree_per_iteration", 1)) != 1 or int(dump.get("num_class", 1)) != 1:
        raise ValueError("the booster has several trees per iteration (a multi-class model): a ranker has one "
                         "score per document; none of the formats holds it as one")
    affine = _chain(model, booster.num_feature())
    others = "'lightgbm' (without a preprocessor)"
    trees = []
    for info in dump["tree_info"]:
        index = info["tree_index"]

        def convert(node):
            if "split_index" not in node:
                if "leaf_coeff" in node or "leaf_const" in node:
                    raise ValueError(f"tree {index} is a linear tree (leaves with coefficients): format {fmt!r} "
                                     f"cannot hold it; {others} can")
                return {"leaf_index": int(node.get("leaf_index", 0)), "value": float(node["leaf_value"])}
            where = _split_info(dict(node, raw_feature=int(affine.columns[int(node["split_feature"])])), index,
                                feature_names)
            if node["decision_type"] != "<=":
                raise ValueError(f"{where} is a categorical split ({node['decision_type']!r}): format {fmt!r} "
                                 f"cannot hold it; {others} can")
            missing = node["missing_type"]
            if missing == "Zero":
                raise ValueError(f"{where} treats zero as missing (zero_as_missing): format {fmt!r} cannot hold "
                                 f"it; {others} can")
            j, t = int(node["split_feature"]), float(node["threshold"])
            if missing == "NaN":
                nan_left = bool(node["default_left"])
            elif missing == "None":
                nan_left = 0.0 <= t      # LightGBM scores NaN as 0 on such a node
            else:
                raise ValueError(f"{where} has an unknown missing type {missing!r}")
            r, swapped = _fold(affine, j, t, dtype, where, zero_band=fmt != "vespa")
            le, gt = convert(node["left_child"]), convert(node["right_child"])
            if swapped:
                le, gt, nan_left = gt, le, not nan_left
            return {"split_index": int(node["split_index"]), "feature": int(affine.columns[j]), "threshold": r,
                    "le": le, "gt": gt,
                    "nan": "le" if nan_left else "gt"}

        trees.append(convert(info["tree_structure"]))
    return trees


def _has_unfoldable(model) -> bool:
    """True when the booster text holds linear trees, categorical splits or zero-as-missing nodes."""
    text = _booster(model).model_to_string()
    if re.search(r"^is_linear=1$", text, re.M) or re.search(r"^num_cat=[1-9]", text, re.M):
        return True
    for line in re.findall(r"^decision_type=(.*)$", text, re.M):
        if any((int(v) >> 2) & 3 == 1 for v in line.split()):
            return True
    return False


# ---------------------------------------------------------------------------------- LightGBM text
def _tree_blocks(text: str):
    """``(head, blocks, tail)`` of a LightGBM text model: the header, each ``Tree=`` block, the rest."""
    end = text.index("end of trees")
    starts = [m.start() for m in re.finditer(r"^Tree=\d+$", text, re.M)]
    if not starts:
        raise ValueError("the booster's text holds no tree")
    blocks = [text[a:b] for a, b in zip(starts, starts[1:] + [end])]
    return text[:starts[0]], blocks, text[end:]


def _set_line(block: str, key: str, value: str) -> str:
    new, n = re.subn(rf"^{key}=.*$", lambda _m: f"{key}={value}", block, count=1, flags=re.M)
    if n != 1:
        raise ValueError(f"the booster's text has no {key}= line where one was expected")
    return new


def _number(v) -> str:
    return repr(float(v))


def _rewrite_text(model, feature_names, fmt, dtype, objective=None) -> str:
    """The booster's text with raw-space thresholds, explicit NaN routes and ``feature_names`` set."""
    trees = _raw_trees(model, feature_names, fmt, dtype)
    head, blocks, tail = _tree_blocks(_booster(model).model_to_string())
    if len(blocks) != len(trees):
        raise ValueError(f"the booster's text holds {len(blocks)} trees but its dump {len(trees)}")
    out = []
    for block, tree in zip(blocks, trees):
        nodes = []

        def walk(node):
            if "value" in node:
                return ~node["leaf_index"]
            nodes.append(node)
            node["_le"], node["_gt"] = walk(node["le"]), walk(node["gt"])
            return node["split_index"]

        walk(tree)
        if nodes:
            nodes.sort(key=lambda n: n["split_index"])
            block = _set_line(block, "split_feature", " ".join(str(n["feature"]) for n in nodes))
            block = _set_line(block, "threshold", " ".join(_number(n["threshold"]) for n in nodes))
            block = _set_line(block, "decision_type", " ".join(
                str(_MISSING_NAN | (_DEFAULT_LEFT if n["nan"] == "le" else 0)) for n in nodes))
            block = _set_line(block, "left_child", " ".join(str(n["_le"]) for n in nodes))
            block = _set_line(block, "right_child", " ".join(str(n["_gt"]) for n in nodes))
        out.append(block)
    head = _set_line(head, "max_feature_idx", str(len(feature_names) - 1))
    head = _set_line(head, "feature_names", " ".join(feature_names))
    head = _set_line(head, "feature_infos", _raw_feature_infos(model, head))
    head = _set_line(head, "tree_sizes", " ".join(str(len(b.encode("utf-8"))) for b in out))
    if objective is not None and not re.search(r"^objective=", head, re.M):
        head = re.sub(r"^(max_feature_idx=.*)$", lambda m: f"{m.group(1)}\nobjective={objective}", head, count=1,
                      flags=re.M)
    return head + "".join(out) + "end of trees\n"


def _raw_feature_infos(model, head: str) -> str:
    """LightGBM's ``feature_infos`` (each feature's training range) on the raw columns.

    A model input's range is mapped back through its scaling to its raw column; a raw column a
    selector dropped is ``none``, LightGBM's mark of a feature no tree uses.
    """
    infos = re.search(r"^feature_infos=(.*)$", head, re.M).group(1).split(" ")
    chain = _chain(model, len(infos))
    out = ["none"] * chain.n_raw
    for k, info in enumerate(infos):
        m = re.fullmatch(r"\[(.+):(.+)\]", info)
        if m is not None and chain.steps:
            lo, hi = sorted((chain.inverse(float(m.group(1)), k), chain.inverse(float(m.group(2)), k)))
            info = f"[{lo!r}:{hi!r}]"
        out[chain.columns[k]] = info
    return " ".join(out)


def write_lightgbm(model, feature_names) -> str:
    """LightGBM's own text model, with the feature names set and any preprocessor folded in.

    Without a preprocessor this is the booster's text (trees byte for byte, anything after
    ``end of trees`` dropped); with one, every threshold is the largest float64 ``r`` with
    ``f(r) <= t`` and every node routes NaN explicitly (missing type NaN), so LightGBM scores raw
    float64 features exactly as ``model.predict`` does, but for raw values within 1e-35 of 0 other
    than 0 itself, which LightGBM reads as 0 (a threshold folded into that band, as from
    ``MaxAbsScaler``'s threshold of LightGBM's own zero band, cannot route them apart).

    Parameters
    ----------
    model : GBDTPropDCG
        A fitted model.
    feature_names : list of str
        One name per raw input feature (no whitespace, no ``[]{}:,"``).

    Returns
    -------
    str
        What ``lightgbm.Booster(model_str=...)`` reads.

    Examples
    --------
    >>> import lightgbm
    >>> from click_sim import make_ranking, simulate_clicks
    >>> from counterfactual_ltr.estimators import GBDTPropDCG
    >>> data = make_ranking(n_queries=30, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    >>> model = GBDTPropDCG(n_estimators=5, num_leaves=4).fit(log)
    >>> text = write_lightgbm(model, [f"f{j}" for j in range(10)])
    >>> booster = lightgbm.Booster(model_str=text)
    >>> bool(abs(booster.predict(data.X) - model.predict(data)).max() == 0)
    True
    """
    names = _check_names(model, feature_names, "lightgbm")
    if getattr(model, "preprocessor_", None) is None:
        head, blocks, _ = _tree_blocks(_booster(model).model_to_string())
        head = _set_line(head, "feature_names", " ".join(names))
        return head + "".join(blocks) + "end of trees\n"
    if _has_unfoldable(model):
        _raw_trees(model, names, "lightgbm", np.float64)    # raises, naming the node
    return _rewrite_text(model, names, "lightgbm", np.float64)


# ----------------------------------------------------------------------------------- XGBoost JSON
def write_xgboost_json(model, feature_names) -> str:
    """The trees as XGBoost's JSON dump: the OpenSearch/Elasticsearch LTR plugin's ``model/xgboost+json``.

    A list of trees; each node has ``nodeid``, ``depth``, ``split`` (the feature's name),
    ``split_condition``, ``yes`` (taken when ``x < split_condition``), ``no``, ``missing`` (the
    child of a NaN) and ``children``; a leaf has ``nodeid`` and ``leaf``. LightGBM's ``x' <= t``
    becomes ``x < c`` with ``c`` the next float32 above the largest raw float32 routed left, so the
    plugin (float32 features) routes every input as LightGBM does. Leaves are written as float64
    numbers; the plugin sums them in float32 (about 1e-7 relative per tree).

    Parameters
    ----------
    model : GBDTPropDCG
        A fitted model.
    feature_names : list of str
        One name per raw input feature: the names of the plugin's feature set.

    Returns
    -------
    str
        JSON text of the list of trees (the model ``definition``).

    Examples
    --------
    >>> import json
    >>> from click_sim import make_ranking, simulate_clicks
    >>> from counterfactual_ltr.estimators import GBDTPropDCG
    >>> data = make_ranking(n_queries=30, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    >>> model = GBDTPropDCG(n_estimators=5, num_leaves=4).fit(log)
    >>> trees = json.loads(write_xgboost_json(model, [f"f{j}" for j in range(10)]))
    >>> len(trees), sorted(trees[0])
    (5, ['children', 'depth', 'missing', 'no', 'nodeid', 'split', 'split_condition', 'yes'])
    """
    names = _check_names(model, feature_names, "xgboost-json")
    out = []
    for tree in _raw_trees(model, names, "xgboost-json", np.float32):
        counter = iter(range(1 << 62))

        def emit(node, depth, nodeid):
            if "value" in node:
                return {"nodeid": nodeid, "leaf": node["value"]}
            with np.errstate(over="ignore"):
                cond = np.nextafter(np.float32(node["threshold"]), np.float32(np.inf))
            if not np.isfinite(cond):       # strict JSON has no Infinity: x = max float32 and +inf go "no"
                cond = np.float32(node["threshold"])
            yes, no = next(counter), next(counter)
            return {"nodeid": nodeid, "depth": depth, "split": names[node["feature"]],
                    "split_condition": float(cond), "yes": yes, "no": no,
                    "missing": yes if node["nan"] == "le" else no,
                    "children": [emit(node["le"], depth + 1, yes), emit(node["gt"], depth + 1, no)]}

        out.append(emit(tree, 0, next(counter)))
    return json.dumps(out)


# ------------------------------------------------------------------------------------------ Solr
def write_solr(model, feature_names) -> str:
    """Solr LTR's ``MultipleAdditiveTreesModel`` JSON (for the model store), weights 1 and raw thresholds.

    Solr goes to ``left`` when ``value <= threshold + 1e-6`` (float32; Solr adds that slack to every
    threshold it reads): each threshold written is the float32 that, with Solr's slack added,
    is the largest raw float32 LightGBM routes left. Solr has no NaN route: a feature a document
    lacks takes its feature's default value (see the module docstring).

    Parameters
    ----------
    model : GBDTPropDCG
        A fitted model.
    feature_names : list of str
        One name per raw input feature: the names in Solr's feature store.

    Returns
    -------
    str
        JSON text of the model (``class``, ``name``, ``features``, ``params.trees``).

    Examples
    --------
    >>> import json
    >>> from click_sim import make_ranking, simulate_clicks
    >>> from counterfactual_ltr.estimators import GBDTPropDCG
    >>> data = make_ranking(n_queries=30, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    >>> model = GBDTPropDCG(n_estimators=5, num_leaves=4).fit(log)
    >>> doc = json.loads(write_solr(model, [f"f{j}" for j in range(10)]))
    >>> doc["class"], len(doc["params"]["trees"])
    ('org.apache.solr.ltr.model.MultipleAdditiveTreesModel', 5)
    """
    names = _check_names(model, feature_names, "solr")

    def emit(node):
        if "value" in node:
            return {"value": repr(node["value"])}
        return {"feature": names[node["feature"]], "threshold": repr(float(_solr_threshold(node["threshold"]))),
                "left": emit(node["le"]), "right": emit(node["gt"])}

    trees = [{"weight": "1", "root": emit(tree)} for tree in _raw_trees(model, names, "solr", np.float32)]
    return json.dumps({"class": _SOLR_CLASS, "name": _MODEL_NAME, "features": [{"name": n} for n in names],
                       "params": {"trees": trees}}, indent=1)


#: Solr's MultipleAdditiveTreesModel adds this float to every threshold it reads (RegressionTreeNode
#: .NODE_SPLIT_SLACK in solr/modules/ltr/.../model/MultipleAdditiveTreesModel.java).
_SOLR_SLACK = np.float32(1e-6)


def _solr_threshold(r):
    """The float32 ``w`` to write so that Solr's ``float(w + 1e-6f)`` is ``r``, the threshold meant.

    Solr compares ``value <= float(w + 1e-6f)``; without this, raw values in ``(r, r + 1e-6]`` would
    go left. ``w`` is searched among the float32 next to ``r - 1e-6``. For ``|r|`` below about 1e-6
    the sums ``w + 1e-6f`` step by about 1e-13, so ``r`` itself may be out of reach (LightGBM's zero
    threshold 1e-35 is): then the largest reachable sum below ``r`` is used, and only raw values
    strictly between it and ``r`` (a band narrower than 1e-13) go right where LightGBM goes left.
    """
    r = np.float32(r)
    if not np.isfinite(r) or abs(r) >= np.float32(np.finfo(np.float32).max) / 2:
        return r                    # the slack vanishes in float32 far from 0; a threshold at max float32 stays
    down, up = np.float32(-np.inf), np.float32(np.inf)
    w = np.float32(r - _SOLR_SLACK)
    for _ in range(64):                      # largest w whose sum is <= r, starting next to it
        if np.float32(w + _SOLR_SLACK) > r:
            w = np.nextafter(w, down)
        elif np.float32(np.nextafter(w, up) + _SOLR_SLACK) <= r:
            w = np.nextafter(w, up)
        else:
            return w
    raise ValueError(f"no float32 threshold makes Solr's threshold + 1e-6 come next to {float(r)!r}")


# ------------------------------------------------------------------------------------------ ONNX
def write_onnx(model, feature_names) -> bytes:
    """An ONNX model (``onnxmltools.convert_lightgbm``): input ``features`` float32 [N, n], output ``score`` [N, 1].

    The converter reads a LightGBM text whose thresholds are the largest raw float32 routed left
    and whose nodes route NaN explicitly, so ONNX Runtime (float32 inputs) routes every input as
    LightGBM does. The feature order is in the model's ``doc_string`` and in its metadata
    ``feature_names`` (a JSON list).

    Parameters
    ----------
    model : GBDTPropDCG
        A fitted model.
    feature_names : list of str
        One name per raw input feature, in the order of the input's columns.

    Returns
    -------
    bytes
        The serialised ``onnx.ModelProto``.

    Examples
    --------
    >>> import onnxruntime
    >>> from click_sim import make_ranking, simulate_clicks
    >>> from counterfactual_ltr.estimators import GBDTPropDCG
    >>> data = make_ranking(n_queries=30, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    >>> model = GBDTPropDCG(n_estimators=5, num_leaves=4).fit(log)
    >>> session = onnxruntime.InferenceSession(write_onnx(model, [f"f{j}" for j in range(10)]))
    >>> score = session.run(["score"], {"features": data.X.astype("float32")})[0][:, 0]
    >>> bool(abs(score - model.predict(data)).max() < 1e-5)
    True
    """
    names = _check_names(model, feature_names, "onnx")
    try:
        import lightgbm
        import onnxmltools
        from onnxmltools.convert.common.data_types import FloatTensorType
    except ImportError as err:
        raise ImportError(f"format 'onnx' needs onnx and onnxmltools: pip install 'counterfactual-ltr[export]' "
                          f"({err})") from None
    text = _rewrite_text(model, names, "onnx", np.float32, objective="regression")
    booster = lightgbm.Booster(model_str=text)
    proto = onnxmltools.convert_lightgbm(booster, name=_MODEL_NAME,
                                         initial_types=[(_ONNX_INPUT, FloatTensorType([None, len(names)]))],
                                         target_opset=_ONNX_OPSET)
    _rename_output(proto, _ONNX_OUTPUT)
    describe(proto, "GBDTPropDCG", names, "float32", "[N, 1]", _ONNX_INPUT, _ONNX_OUTPUT)
    return proto.SerializeToString()


def write_onnx_double(model, feature_names) -> bytes:
    """An ONNX model of the trees in double precision: input ``features`` float64 [N, n], output ``score`` [N, 1].

    One ``TreeEnsemble`` of the ``ai.onnx.ml`` operator set 5 (typed by its input: double
    thresholds, leaves and sum), written from the raw-space trees: each threshold is the largest raw
    float64 LightGBM routes left (``BRANCH_LEQ``), a NaN follows the node's learned route
    (``nodes_missing_value_tracks_true``). ONNX Runtime (1.20 and later run this operator) then
    routes every float64 input as LightGBM does and sums the leaves in double. The older
    ``TreeEnsembleRegressor`` (operator set 3) compares in double too but outputs float32, and
    onnxmltools' converter writes float32 thresholds only, so neither gives double scores.

    Parameters
    ----------
    model : GBDTPropDCG
        A fitted model.
    feature_names : list of str
        One name per raw input feature, in the order of the input's columns.

    Returns
    -------
    bytes
        The serialised ``onnx.ModelProto``.
    """
    names = _check_names(model, feature_names, "onnx")
    try:
        import onnx
        from onnx import TensorProto, helper
    except ImportError:
        raise ImportError("format 'onnx' needs onnx: pip install 'counterfactual-ltr[export]'") from None
    trees = _raw_trees(model, names, "onnx", np.float64)
    # TreeEnsemble lists split nodes only; a child is a split node's or a leaf's index (``*leafs`` says which).
    splits = {key: [] for key in ("feature", "threshold", "nan", "true", "true_leaf", "false", "false_leaf")}
    leaf_weights, roots = [], []

    def emit(node):
        """``(index, is_leaf)`` of ``node`` after writing it and its subtree."""
        if "value" in node:
            leaf_weights.append(float(node["value"]))
            return len(leaf_weights) - 1, 1
        at = len(splits["feature"])
        for key, value in (("feature", int(node["feature"])), ("threshold", float(node["threshold"])),
                           ("nan", 1 if node["nan"] == "le" else 0), ("true", 0), ("true_leaf", 0), ("false", 0),
                           ("false_leaf", 0)):
            splits[key].append(value)
        splits["true"][at], splits["true_leaf"][at] = emit(node["le"])
        splits["false"][at], splits["false_leaf"][at] = emit(node["gt"])
        return at, 0

    for tree in trees:
        if "value" in tree:           # a single leaf: a split whose two children are that leaf
            tree = {"feature": 0, "threshold": 0.0, "nan": "le", "le": tree, "gt": tree}
        roots.append(emit(tree)[0])
    m, n = len(splits["feature"]), len(leaf_weights)
    node = helper.make_node(
        "TreeEnsemble", [_ONNX_INPUT], ["score_column"], domain="ai.onnx.ml", n_targets=1, aggregate_function=1,
        post_transform=0, tree_roots=roots, nodes_featureids=splits["feature"],
        nodes_splits=helper.make_tensor("nodes_splits", TensorProto.DOUBLE, [m], splits["threshold"]),
        nodes_modes=helper.make_tensor("nodes_modes", TensorProto.UINT8, [m], [0] * m),     # 0: BRANCH_LEQ
        nodes_missing_value_tracks_true=splits["nan"], nodes_truenodeids=splits["true"],
        nodes_trueleafs=splits["true_leaf"], nodes_falsenodeids=splits["false"], nodes_falseleafs=splits["false_leaf"],
        leaf_targetids=[0] * n, leaf_weights=helper.make_tensor("leaf_weights", TensorProto.DOUBLE, [n], leaf_weights))
    reshape = helper.make_node("Reshape", ["score_column", "score_shape"], [_ONNX_OUTPUT])
    shape = helper.make_tensor("score_shape", TensorProto.INT64, [2], [-1, 1])
    graph = helper.make_graph(
        [node, reshape], _MODEL_NAME,
        [helper.make_tensor_value_info(_ONNX_INPUT, TensorProto.DOUBLE, [None, len(names)])],
        [helper.make_tensor_value_info(_ONNX_OUTPUT, TensorProto.DOUBLE, [None, 1])], initializer=[shape])
    proto = helper.make_model(graph, producer_name="counterfactual_ltr",
                              opset_imports=[helper.make_opsetid("", _ONNX_OPSET), helper.make_opsetid("ai.onnx.ml", 5)])
    proto.ir_version = 8
    describe(proto, "GBDTPropDCG", names, "float64", "[N, 1]", _ONNX_INPUT, _ONNX_OUTPUT)
    onnx.checker.check_model(proto)
    return proto.SerializeToString()


def _rename_output(proto, new: str):
    """Rename the graph's single output (and the node output that produces it) to ``new``."""
    graph = proto.graph
    if len(graph.output) != 1:
        raise ValueError(f"the converted ONNX graph has {len(graph.output)} outputs, expected 1")
    old = graph.output[0].name
    for node in graph.node:
        for i, name in enumerate(node.output):
            if name == old:
                node.output[i] = new
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
    graph.output[0].name = new


# ------------------------------------------------------------------------------- Vespa (LightGBM JSON)
def write_vespa_lightgbm(model, feature_names) -> str:
    """LightGBM's JSON dump (``Booster.dump_model()``) of the raw-space trees, for Vespa's ``lightgbm(...)``.

    Vespa's ``lightgbm("file.json")`` rank feature (Vespa 8 documentation, "Ranking with LightGBM
    models") reads this JSON from the application package's ``models/`` folder and refers to each
    feature by its name in ``feature_names`` as a rank feature: a name ``n`` is written as
    :func:`~counterfactual_ltr.export._linear.vespa_reference` gives it (``attribute(n)``, a rank
    feature such as ``bm25(title)`` as given, ``attribute(fN)`` for a LETOR number), as in the linear
    rank profile. Vespa's importer (``LightGBMParser`` in vespa-engine/vespa's model-integration,
    read 2026-11-29) turns each split into ``x < threshold``, or ``!(x >= threshold)`` when
    ``default_left`` (so NaN goes left), whatever ``decision_type`` and ``missing_type`` say; so each
    threshold is the next float64 above the largest raw ``r`` LightGBM routes left, ``default_left``
    is the side LightGBM sends a missing value to, and ``pandas_categorical`` is present (null), which
    the importer reads unconditionally. The leaves already hold the learning rate, so the score is
    the plain sum of the leaves.

    Parameters
    ----------
    model : GBDTPropDCG
        A fitted model.
    feature_names : list of str
        One name per raw input feature, each a Vespa field name, rank feature or LETOR number.

    Returns
    -------
    str
        JSON text of the dump (``feature_names``, ``tree_info[*].tree_structure``).

    Examples
    --------
    >>> import json
    >>> from click_sim import make_ranking, simulate_clicks
    >>> from counterfactual_ltr.estimators import GBDTPropDCG
    >>> data = make_ranking(n_queries=30, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    >>> model = GBDTPropDCG(n_estimators=5, num_leaves=4).fit(log)
    >>> dump = json.loads(write_vespa_lightgbm(model, [f"f{j}" for j in range(10)]))
    >>> len(dump["tree_info"]), dump["feature_names"][:2]
    (5, ['attribute(f0)', 'attribute(f1)'])
    """
    from ._linear import vespa_reference

    names = _check_names(model, feature_names, "vespa")
    refs = [vespa_reference(name) for name in names]
    first = {}
    for name, ref in zip(names, refs):
        if first.setdefault(ref, name) != name:
            raise ValueError(f"feature names {first[ref]!r} and {name!r} are both {ref} in Vespa: rename one")

    def emit(node):
        if "value" in node:
            return {"leaf_index": node["leaf_index"], "leaf_value": node["value"]}
        # Vespa's importer turns a split into `x < threshold` (or `!(x >= threshold)` when default_left),
        # a strict comparison: the next float64 above r sends x <= r left. A threshold at the largest
        # float64 stays (JSON has no Infinity): only that value itself then goes right.
        above = np.nextafter(np.float64(node["threshold"]), np.inf)
        threshold = float(above) if np.isfinite(above) else float(node["threshold"])
        return {"split_index": node["split_index"], "split_feature": node["feature"],
                "threshold": threshold, "decision_type": "<=",
                "default_left": node["nan"] == "le", "missing_type": "NaN",
                "left_child": emit(node["le"]), "right_child": emit(node["gt"])}

    trees = _raw_trees(model, names, "vespa", np.float64)
    info = [{"tree_index": i, "num_leaves": _count_leaves(tree), "num_cat": 0, "shrinkage": 1,
             "tree_structure": emit(tree)} for i, tree in enumerate(trees)]
    return json.dumps({"name": "tree", "version": "v3", "num_class": 1, "num_tree_per_iteration": 1,
                       "label_index": 0, "max_feature_idx": len(names) - 1, "objective": "regression",
                       "feature_names": refs, "tree_info": info, "pandas_categorical": None}, indent=1) + "\n"


def _count_leaves(node) -> int:
    return 1 if "value" in node else _count_leaves(node["le"]) + _count_leaves(node["gt"])


def vespa_tree_profile(model_file: str, profile: str = "cltr_gbdtpropdcg") -> str:
    """A Vespa rank profile whose first phase is ``lightgbm("<model_file>")`` (the file in ``models/``).

    Parameters
    ----------
    model_file : str
        The JSON file's name inside the application package's ``models/`` folder.
    profile : str
        The rank profile's name.

    Returns
    -------
    str
        The rank-profile text, to paste into the document's schema.

    Examples
    --------
    >>> print(vespa_tree_profile("cltr_gbdtpropdcg.json").splitlines()[2])
            expression: lightgbm("cltr_gbdtpropdcg.json")
    """
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+\.json", model_file):
        raise ValueError(f"model_file {model_file!r} must be a plain .json file name (letters, digits, _ . -)")
    return (f"rank-profile {profile} inherits default {{\n    first-phase {{\n"
            f"        expression: lightgbm(\"{model_file}\")\n    }}\n}}\n")


# ------------------------------------------------------------------------------------- RankLib MART
def write_ranklib(model, feature_names) -> str:
    """RankLib's LambdaMART ensemble text, the LTR plugin's ``model/ranklib`` definition for trees.

    The plugin (o19s elasticsearch-learning-to-rank 1.5.x / opensearch-learning-to-rank-base 2.x)
    reads it with RankLib's loader (o19s RankyMcRankFace 0.3.0, a fork of RankLib 2.8): a first
    line ``## LambdaMART``, other ``##`` lines as comments, then ``<ensemble>`` of ``<tree id
    weight>``, each a nested ``<split>`` with ``<feature>`` (the 1-based position of the feature in
    the plugin's feature set), ``<threshold>`` and two ``<split pos="left|right">`` children, or
    ``<output>`` at a leaf. RankLib goes left when ``value <= threshold`` and parses thresholds and
    outputs as Java floats, so each threshold is the largest raw float32 LightGBM routes left
    (as for Solr); the weights are 1 (the leaves hold the learning rate). RankLib has no route for a
    missing value: the plugin gives a feature that does not match a document the value 0.

    Parameters
    ----------
    model : GBDTPropDCG
        A fitted model.
    feature_names : list of str
        One name per raw input feature, in the order of the plugin's feature set.

    Returns
    -------
    str
        The RankLib model text.

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> from counterfactual_ltr.estimators import GBDTPropDCG
    >>> data = make_ranking(n_queries=30, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    >>> model = GBDTPropDCG(n_estimators=5, num_leaves=4).fit(log)
    >>> text = write_ranklib(model, [f"f{j}" for j in range(10)])
    >>> text.splitlines()[0], text.count("<tree id=")
    ('## LambdaMART', 5)
    """
    from ._linear import ranklib_text_names

    names = ranklib_text_names(_check_names(model, feature_names, "ranklib"))
    trees = _raw_trees(model, names, "ranklib", np.float32)
    lines = ["## LambdaMART", f"## No. of trees = {len(trees)}",
             "## Learning rate = 1 (exported by counterfactual_ltr.export from GBDTPropDCG: the leaves hold "
             "LightGBM's shrinkage; raw features, scaler folded into the thresholds)",
             "## Features (id = position in the feature set): "
             + " ".join(f"{j + 1}={name}" for j, name in enumerate(names)), "<ensemble>"]

    def emit(node, depth, pos=None):
        tab = "\t" * depth
        lines.append(f"{tab}<split>" if pos is None else f'{tab}<split pos="{pos}">')
        if "value" in node:
            lines.append(f"{tab}\t<output> {node['value']!r} </output>")
        else:
            lines.append(f"{tab}\t<feature> {node['feature'] + 1} </feature>")
            lines.append(f"{tab}\t<threshold> {float(node['threshold'])!r} </threshold>")
            emit(node["le"], depth + 1, "left")
            emit(node["gt"], depth + 1, "right")
        lines.append(f"{tab}</split>")

    for i, tree in enumerate(trees):
        lines.append(f'\t<tree id="{i + 1}" weight="1.0">')
        emit(tree, 2)
        lines.append("\t</tree>")
    lines.append("</ensemble>")
    return "\n".join(lines) + "\n"


#: Format name -> writer ``(model, feature_names) -> str | bytes`` for a fitted GBDTPropDCG.
TREE_WRITERS = {"lightgbm": write_lightgbm, "xgboost-json": write_xgboost_json, "solr": write_solr,
                "onnx": write_onnx, "vespa": write_vespa_lightgbm,
                "ranklib": write_ranklib}
