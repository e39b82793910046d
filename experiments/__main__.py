"""Run the reproduction scripts: ``python -m experiments all [--quick]`` or ``python -m experiments NAME ...``.

Full runs write ``results/<name>.json`` and ``.png`` (the committed results the tables of
``docs/guide/results.md`` are made from); ``--quick`` runs write to ``results/quick/`` unless
``--out`` is given. ``--quiet`` hides the progress bars (they only show on a terminal anyway).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path


def scripts() -> list[str]:
    """Reproduction scripts: every module of ``experiments/papers``."""
    here = Path(__file__).parent / "papers"
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_"))


def main(argv=None) -> int:
    """Run the scripts named by ``argv[0]`` (``all`` for every one); 2 with a one-line message if unknown."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__ + "\nscripts: " + ", ".join(scripts()))
        return 0
    target, rest = argv[0], argv[1:]
    quiet = "--quiet" in rest
    rest = [a for a in rest if a != "--quiet"]
    if target != "all" and target not in scripts():
        print(f"python -m experiments: unknown experiment {target!r}; choose from: all, {', '.join(scripts())}",
              file=sys.stderr)
        return 2
    from counterfactual_ltr._progress import progress, show_progress

    names = scripts() if target == "all" else [target]
    with show_progress(False if quiet else None):
        for name in progress(names, desc="experiments", unit="script"):
            started = time.time()
            print(f"=== {name} {' '.join(rest)}", flush=True)
            importlib.import_module(f"experiments.papers.{name}").main(rest)
            print(f"=== {name} done in {time.time() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
