"""Scripts that reproduce the papers' tables and figures (``papers/``), and benchmarks (``benchmarks/``).

Run a reproduction with ``python -m experiments NAME [--quick]`` (or ``cltr experiments NAME``);
``python -m experiments all --quick`` runs every one. Each writes ``results/<name>.json`` (every
plotted number with the settings and seeds that made it) and ``results/<name>.png``. Run a
benchmark with ``python -m experiments.benchmarks.NAME``; it prints its figures.

The flat paths of before the split (``experiments.table3``, ``python -m experiments.bench_solvers``)
still name the same modules.
"""

from pathlib import Path as _Path

from counterfactual_ltr import _moved

_HERE = _Path(__file__).parent
MOVED = {f"experiments.{p.stem}": f"experiments.{p.parent.name}.{p.stem}"
         for folder in ("papers", "benchmarks") for p in sorted((_HERE / folder).glob("*.py"))
         if p.stem != "__init__"}
_moved.install(MOVED)


def __getattr__(name):
    return _moved.moved_attribute(__name__, name, MOVED)
