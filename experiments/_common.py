"""Shared plumbing of the experiment scripts: arguments, data location, result files."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
# In a source checkout the committed results live in <repo>/results; an installed copy writes under the
# current directory instead of next to site-packages.
RESULTS = REPO / "results" if (REPO / "pyproject.toml").is_file() else Path.cwd() / "results"
#: Where ``--quick`` runs write unless ``--out`` is given: never over the committed full-mode results.
QUICK_RESULTS = RESULTS / "quick"
MQ2007_NOTE = ("MQ2008 only: the paper trains on MQ2007+MQ2008 training queries; MQ2007 is not "
               "available here, so training uses MQ2008's training folds")


def shared_data_dir() -> Path:
    """``$CLTR_DATA``, else ``../shared/data`` next to the repository: ``click_sim.data_dir``."""
    from click_sim.datapath import data_dir

    return data_dir()


def data_missing(what: str) -> SystemExit:
    """Status 2 (bad input, as for an unknown script) after one line on stderr: the data is not where we look."""
    print(f"{what} not found under {shared_data_dir()} (set CLTR_DATA to the folder that holds it)", file=sys.stderr)
    return SystemExit(2)


def mq2008_dir() -> Path | None:
    """The MQ2008 folder, or None when the shared data is absent."""
    path = shared_data_dir() / "MQ2008"
    return path if (path / "Fold1" / "train.txt").exists() else None


def load_fold(fold: int = 1):
    """``(train, vali, test)`` RankingDatasets of MQ2008 fold ``fold``."""
    from click_sim import load_letor

    root = mq2008_dir()
    if root is None:
        raise data_missing("MQ2008")
    return tuple(load_letor(root / f"Fold{fold}" / f"{part}.txt") for part in ("train", "vali", "test"))


class _RecordingParser(argparse.ArgumentParser):
    """Remembers the arguments it parsed, so the JSON records the command that made it."""

    def parse_args(self, args=None, namespace=None):
        global _LAST_ARGV
        _LAST_ARGV = list(sys.argv[1:] if args is None else args)
        parsed = super().parse_args(args, namespace)
        if getattr(parsed, "out", "unset") is None:
            parsed.out = QUICK_RESULTS if getattr(parsed, "quick", False) else RESULTS
        return parsed


_LAST_ARGV: list[str] = []


def parser(description: str) -> argparse.ArgumentParser:
    p = _RecordingParser(description=description)
    p.add_argument("--quick", action="store_true", help="CI-sized run (a minute or two)")
    p.add_argument("--seeds", type=int, default=None, help="number of random seeds")
    p.add_argument("--out", type=Path, default=None,
                   help=f"folder for the JSON and PNG (default {RESULTS}; with --quick {QUICK_RESULTS})")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    return p


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def merge_run_parts(paths, same, key) -> tuple[list, list, dict]:
    """``(parts, runs, provenance)`` of result files made in parallel parts, for a script's ``--merge``.

    The parts must agree on every setting named in ``same``; ``key(run, part)`` names a run, which
    may appear in one part only. ``provenance`` holds each part's command, seconds and CPU seconds
    (``save_results`` counts the latter into the merge's own).
    """
    parts = [json.loads(Path(f).read_text()) for f in paths]
    for f, part in zip(paths[1:], parts[1:]):
        for name in same:
            if part["settings"].get(name) != parts[0]["settings"].get(name):
                raise ValueError(f"--merge: {f} has {name} = {part['settings'].get(name)!r}, {paths[0]} "
                                 f"{parts[0]['settings'].get(name)!r}; only parts with the same settings can be merged")
    runs, seen = [], set()
    for f, part in zip(paths, parts):
        for run in part["results"]["runs"]:
            k = key(run, part)
            if k in seen:
                raise ValueError(f"--merge: run {k} of {f} is in another part too")
            seen.add(k)
            runs.append(run)
    provenance = {"merged_from": [part["command"] for part in parts],
                  "seconds_of_parts": [part.get("seconds") for part in parts],
                  "cpu_seconds_of_parts": [part.get("cpu_seconds") for part in parts]}
    return parts, runs, provenance


def save_results(name: str, results: dict, settings: dict, out: Path = RESULTS, started: float | None = None) -> Path:
    """Write ``out/<name>.json`` with the results, the settings and how they were made."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "name": name,
        "command": " ".join(["python -m experiments." + name, *_LAST_ARGV]),
        "settings": settings,
        "results": results,
        "environment": {"python": platform.python_version(), "numpy": np.__version__,
                        "machine": platform.machine(), "cpus": os.cpu_count()},
    }
    if started is not None:
        payload["seconds"] = round(time.time() - started, 2)
    # CPU time of this process and its finished workers (the machine is shared, so wall time alone
    # says little), and the load it ran under.
    t = os.times()
    own = t.user + t.system + t.children_user + t.children_system
    if "merged_from" in settings:  # a merge counts its parts' CPU time, unknown if a part did not record it
        parts = settings.get("cpu_seconds_of_parts") or []
        known = len(parts) == len(settings["merged_from"]) and all(c is not None for c in parts)
        payload["cpu_seconds"] = round(own + sum(parts), 2) if known else None
    else:
        payload["cpu_seconds"] = round(own, 2)
    payload["load_average_at_end"] = [round(v, 2) for v in os.getloadavg()]
    path = out / f"{name}.json"
    path.write_text(json.dumps(_jsonable(payload), indent=1))
    return path


def figure_path(name: str, out: Path = RESULTS) -> Path:
    Path(out).mkdir(parents=True, exist_ok=True)
    return Path(out) / f"{name}.png"


def pyplot():
    """matplotlib.pyplot with a non-interactive backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
