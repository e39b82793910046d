"""Run every reproduction script: ``python -m experiments all [--quick]`` or ``python -m experiments NAME ...``."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path


def scripts() -> list[str]:
    """Reproduction scripts: every module of the package not starting with '_' or 'bench_'."""
    here = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)])
                  if not m.name.startswith(("_", "bench_")))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__ + "\nscripts: " + ", ".join(scripts()))
        return
    target, rest = argv[0], argv[1:]
    names = scripts() if target == "all" else [target]
    for name in names:
        started = time.time()
        print(f"=== {name} {' '.join(rest)}", flush=True)
        importlib.import_module(f"experiments.{name}").main(rest)
        print(f"=== {name} done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
