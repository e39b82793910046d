"""Sphinx configuration of the documentation site (``python -m sphinx -W -n -b html docs docs/_build/html``).

The build needs no data and no network: the gallery makes its own small data sets, and external
names (NumPy, SciPy, scikit-learn, ...) are not linked (no intersphinx), so nitpicky mode ignores
them by the patterns in ``nitpick_ignore_regex``; the project's own names must all resolve.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
os.environ.setdefault("MPLBACKEND", "Agg")

import counterfactual_ltr  # noqa: E402
import click_sim  # noqa: E402

project = "counterfactual-ltr"
author = "the counterfactual-ltr developers"
copyright = "2026, " + author
release = version = counterfactual_ltr.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "guide/_*", "auto_examples/*.md5",
                    "auto_examples/*.py", "auto_examples/*.ipynb", "auto_examples/*.zip"]
nitpicky = True

# -- myst: the notes use GitHub-style anchors and tables; headings get anchors for #links
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3

# -- autodoc / autosummary / numpydoc -------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"show-inheritance": False}   # members: listed by the templates
autodoc_typehints = "none"          # the numpydoc Parameters sections carry the types
autodoc_member_order = "bysource"
numpydoc_show_class_members = False  # the class template lists the members itself
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = False
numpydoc_xref_param_type = True
numpydoc_xref_ignore = "all"         # only the aliases below become links; the rest is plain text


def _project_aliases() -> dict:
    """Short name -> full dotted path, for every public name of the two packages (the xref map)."""
    aliases = {}
    for name, module in counterfactual_ltr._HOME.items():
        obj = getattr(counterfactual_ltr, name)
        aliases[name] = f"{obj.__module__}.{obj.__qualname__}"
    aliases["show_progress"] = "counterfactual_ltr._progress.show_progress"
    for name in click_sim.__all__:
        obj = getattr(click_sim, name)
        aliases.setdefault(name, f"{obj.__module__}.{obj.__qualname__}")
    return aliases


numpydoc_xref_aliases = _project_aliases()


def _private_homed() -> dict:
    """Public module -> the names of its ``__all__`` defined in a private module below it.

    ``counterfactual_ltr.online`` exports ``Feedback`` from ``online._base``: autosummary lists a
    module's own members only, so the module template documents these names on the public
    module's page (the nearest public package above the private home).
    """
    import pkgutil

    public = {}
    for package in (counterfactual_ltr, click_sim):
        public[package.__name__] = package
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if any(part.startswith("_") for part in info.name.split(".")):
                continue
            public[info.name] = importlib.import_module(info.name)
    homed = {}
    for name, module in public.items():
        for attr in getattr(module, "__all__", ()):
            home = getattr(getattr(module, attr, None), "__module__", None) or ""
            if not home.startswith(name + ".") or "._" not in "." + home[len(name):]:
                continue
            owner = max((m for m in public if home.startswith(m + ".")), key=len)
            if owner == name:
                homed.setdefault(name, []).append(attr)
    return homed


autosummary_context = {"private_homed": _private_homed()}

# External names are not linked (no network at build time); nitpicky mode ignores exactly these.
_EXTERNAL = r"(numpy|np|scipy|sklearn|pandas|pd|pyarrow|dask|distributed|lightgbm|matplotlib|cvxpy|osqp|" \
            r"clarabel|click|tqdm|threadpoolctl|joblib|builtins|typing|collections|os|pathlib|io|re|json|" \
            r"warnings|concurrent|datetime|enum|abc|numbers|random)"
nitpick_ignore_regex = [
    ("py:.*", _EXTERNAL + r"(\..*)?"),
    # the builtins, written in numpydoc types and :class:`float` alike (no intersphinx to link them)
    ("py:.*", r"(int|float|str|bool|bytes|list|tuple|dict|set|frozenset|object|type|callable|None|True|False|"
              r"Ellipsis|NotImplemented|slice|range|iter|len|print|isinstance|hash|"
              r"[A-Z][A-Za-z]*(Error|Exception|Warning)|Path|PathLike|Sequence|Mapping|Iterable|Iterator|"
              r"Callable|Generator|Any)"),
    # the project's private helpers (an underscore in the path): named in docstrings, not documented
    ("py:.*", r"(.*\.)?_[A-Za-z].*"),
]

# -- sphinx-gallery ---------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": os.path.join(ROOT, "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "matplotlib_animations": False,
    "show_memory": False,
    "min_reported_time": 1,
    "only_warn_on_example_error": False,   # a broken example fails the build
}

# -- HTML ---------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "counterfactual-ltr"
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_show_sourcelink = False
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
    "navbar_align": "left",
    "secondary_sidebar_items": ["page-toc"],   # the gallery's pages hide it (_static/site.css)
}
html_sidebars = {"index": []}


# -- resolving the project's re-exported names ------------------------------------------------
def _canonical(target: str):
    """``counterfactual_ltr.RankSVM`` (or an old moved path) -> where the object is documented."""
    parts = target.split(".")
    if parts[0] not in ("counterfactual_ltr", "click_sim"):
        return None
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        if getattr(obj, "__name__", None) and obj.__class__.__name__ == "module":
            return obj.__name__
        module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if module and qualname:
            return f"{module}.{qualname}"
        return None
    return None


def _by_suffix(domain, target: str, module: str):
    """A documented project object whose dotted name ends with ``target`` (e.g. ``SolverResult``,
    ``MLP.weight_decay`` or ``counterfactual_ltr.evaluation.ESTIMATORS``): the one nearest to the
    referring module, if that is unambiguous."""
    names = [n for n in domain.objects if n.startswith(("counterfactual_ltr", "click_sim"))]
    tail = target.split(".")[-1]
    prefix = target.rsplit(".", 1)[0] + "." if target.startswith(("counterfactual_ltr", "click_sim")) else ""
    found = [n for n in names if n.endswith("." + target)] or \
            [n for n in names if prefix and n.startswith(prefix) and n.endswith("." + tail)]
    if len(found) > 1 and module:
        found = [n for n in found if n.startswith(module + ".")] or found
    return found[0] if len(found) == 1 else None


def _home_of(domain, target: str, module: str):
    """Where a project name that Sphinx did not find is documented, or None."""
    head, _, rest = target.partition(".")
    home = _canonical(target) if rest else None
    if home is None and module and head not in ("counterfactual_ltr", "click_sim"):
        home = _canonical(f"{module}.{target}")            # :mod:`.newton` in a package docstring
    if home is None and head in numpydoc_xref_aliases:      # ClickLog or ClickLog.from_events
        home = numpydoc_xref_aliases[head] + ("." + rest if rest else "")
    if not home or home not in domain.objects or "._" in home:
        home = _by_suffix(domain, target, module) or home
    return home


def _resolve_reexport(app, env, node, contnode):
    """A missing Python reference to a project name links to where the name is documented.

    Re-exported names (``counterfactual_ltr.RankSVM``), old moved paths, short names of the
    project's classes, and attributes named in a class's Attributes section (linked to the class).
    """
    if node.get("refdomain") != "py":
        return None
    target, module = node.get("reftarget", ""), node.get("py:module") or ""
    domain = env.get_domain("py")
    candidates = [_home_of(domain, target, module)]
    if node.get("reftype") in ("attr", "meth"):                # an attribute without an entry of its own
        owner = target.rpartition(".")[0] or node.get("py:class") or ""
        if owner:
            candidates.append(_home_of(domain, owner, module))
            if module:
                candidates.append(f"{module}.{owner}")
    for home in candidates:
        if not home or home == target or home not in domain.objects:
            continue
        new = node.deepcopy()
        new["reftarget"] = home
        found = domain.resolve_xref(env, node.get("refdoc", ""), app.builder, "obj", home, new, contnode)
        if found is not None:
            return found
    return None


def _drop_external_aliases(app, config):
    """numpydoc links builtins to the Python docs by default (``python:float``): without intersphinx
    those are dangling, so only the project's aliases are kept; the rest is plain text."""
    complete = config.numpydoc_xref_aliases_complete
    for key in [k for k, v in complete.items() if not v.startswith(("counterfactual_ltr", "click_sim"))]:
        del complete[key]


def _skip_member(app, what, name, obj, skip, options):
    """scikit-learn adds ``set_fit_request``-style methods and ``get_metadata_routing`` to every
    estimator: they are sklearn's (the class template lists inherited members, down to sklearn's
    ``BaseEstimator``, whose own ``get_params``/``set_params`` are left out the same way)."""
    if (name.startswith("set_") and name.endswith("_request")) or name == "get_metadata_routing":
        return True
    return None


class _EmptyGuideGlob(logging.Filter):
    """The placeholder ``docs/guide/index.md`` lists the guide's pages by a glob, which matches
    nothing while the folder holds only that page. Sphinx gives that warning no type that
    ``suppress_warnings`` could name, so this drops exactly it (that file, that message)."""

    def filter(self, record):
        message = str(record.msg) % record.args if record.args else str(record.msg)
        location = str(getattr(record, "location", ""))
        return not ("didn't match any documents" in message and "guide/index" in location)


def setup(app):
    logging.getLogger("sphinx.sphinx.directives.other").addFilter(_EmptyGuideGlob())
    app.connect("missing-reference", _resolve_reexport)
    app.connect("config-inited", _drop_external_aliases, priority=900)
    app.connect("autodoc-skip-member", _skip_member)
