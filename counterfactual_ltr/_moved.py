"""Import paths of modules that moved into packages: the old path is the same module object.

``import counterfactual_ltr.clicklog`` (or ``from counterfactual_ltr import clicklog``) keeps
working after the module moved to :mod:`counterfactual_ltr.logs.clicklog`: a finder on
``sys.meta_path`` answers the old name with the module at its new place, loaded on first use, so
``isinstance`` checks, ``monkeypatch`` and pickles of either path see one module. The library
itself imports the new paths only (``tests/test_import_graph.py`` checks it).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

#: old dotted path -> new dotted path (public modules only; private ones are internal)
MOVED = {f"counterfactual_ltr.{old}": f"counterfactual_ltr.{new}" for old, new in {
    "aggregate": "logs.aggregate",
    "clicklog": "logs.clicklog",
    "raw_events": "logs.raw_events",
    "files": "logs.files",
    "log_integrity": "logs.log_integrity",
    "session_checks": "logs.session_checks",
    "propensity_models": "examination.propensity_models",
    "logging_policy": "examination.logging_policy",
    "propensity_estimation": "propensity.estimation",
    "click_models": "propensity.click_models",
    "hessian_free": "solvers.hessian_free",
    "pair_qp": "solvers.pair_qp",
    "constrained": "solvers.constrained",
    "ccp": "solvers.ccp",
    "implicit_pairs": "surrogates.implicit_pairs",
    "distributed.newton": "solvers.distributed_newton",
    "distributed.fit": "estimators.distributed_fit",
    "persistence": "model_files.persistence",
}.items()}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    """Finds an old path of ``table`` and loads it as the module at the new path.

    ``python -m OLD`` works too: ``get_code`` hands ``runpy`` the new module's code.
    """

    def __init__(self, table: dict[str, str]):
        self.table = table
        self._specs = {}                  # new name -> the module's own spec

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.table:
            # the new file as origin: ``python -m OLD`` puts it in ``sys.argv[0]``
            origin = importlib.util.find_spec(self.table[fullname]).origin
            return importlib.util.spec_from_loader(fullname, self, origin=origin)
        return None

    def create_module(self, spec):
        module = importlib.import_module(self.table[spec.name])
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module):
        """Nothing to run (the module ran at its new path); the import machinery just set ``__spec__``
        to the old name's: give the module its own back, so its relative imports resolve quietly."""
        module.__spec__ = self._specs[module.__name__]

    def get_code(self, fullname):
        new = self.table[fullname]
        return importlib.util.find_spec(new).loader.get_code(new)

    def get_source(self, fullname):
        new = self.table[fullname]
        return importlib.util.find_spec(new).loader.get_source(new)


def install(table: dict[str, str] = MOVED) -> None:
    """Put a finder for ``table`` on ``sys.meta_path`` once."""
    if not any(isinstance(f, MovedModules) and f.table is table for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModules(table))


def moved_attribute(package: str, name: str, table: dict[str, str] = MOVED):
    """``package.name`` for a moved module not yet imported under its old name, else ``AttributeError``."""
    if f"{package}.{name}" in table:
        return importlib.import_module(f"{package}.{name}")
    raise AttributeError(f"module {package!r} has no attribute {name!r}")
