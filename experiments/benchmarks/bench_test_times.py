"""Benchmark: the test suite's run time, as the README and ``docs/guide/testing.md`` state it ("Test run time").

Runs, from the repository root, the quick development run ``python -m pytest -q -m "not slow"``
and the full run ``python -m pytest -q`` (the README's test command, what ``bash .ci/run`` runs
after installing), each as a child process, and prints for each its wall time, its CPU time (user +
system of the process and every process it waited for: pytest-xdist's workers, Dask's, the documents'
blocks' -- ``resource.getrusage(RUSAGE_CHILDREN)`` before and after), its pytest summary line (the
number of tests passed, skipped, failed) and the 1-minute load average before and after: wall time
on a machine shared with other jobs is set by the load, CPU time much less.

Prints figures; not a test. ``CLTR_DATA`` (the folder that holds ``MQ2008``) is passed on: without
the data the MQ2008 tests skip and the times are not the README's.

python -m experiments.benchmarks.bench_test_times [--only quick|full] [--pytest-args "--durations=30"]
    [--log DIR]     (DIR/quick.txt, DIR/full.txt: each run's whole output)
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = {
    "quick": ["-m", "pytest", "-q", "-m", "not slow"],
    "full": ["-m", "pytest", "-q"],
}
_SUMMARY = re.compile(r"^=*\s*(\d+ (?:passed|failed|skipped|error|errors|deselected|xfailed|xpassed)\b.*?)\s*=*$")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def summary_line(output: str) -> str:
    """pytest's last summary line ('2551 passed, 6 skipped in 400.12s'), or '' when there is none."""
    found = [m.group(1) for line in output.splitlines() if (m := _SUMMARY.match(line.strip()))]
    return found[-1] if found else ""


def count(summary: str, word: str) -> int:
    m = re.search(rf"(\d+) {word}\b", summary)
    return int(m.group(1)) if m else 0


def run(name: str, extra: list[str], log: Path | None = None) -> dict:
    """Run one of ``RUNS`` from the repository root; its wall and CPU seconds, summary and return code."""
    command = [sys.executable, *RUNS[name], *extra]
    load_before = os.getloadavg()[0]
    cpu0, wall0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - wall0, _children_cpu() - cpu0
    summary = summary_line(done.stdout)
    if log is not None:
        log.mkdir(parents=True, exist_ok=True)
        (log / f"{name}.txt").write_text(done.stdout + done.stderr)
    return {"name": name, "command": "python " + shlex.join(command[1:]), "wall": wall, "cpu": cpu,
            "summary": summary, "returncode": done.returncode, "tests": count(summary, "passed")
            + count(summary, "failed") + count(summary, "skipped"), "load": (load_before, os.getloadavg()[0]),
            "tail": done.stdout[-3000:] + done.stderr[-2000:]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(RUNS), help="run one of the two (default: quick, then full)")
    parser.add_argument("--pytest-args", default="", help="more pytest arguments for both runs (one string)")
    parser.add_argument("--log", type=Path, help="folder for each run's whole output (NAME.txt)")
    args = parser.parse_args(argv)
    extra = shlex.split(args.pytest_args)
    print(f"{os.cpu_count()} CPUs; CLTR_DATA={os.environ.get('CLTR_DATA', '(unset)')}; {ROOT}", flush=True)
    status = 0
    for name in [args.only] if args.only else ["quick", "full"]:
        r = run(name, extra, args.log)
        print(f"{r['name']:5s} `{r['command']}`: {r['wall']:.0f} s wall, {r['cpu']:.0f} s CPU; {r['tests']} tests "
              f"({r['summary'] or 'no summary line'}); exit {r['returncode']}; 1-minute load average "
              f"{r['load'][0]:.1f} before, {r['load'][1]:.1f} after", flush=True)
        if r["returncode"] != 0:
            print(r["tail"], file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
