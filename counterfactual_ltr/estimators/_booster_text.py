"""A strict reader of LightGBM's text model, run before LightGBM parses a text from a model file.

LightGBM's own parser trusts its input: a truncated or edited text can crash the process (a
text cut in half segfaults LightGBM 4). A model file is untrusted, so :func:`check_booster_text`
accepts only what :class:`~counterfactual_ltr.estimators.GBDTPropDCG` writes, checked token by
token: the header (one class, one tree per iteration, the feature count), every tree (numeric
tokens only, array lengths from ``num_leaves``, no categorical splits, children that form a tree:
each node and leaf reached exactly once, a child's index above its parent's, so no cycle), the
block sizes ``tree_sizes`` that LightGBM uses to cut the text, and ``end of trees``. What follows
``end of trees`` (feature importances, training parameters) does not change a prediction and is
dropped. The text returned is the checked one, byte for byte.
"""

from __future__ import annotations

import math
import re

__all__ = ["check_booster_text"]

_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d{1,3})?")
#: Largest sum over the trees of their largest leaf value: every prediction is finite below it.
MAX_SCORE = 1e300
_INTEGER = re.compile(r"-?\d{1,18}")
_HEADER = ("version", "num_class", "num_tree_per_iteration", "label_index", "max_feature_idx", "feature_names",
           "feature_infos", "tree_sizes")
_TREE = ("num_leaves", "num_cat", "split_feature", "split_gain", "threshold", "decision_type", "left_child",
         "right_child", "leaf_value", "leaf_weight", "leaf_count", "internal_value", "internal_weight",
         "internal_count", "is_linear", "shrinkage")
# decision_type bits: 1 categorical (never: num_cat = 0), 2 default left, 4-8 missing type (none, zero, NaN).
_DECISION_TYPES = {0, 2, 4, 6, 8, 10}
_END = "end of trees"
#: Most trees and leaves a model file may declare (the grids of this library stay far below).
MAX_TREES, MAX_LEAVES = 1_000_000, 1_000_000


class _Bad(ValueError):
    pass


def _fields(lines, keys, where):
    """``key=value`` lines in exactly the order ``keys``; returns the values."""
    if len(lines) != len(keys):
        raise _Bad(f"{where}: expected the {len(keys)} fields {', '.join(keys)}, got {len(lines)} lines")
    values = {}
    for line, key in zip(lines, keys):
        name, sep, value = line.partition("=")
        if not sep or name != key:
            raise _Bad(f"{where}: expected the field {key!r}, got {line[:40]!r}")
        values[key] = value
    return values


def _tokens(value, pattern, n, where, *, allow_empty_for_one=False):
    tokens = value.split(" ") if value else []
    if len(tokens) != n and not (allow_empty_for_one and not tokens):
        raise _Bad(f"{where}: expected {n} values, got {len(tokens)}")
    for token in tokens:
        if not pattern.fullmatch(token):
            raise _Bad(f"{where}: {token[:30]!r} is not a number")
    return tokens


def _integer(value, where, low, high):
    if not _INTEGER.fullmatch(value) or not low <= int(value) <= high:
        raise _Bad(f"{where}: expected a whole number in [{low}, {high}], got {value[:30]!r}")
    return int(value)


def _check_children(left, right, n_leaves, where):
    """Each internal node but the root and each leaf is the child of exactly one node, above its parent."""
    if n_leaves == 1:   # a stump: one leaf, no node
        return
    seen_nodes, seen_leaves = set(), set()
    for parent, children in enumerate(zip(left, right)):
        for child in children:
            if child >= 0:
                if not parent < child <= n_leaves - 2 or child in seen_nodes:
                    raise _Bad(f"{where}: node {parent} has the child node {child}, which does not make a tree")
                seen_nodes.add(child)
            else:
                leaf = -child - 1
                if leaf >= n_leaves or leaf in seen_leaves:
                    raise _Bad(f"{where}: node {parent} has the leaf {leaf}, which does not make a tree")
                seen_leaves.add(leaf)
    if len(seen_nodes) != n_leaves - 2 or len(seen_leaves) != n_leaves:
        raise _Bad(f"{where}: the children do not reach every node and leaf once")


def _check_tree(block, k, n_features):
    where = f"tree {k}"
    lines = block.split("\n")
    if lines[0] != f"Tree={k}":
        raise _Bad(f"{where}: expected 'Tree={k}', got {lines[0][:40]!r}")
    body = lines[1:]
    while body and body[-1] == "":
        body.pop()
    f = _fields(body, _TREE, where)
    n = _integer(f["num_leaves"], f"{where}: num_leaves", 1, MAX_LEAVES)
    if f["num_cat"] != "0" or f["is_linear"] != "0":
        raise _Bad(f"{where}: categorical splits and linear trees are not part of a GBDTPropDCG model")
    values = {key: _tokens(f[key], _NUMBER, {"leaf_value": n, "shrinkage": 1}.get(key, n - 1), f"{where}: {key}")
              for key in ("split_gain", "threshold", "leaf_value", "internal_value", "internal_weight", "shrinkage")}
    leaves = [float(t) for t in values["leaf_value"]]
    if not all(math.isfinite(float(t)) for key in ("threshold", "leaf_value", "shrinkage") for t in values[key]):
        raise _Bad(f"{where}: a threshold, leaf value or shrinkage is not finite")
    _tokens(f["leaf_weight"], _NUMBER, n, f"{where}: leaf_weight", allow_empty_for_one=n == 1)
    for key, count in (("leaf_count", n), ("internal_count", n - 1)):
        for token in _tokens(f[key], _INTEGER, count, f"{where}: {key}"):
            _integer(token, f"{where}: {key}", 0, 2**62)
    features = [_integer(t, f"{where}: split_feature", 0, n_features - 1)
                for t in _tokens(f["split_feature"], _INTEGER, n - 1, f"{where}: split_feature")]
    if any(int(t) not in _DECISION_TYPES for t in _tokens(f["decision_type"], _INTEGER, n - 1,
                                                          f"{where}: decision_type")):
        raise _Bad(f"{where}: decision_type must be one of {sorted(_DECISION_TYPES)}")
    left, right = ([_integer(t, f"{where}: {key}", -n, n - 2) for t in _tokens(f[key], _INTEGER, n - 1,
                                                                                f"{where}: {key}")]
                   for key in ("left_child", "right_child"))
    _check_children(left, right, n, where)
    return max(abs(v) for v in leaves)


def check_booster_text(text: str, n_features: int | None = None) -> str:
    """The part of a LightGBM text model that predicts, after checking it is a well-formed GBDTPropDCG model.

    Parameters
    ----------
    text : str
        A text written by ``lightgbm.Booster.model_to_string``.
    n_features : int, optional
        The number of features the trees must take (default: the header's).

    Returns
    -------
    str
        ``text`` up to and including ``end of trees``, for ``lightgbm.Booster(model_str=...)``.

    Raises
    ------
    ValueError
        Naming the first field, tree or value that is not as LightGBM writes it.

    Examples
    --------
    >>> text = ("tree\\nversion=v4\\nnum_class=1\\nnum_tree_per_iteration=1\\nlabel_index=0\\nmax_feature_idx=0\\n"
    ...         "feature_names=x\\nfeature_infos=none\\ntree_sizes=90\\n\\n")
    >>> check_booster_text(text + "end of trees\\n")
    Traceback (most recent call last):
    ...
    ValueError: the header declares 1 trees, the text holds 0
    """
    end = text.find("\n" + _END)
    if not text.startswith("tree\n") or end < 0:
        raise ValueError(f"not a LightGBM model (its text has no 'tree' line first or no {_END!r})")
    try:
        return _check(text, end, n_features)
    except _Bad as err:
        raise ValueError(str(err)) from None


def _check(text, end, n_features):
    head, sep, trees = text[:end + 1].partition("\n\n")
    header = _fields(head.split("\n")[1:], _HEADER, "header")
    if header["version"] != "v4" or (header["num_class"], header["num_tree_per_iteration"],
                                      header["label_index"]) != ("1", "1", "0"):
        raise _Bad("header: expected version v4, one class, one tree per iteration and label_index 0")
    width = _integer(header["max_feature_idx"], "header: max_feature_idx", 0, 10**7 - 1) + 1
    if n_features is not None and width != n_features:
        raise _Bad(f"the trees take {width} features but n_features_in_ is {n_features}")
    names = header["feature_names"].split(" ")
    if len(names) != width or not all(names):
        raise _Bad(f"header: expected {width} feature names")
    if len(header["feature_infos"].split(" ")) != width:
        raise _Bad(f"header: expected {width} feature infos")
    sizes = [_integer(t, "header: tree_sizes", 1, 10**9) for t in header["tree_sizes"].split(" ") if t]
    starts = [m.start() for m in re.finditer(r"(?m)^Tree=", trees)]
    if len(starts) != len(sizes) or len(sizes) > MAX_TREES:
        raise _Bad(f"the header declares {len(sizes)} trees, the text holds {len(starts)}")
    if not sep or (starts and starts[0] != 0):
        raise _Bad("the trees must follow the header after one empty line")
    bounds = starts + [len(trees)]
    largest = 0.0
    for k, size in enumerate(sizes):
        block = trees[bounds[k]:bounds[k + 1]]
        if len(block.encode("utf-8")) != size:
            raise _Bad(f"tree {k}: header's tree_sizes says {size} bytes, the tree has {len(block.encode('utf-8'))}")
        largest += _check_tree(block, k, width)
    if not largest < MAX_SCORE:
        raise _Bad(f"the leaf values could add up to {largest:.3g}: predictions would not be finite")
    return text[:end + 1] + _END + "\n"
