"""Start-up time: ``import counterfactual_ltr``, ``cltr --help`` and every ``cltr COMMAND --help``.

    python -m experiments.benchmarks.bench_start [--repeat 5]

Each is run in a fresh interpreter ``--repeat`` times; the median wall time is printed (the
target of ``cltr --help`` and ``cltr COMMAND --help``: under 1 s on the 2-core machine). Also
prints which heavy dependencies each start loads (none is the aim: they load on first use).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

HEAVY = ("sklearn", "scipy.stats", "pandas", "pyarrow", "cvxpy", "lightgbm", "dask", "matplotlib")


def _time(code: str, repeat: int) -> tuple[float, list]:
    probe = code + "\nimport sys\nprint(' '.join(m for m in %r if m in sys.modules))" % (HEAVY,)
    times, loaded = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
        times.append(time.perf_counter() - start)
        loaded = out.split()
    return statistics.median(times), loaded


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    from counterfactual_ltr.cli import cli

    help_of = ("import contextlib, io\nfrom counterfactual_ltr.cli import main\n"
               "with contextlib.redirect_stdout(io.StringIO()):\n    main(%r)")
    cases = [("python -c 'import counterfactual_ltr'", "import counterfactual_ltr"),
             ("cltr --help", help_of % (["--help"],))]
    cases += [(f"cltr {name} --help", help_of % ([name, "--help"],)) for name in cli.commands]
    print(f"median of {args.repeat} fresh interpreters (wall seconds); heavy modules loaded")
    for label, code in cases:
        seconds, loaded = _time(code, args.repeat)
        print(f"  {label:<36} {seconds:6.2f} s   {', '.join(loaded) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
