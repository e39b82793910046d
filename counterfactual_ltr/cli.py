"""The ``cltr`` command: one command per step of the workflow, thin wrappers over the public API.

::

    cltr simulate DATA -o log.parquet            # click_sim.simulate_clicks
    cltr propensity LOG DATA -o propensity.json  # propensity.estimate_propensities
    cltr fit LOG DATA --model svm-propdcg --C 0.1,1,10 -o model.npz   # model_selection.grid_search
    cltr evaluate MODEL... LOG DATA -o report.html                     # evaluation.validation_report
    cltr predict MODEL DATA -o scores.tsv                              # estimator.predict
    cltr export MODEL --format onnx -o ranker.onnx                     # export.write_export
    cltr experiments NAME [--quick]                                    # python -m experiments NAME

Every step is one call of the Python API (named beside it), so a Python user
can do the same. Bad input (missing or malformed files, bad option values)
exits with status 2 and a one-line message on stderr. Progress bars go to
stderr when it is a terminal; ``--quiet`` silences them and the summaries.
Run ``cltr COMMAND --help`` for the options and examples of each command;
``python -m counterfactual_ltr.cli`` is the same command.

One module of a little over 900 lines: the commands' options, help texts and the shared readers of
their files are the whole of it, and a reader looks for a command's wiring here, beside the others.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pkgutil
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import click
import numpy as np

from ._version import __version__
from .export import FORMATS as EXPORT_FORMATS

__all__ = ["cli", "main", "MODELS"]

#: ``--model`` names of ``cltr fit`` and the estimator class each builds.
MODELS = {"svm-propdcg": "SVMPropDCG", "svm-proprank": "SVMPropRank", "svm-proprbp": "SVMPropRBP",
          "svm-rank": "RankSVM", "slam": "SLAMRanker", "deep": "DeepPropDCG", "gbdt-propdcg": "GBDTPropDCG"}
#: Grid options of ``--model gbdt-propdcg``: option -> (GBDTPropDCG parameter, whole numbers?, least value
#: (a float: exclusive)). An option not given takes its values from ``estimators.GBDT_GRID``, else the
#: estimator's default.
TREE_OPTIONS = {"--n-estimators": ("n_estimators", True, 1), "--learning-rate": ("learning_rate", False, 0.0),
                "--num-leaves": ("num_leaves", True, 2), "--min-child-samples": ("min_child_samples", True, 1)}
SCALERS = {"none": None, "standard": "StandardScaler", "minmax": "MinMaxScaler", "maxabs": "MaxAbsScaler",
           "robust": "RobustScaler"}
#: ``cltr fit`` extends a grid whose choice binds at an edge by at most this many values (factors of 10).
MAX_GRID_EXTENSIONS = 3
#: What the experiment scripts import beyond the library: the ``[experiments]`` extra of ``pyproject.toml``.
EXPERIMENT_NEEDS = ("matplotlib", "lightgbm")
# Errors that mean "bad input": reported in one line with status 2. Anything else is a bug: traceback.
_INPUT_ERRORS = (ValueError, TypeError, OSError, EOFError, zipfile.BadZipFile, MemoryError)


class InputError(click.UsageError):
    """Bad input found while running a command (exit status 2)."""


class _OutputFile(click.Path):
    """A file to write: not a folder, and its folder exists (checked before the work, not after it)."""

    def convert(self, value, param, ctx):
        path = super().convert(value, param, ctx)
        folder = os.path.dirname(os.path.abspath(os.fspath(path)))
        if not os.path.isdir(folder):
            self.fail(f"the folder {os.path.dirname(os.fspath(path)) or folder!r} does not exist", param, ctx)
        return path


OUTPUT_FILE = _OutputFile(dir_okay=False)


def _echo(quiet: bool, text: str) -> None:
    if not quiet:
        click.echo(text)


def _progress_setting(quiet: bool):
    """``show_progress`` argument: never with ``--quiet``, else only on a terminal."""
    return False if quiet else None


def _silence_warnings(ctx, param, quiet):
    """``-q``: no warnings either, for the command's run only (the context restores the filters)."""
    if quiet:
        ctx.with_resource(warnings.catch_warnings())
        warnings.simplefilter("ignore")
    return quiet


def _quiet_option(f):
    return click.option("-q", "--quiet", is_flag=True, callback=_silence_warnings,
                        help="No progress bars, no summary on stdout, no warnings (errors still go to stderr).")(f)


def _floats(value: str, name: str) -> list[float]:
    try:
        values = [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of numbers", param_hint=name) from None
    if not values:
        raise click.BadParameter("needs at least one value", param_hint=name)
    return values


def _shown(value) -> str:
    """A grid value as the terminal shows it: a number in its shortest form, a choice as it is."""
    return value if isinstance(value, str) else f"{value:g}"


def _choices(value: str, name: str, allowed) -> list[str]:
    values = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise click.BadParameter(f"{(bad or [value])[0]!r} is not one of {', '.join(allowed)}", param_hint=name)
    return list(dict.fromkeys(values))


def _load_data(path, command: str = "fit"):
    from click_sim import load_letor  # the LETOR/SVMlight reader lives with the simulator

    try:
        return load_letor(path)
    except ValueError as err:
        message = str(err)
        message = message if os.fspath(path) in message else f"{path}: {message}"
        raise InputError(message + _not_letor_hint(path, command)) from None


def _not_letor_hint(path, command: str = "fit") -> str:
    """A hint when DATA is a file of another kind (a log, a feature table or a model), in the words of ``command``."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    kind = {b"PAR1": "a Parquet file", b"PK\x03\x04": "a model file (.npz)"}.get(head)
    if kind is None and Path(path).suffix.lower() in (".csv", ".parquet", ".pq", ".npz", ".json"):
        kind = f"a {Path(path).suffix.lower()[1:].upper()} file"
    if kind is None:
        return ""
    remedy = {"predict": "a feature table keyed by ids is scored with 'cltr predict MODEL --features FILE'",
              "simulate": "cltr simulate draws clicks over the documents of a LETOR/SVMlight file, and takes "
                          "no click log or feature table",
              "propensity": "DATA comes after LOG, e.g. 'cltr propensity LOG DATA', or give a raw log without "
                            "DATA (its columns named by --query/--doc/--position/--click/--session)"}.get(
        command, f"DATA comes after LOG, e.g. 'cltr {command} LOG DATA', or give a raw log without DATA and its "
                 "features with --features")
    return f" ({path} looks like {kind}, not a LETOR/SVMlight file: {remedy})"


def _load_log(path, data, raw=None):
    from .logs.files import read_click_log

    if data is None:
        return read_click_log(path, None, **_raw_columns(raw))
    return read_click_log(path, data)


#: The options naming a raw log's columns (``ClickLog.from_events``) and their defaults.
RAW_COLUMNS = {"query": "query", "doc": "doc", "position": "position", "click": "click", "session": None}


def _raw_columns(raw) -> dict:
    """The column names of a raw log from the options (defaults where not given)."""
    return {name: (raw or {}).get(name) or default for name, default in RAW_COLUMNS.items()}


def _raw_log_options(f):
    """--query/--doc/--position/--click/--session: a raw log's column names (a log without a data file)."""
    for name in reversed(RAW_COLUMNS):
        f = click.option(f"--{name}", f"raw_{name}", default=None, metavar="COL",
                         help=f"Raw log (no DATA file): the column of the {name}"
                              + (" id" if name in ("query", "doc") else "")
                              + (" page (result list) id; without it, pages are runs of rows" if name == "session"
                                 else f"  [default: {RAW_COLUMNS[name]}]"))(f)
    return f


def _features_options(f):
    f = click.option("--missing", default="error", show_default=True,
                     type=click.Choice(["error", "drop-sessions", "drop-rows"]),
                     help="With --features: shown documents the table has no features for are an error (naming a "
                          "few), or the pages that show one are dropped, or those rows only (with a warning that "
                          "counts them).")(f)
    f = click.option("--repeated", default="drop-pages", show_default=True,
                     type=click.Choice(["drop-pages", "keep-first", "error"]),
                     help="With --features: pages that show a document twice are dropped (with a warning that "
                          "counts and names them), cut to each document's first showing, or an error.")(f)
    f = click.option("--label", default=None, metavar="COL",
                     help="With --features: a column of graded relevance labels (optional).")(f)
    return click.option("--features", default=None, type=click.Path(exists=True, dir_okay=False),
                        help="Feature table (CSV or Parquet) keyed by the --query and --doc id columns, instead of "
                             "a LETOR DATA file; LOG is then a raw log, joined by id.")(f)


def _feature_table(features, label, raw):
    """``(dataset, feature column names)`` of a --features table keyed by the raw log's --query and --doc ids."""
    from .datasets import RankingDataset
    from .logs.log_integrity import read_log_frame

    columns = _raw_columns(raw)
    if _looks_like_letor(features):
        raise InputError(f"--features {features}: this is a LETOR/SVMlight file, not a feature table keyed by ids "
                         "(CSV or Parquet with the --query and --doc id columns): give it as DATA after LOG, "
                         "without --features, with a log over its rows")
    try:
        table = read_log_frame([features], ids=[columns["query"], columns["doc"]])
        dataset = RankingDataset.from_frame(table, query=columns["query"], doc=columns["doc"], label=label,
                                            name=os.path.basename(features))
    except ValueError as err:
        raise InputError(f"--features {features}: {err}") from None
    return dataset, [str(c) for c in table.columns if c not in (columns["query"], columns["doc"], label)]


def _looks_like_letor(path) -> bool:
    """Whether the file's first line reads as an SVMlight line: a label, then ``qid:`` or ``index:value``."""
    if Path(path).suffix.lower() in (".csv", ".parquet", ".pq", ".gz", ".bz2", ".xz", ".zip"):
        return False
    with open(path, "rb") as fh:
        first = fh.readline(4096).split()
    return len(first) >= 2 and b":" in first[1] and b"," not in first[0]


def _check_feature_count(rankers: dict, n_features: int, names: list, source: str) -> None:
    """InputError naming the table's feature columns when a model takes another number of features."""
    for name, ranker in rankers.items():
        wanted = getattr(ranker, "n_features_in_", None)
        if wanted is not None and wanted != n_features:
            raise InputError(f"{source}: the table has {n_features} feature columns ({', '.join(names)}) and the "
                             f"model {name} takes {wanted}: give the table the model's feature columns only, in its "
                             "order (every column but the --query and --doc ids is a feature)")


def _log_and_data(log, data, features, label, raw, repeated="drop-pages", missing="error"):
    """``(dataset, click_log, feature names or None)`` from a LETOR DATA file, or a raw LOG joined with a
    --features table."""
    if (data is None) == (features is None):
        raise InputError("give either DATA (a LETOR file) or --features FILE (a feature table keyed by ids), "
                         "not both" if data is not None else "give DATA (a LETOR file) or --features FILE")
    if data is not None:
        if any((raw or {}).values()):
            raise InputError("--query/--doc/--position/--click/--session name a raw log's columns: a raw log takes "
                             "its feature table as --features FILE, not DATA")
        dataset = _load_data(data)
        try:
            return dataset, _load_log(log, dataset), None
        except ValueError as err:
            raise InputError(f"{err}{_raw_log_hint(log, err)}") from None
    dataset, names = _feature_table(features, label, raw)
    click_log = _load_log(log, None, raw)
    try:
        return dataset, click_log.with_data(dataset, missing=missing.replace("-", "_").replace("error", "raise"),
                                            repeated=repeated.replace("-", "_").replace("error", "raise")), names
    except ValueError as err:
        message = str(err).replace("drop the repeat from the events", "use --repeated drop-pages or keep-first")
        raise InputError(f"{log} joined with --features {features}: {message}") from None


def _raw_log_hint(log, err, with_features: bool = True) -> str:
    """A hint when LOG, read over DATA's rows, lacks their columns but may be a raw log (ids, not rows)."""
    if "lacks the columns" not in str(err):
        return ""
    remedy = ("give its feature table with --features FILE instead of DATA, and its columns" if with_features
              else "give it without DATA, its columns named")
    return (f" ({log} may be a raw log, keyed by query and document ids rather than DATA's rows: {remedy} with "
            "--query/--doc/--position/--click/--session)")


def _propensity(spec):
    from .model_files.persistence import load_propensity

    try:
        return load_propensity(spec)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--propensity") from None


def _scorer(name: str, propensity):
    from .evaluation import ips_scorer, snips_scorer

    kind, _, metric = name.partition("-")
    if kind not in ("ips", "snips") or not metric:
        raise click.BadParameter(f"{name!r}: expected ips-METRIC or snips-METRIC (e.g. snips-dcg)",
                                 param_hint="--scoring")
    from .metrics import get_lambda

    try:
        get_lambda(metric)
    except (ValueError, TypeError) as err:
        raise click.BadParameter(f"{name!r}: {err}", param_hint="--scoring") from None
    return (snips_scorer if kind == "snips" else ips_scorer)(metric, propensity=propensity)


class _CountingScorer:
    """Wraps a scorer to advance a progress bar once per (candidate, fold) of a grid search."""

    def __init__(self, scorer, bar):
        self.scorer, self.bar = scorer, bar

    def __call__(self, estimator, X, y=None):
        value = self.scorer(estimator, X, y)
        total, done = getattr(self.bar, "total", None), getattr(self.bar, "n", 0)
        if total is not None and done >= total:  # the grid was extended
            self.bar.total = total + 1
        self.bar.update(1)
        return value


# ----------------------------------------------------------------------------- the command group

@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(version=__version__, prog_name="cltr")
def cli():
    """Counterfactual learning to rank from logged clicks, one command per step.

    \b
    A typical session (MQ2008-style LETOR files):
      cltr simulate train.txt --passes 20 -o train_log.parquet
      cltr simulate vali.txt --passes 20 -o vali_log.parquet
      cltr fit train_log.parquet train.txt --model svm-propdcg --C 1,10,100 --cv 3 -o model.npz
      cltr evaluate model.npz vali_log.parquet vali.txt -o report.html
      cltr predict model.npz test.txt -o scores.tsv
      cltr export model.npz --format onnx -o ranker.onnx

    Exit status 2 with a one-line message on bad input.
    """


@cli.command()
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OUTPUT_FILE,
              help="Click log to write: .parquet or .csv (.csv.gz ...).")
@click.option("--passes", default=10, show_default=True, type=click.IntRange(min=1),
              help="Sessions per query (every query is shown once per pass).")
@click.option("--eta", default=1.0, show_default=True, type=click.FloatRange(min=0),
              help="Position bias: examination probability (1/rank)^eta.")
@click.option("--eps-minus", default=0.1, show_default=True, type=click.FloatRange(0, 1),
              help="Click probability of an examined irrelevant document.")
@click.option("--eps-plus", default=1.0, show_default=True, type=click.FloatRange(0, 1),
              help="Click probability of an examined relevant document.")
@click.option("--ranker", type=click.Path(exists=True, dir_okay=False),
              help="Model file of the logging (production) ranker; default: a RankSVM trained on "
                   "--production-fraction of the queries.")
@click.option("--production-fraction", default=0.01, show_default=True, type=click.FloatRange(0, 1, min_open=True),
              help="Share of the queries the default production ranker is trained on (their full labels).")
@click.option("--max-shown", type=click.IntRange(min=1), help="Show only the top documents of each ranking.")
@click.option("--intervention", help="Randomised intervention for propensity estimation: 'swap:SHARE[:MAX_POSITION]' "
                                     "(top result swapped with a random one of positions 2..MAX_POSITION, default 10, "
                                     "in a share of the sessions) or 'shuffle:N[:SHARE]' (top N shuffled).")
@click.option("--seed", default=0, show_default=True, type=int,
              help="Random seed of the default production ranker's queries and of the clicks (same seed, same log).")
@_quiet_option
def simulate(data, output, passes, eta, eps_minus, eps_plus, ranker, production_fraction, max_shown,
             intervention, seed, quiet):
    """Simulate a click log on the LETOR/SVMlight file DATA (plain, .gz, .bz2 or .xz).

    Calls click_sim.simulate_clicks with a PositionBasedClickModel. The log's
    'doc' column is the row of DATA shown, so later commands take the same DATA.

    \b
    Example:
      cltr simulate train.txt --passes 20 --eta 1 --eps-minus 0.1 -o train_log.parquet
    """
    from click_sim import PositionBasedClickModel, simulate_clicks, train_production_ranker

    from ._progress import show_progress
    from .logs.files import _kind, write_click_log

    _kind(output)  # an unknown file type fails before the work, not after
    dataset = _load_data(data, "simulate")
    extra = {}
    if intervention is not None:
        extra["intervention"] = _parse_intervention(intervention)
    model = PositionBasedClickModel(eta=eta, eps_minus=eps_minus, eps_plus=eps_plus)
    with show_progress(_progress_setting(quiet)):
        if ranker is not None:
            from .model_files.persistence import load_model

            production = load_model(ranker)
        else:
            production = train_production_ranker(dataset, fraction=production_fraction, random_state=seed)
        log = simulate_clicks(dataset, production, model, n_passes=passes, random_state=seed, max_shown=max_shown,
                              **extra)
    write_click_log(log, output)
    _echo(quiet, f"wrote {output}: {log.n_sessions} sessions, {log.n_clicks} clicks ({model})")


def _parse_intervention(spec: str):
    """``swap:SHARE[:MAX_POSITION]`` or ``shuffle:N[:SHARE]`` as a click_sim intervention."""
    from click_sim import SwapIntervention, TopNShuffle

    kind, _, rest = spec.partition(":")
    parts = rest.split(":") if rest else []
    try:
        if kind == "swap" and 1 <= len(parts) <= 2:
            return SwapIntervention(float(parts[0]), *(int(p) for p in parts[1:]))
        if kind == "shuffle" and 1 <= len(parts) <= 2:
            return TopNShuffle(int(parts[0]), *(float(p) for p in parts[1:]))
    except (ValueError, TypeError) as err:
        raise InputError(f"--intervention {spec!r}: {err}") from None
    raise InputError(f"--intervention {spec!r}: expected 'swap:SHARE[:MAX_POSITION]' or 'shuffle:N[:SHARE]'")


@cli.command()
@click.argument("log", type=click.Path(exists=True, dir_okay=False))
@click.argument("data", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", default=None, type=OUTPUT_FILE, help="JSON file to write (default: print only).")
@click.option("--method", required=True,
              type=click.Choice(["swap", "harvest", "em", "trust_em", "pbm", "smooth", "ubm", "dbn", "dcm", "auto"]),
              help="Estimation method of estimate_propensities (smooth: moving documents' clicks, weakly "
                   "identified positions shrunk towards a fitted power law; auto: the examination estimate that "
                   "best predicts held-out clicks, smooth unless another is ahead beyond noise; the table is "
                   "printed; ubm, dbn, dcm: a "
                   "cascade click model whose examination of each result given the clicks above is the "
                   "propensity of a click there, Vardasbi et al. 2020).")
@click.option("--holdout", default=None, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Hold out this share of the pages (at random, --seed): estimate on the rest and print the "
                   "held-out click perplexity of the position-based, rank-only and document-only click models.")
@_raw_log_options
@click.option("--max-position", default=10, show_default=True, type=click.IntRange(min=2),
              help="Positions 1..MAX_POSITION are estimated.")
@click.option("--bootstrap", default=200, show_default=True, type=click.IntRange(min=0),
              help="Bootstrap replicates for the intervals (0: none).")
@click.option("--seed", default=0, show_default=True, type=int, help="Random seed of the bootstrap.")
@click.option("--monotone/--no-monotone", default=None,
              help="Make a pbm or harvest curve non-increasing (default: on for harvest, off for pbm, where "
                   "each fits held-out clicks at least as well).")
@_quiet_option
def propensity(log, data, output, method, holdout, max_position, bootstrap, seed, monotone, quiet, **raw):
    """Estimate position propensities from the click LOG (over DATA, or raw); print them, write JSON.

    Calls counterfactual_ltr.propensity.estimate_propensities(log, method, ...). Without
    DATA, LOG is a raw log (one row per shown result; ClickLog.from_events), its columns
    named by --query/--doc/--position/--click/--session. The curve is printed; the JSON
    (-o) holds the per-position values, their intervals, eta_ and support_ when the method
    gives them, the held-out perplexities with --holdout, and a "propensity" entry that
    --propensity of fit/evaluate reads.

    \b
    Examples:
      cltr propensity clicks.csv --query query --doc doc --position position --click click \\
          --session page --method pbm --holdout 0.2
      cltr simulate train.txt --passes 100 --intervention swap:0.25 -o swap_log.parquet
      cltr propensity swap_log.parquet train.txt --method swap -o propensity.json
    """
    from ._progress import show_progress
    from .propensity import estimate_propensities as estimate

    if data is not None and any(raw.values()):
        raise InputError("--query/--doc/--position/--click/--session name a raw log's columns: give them without "
                         "DATA")
    try:
        click_log = _load_log(log, None if data is None else _load_data(data, "propensity"), _unprefixed(raw))
    except ValueError as err:
        raise InputError(f"{err}{_raw_log_hint(log, err, with_features=False)}") from None
    train = held_out = click_log
    if holdout is not None:
        out = np.random.default_rng(seed).random(len(click_log)) < holdout
        if out.all() or not out.any():
            raise InputError(f"--holdout {holdout} leaves no pages on one side of the split of {len(click_log)}")
        train, held_out = click_log[np.flatnonzero(~out)], click_log[np.flatnonzero(out)]
    with show_progress(_progress_setting(quiet)):
        shape = {} if monotone is None else {"monotone": monotone}
        if shape and method not in ("pbm", "harvest"):
            raise InputError(f"--monotone/--no-monotone shape a pbm or harvest curve, not --method {method}")
        result = estimate(train, method, max_position=max_position, n_bootstrap=bootstrap, random_state=seed,
                          **shape)
    payload = _estimation_payload(result, method)
    if getattr(result, "auto_table_", None) is not None:
        _echo(quiet, "auto: held-out log-likelihood per click on documents shown at several positions, by candidate "
                     "(cross-validated over sessions; higher is better; gain over smooth in standard errors):")
        for row in result.auto_table_:
            mark = "  <- chosen" if row["candidate"] == result.auto_choice_ else ""
            score = "failed on a fold" if row["loglik_per_click"] is None else f"{row['loglik_per_click']:.5f}"
            gain = "" if row["gain_se"] is None else f"  ({row['gain_se']:+.1f} se)"
            _echo(quiet, f"  {row['candidate']:<17} {score}{gain}{mark}")
        _echo(quiet, f"auto: {result.auto_reason_}")
        payload["auto_table"] = result.auto_table_
        payload["auto_reason"] = result.auto_reason_
    for line in _curve_lines(result):
        _echo(quiet, line)
    if holdout is not None:
        payload["held_out_perplexity"] = _held_out(train, held_out, result, method)
        _echo(quiet, f"held-out click perplexity ({len(held_out)} of {len(click_log)} pages; lower is better): "
                     + ", ".join(f"{name} {value:.5f}" for name, value in payload["held_out_perplexity"].items()))
    if output is not None:
        Path(output).write_text(json.dumps(payload, indent=1))
        _echo(quiet, f"wrote {output}")


def _unprefixed(raw: dict) -> dict:
    return {name.removeprefix("raw_"): value for name, value in raw.items()}


def _curve_lines(result) -> list[str]:
    """The estimated curve, one line per position (with the interval and support where known)."""
    relative = getattr(result, "relative_", None)
    if relative is None:
        return []
    lower, upper, support = (getattr(result, name, None) for name in ("lower_", "upper_", "support_"))
    lines = [f"{getattr(result, 'method_', '')} estimate of theta_r / theta_1:"]
    for k, value in enumerate(np.asarray(relative)):
        interval = "" if lower is None else f"  [{lower[k]:.4f}, {upper[k]:.4f}]"
        pairs = "" if support is None else f"  ({support[k]} (query, document) pairs shown here and elsewhere)"
        lines.append(f"  position {k + 1:>2}: {value:.4f}{interval}{pairs}")
    rises = [int(k) + 2 for k in np.flatnonzero(np.diff(np.asarray(relative)) > 0)]
    lines.append("  non-increasing" if not rises else
                 f"  not non-increasing: it rises at position{'s' if len(rises) > 1 else ''} "
                 f"{', '.join(map(str, rises))}")
    return lines


def _held_out(train, held_out, result=None, method=None) -> dict:
    """Held-out click perplexity of the click models fitted on ``train``.

    The position-based model fitted freely, with its theta kept at the estimate's (a
    position-only estimate: how well that estimate of the bias predicts held-out clicks), and
    the rank-only and document-only baselines.
    """
    from .propensity.click_models import DocumentOnlyModel, PositionBasedModel, RankOnlyModel

    models = {"position-based": PositionBasedModel()}
    if getattr(result, "relative_", None) is not None:
        models[f"position-based with the {method} estimate"] = PositionBasedModel(propensity=result)
    if getattr(result, "click_model", None) is not None:    # a cascade propensity: its own click model
        models[method] = result.click_model
    models |= {"rank-only": RankOnlyModel(), "document-only": DocumentOnlyModel()}
    return {name: model.fit(train).perplexity(held_out) for name, model in models.items()}


def _estimation_payload(result, method) -> dict:
    """The JSON of ``cltr propensity``: the model (readable by ``--propensity``) and the estimates."""
    from .evaluation.report import json_ready
    from .model_files.persistence import propensity_to_dict

    payload = {"method": method}
    candidates = [result, getattr(result, "model_", None), getattr(result, "propensity_", None)]
    for candidate in candidates:
        if candidate is None or not (callable(candidate) or callable(getattr(candidate, "item_propensities", None))):
            continue
        try:
            payload["propensity"] = propensity_to_dict(candidate)
            break
        except (ValueError, TypeError):
            continue
    for name in ("relative_", "lower_", "upper_", "confidence_", "n_sessions_", "support_", "values_", "propensities_",
                 "intervals_", "ci_low_", "ci_high_", "stderr_", "eta_", "values", "intervals", "eta"):
        if hasattr(result, name) and not callable(getattr(result, name)):
            payload[name] = json_ready(getattr(result, name))
    if isinstance(result, dict):
        payload.update(json_ready(result))
    return payload


@cli.command()
@click.argument("log", type=click.Path(exists=True, dir_okay=False))
@click.argument("data", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OUTPUT_FILE,
              help="Model file to write (JSON + arrays in one .npz archive; opening it runs no code).")
@_features_options
@_raw_log_options
@click.option("--model", "model_name", default="svm-propdcg", show_default=True,
              type=click.Choice([*MODELS, "auto"]),
              help="Estimator (svm-rank is the naive baseline: clicks as labels); auto: every learner of --learners "
                   "tuned on the same folds, the best kept.")
@click.option("--learners", default=None,
              help="With --model auto: comma-separated learners to compare, cheapest first  [default: "
                   "svm-rank,svm-proprank,svm-propdcg,gbdt-propdcg (gbdt-propdcg when LightGBM is installed); "
                   "deep on request]")
@click.option("--noise", default=0.0, show_default=True, type=click.FloatRange(min=0),
              help="With --model auto: keep the cheapest learner whose deficit to the best is within this many "
                   "standard errors (1: the one-standard-error rule, safer with few clicks and strong bias; 0: the "
                   "best mean).")
@click.option("--C", "C", default=None, help="Comma-separated grid of C (SVMs and slam)  [default: 0.1,1,10,100]; "
              f"a choice at a binding edge extends it by factors of 10, at most {MAX_GRID_EXTENSIONS} times.")
@click.option("--alpha", default=None, help="Comma-separated grid of weight decay alpha (deep only).")
@click.option("--epochs", default=50, show_default=True, type=click.IntRange(min=1), help="Epochs (deep only).")
@click.option("--hidden", default=200, show_default=True, type=click.IntRange(min=1),
              help="Hidden units of the one-layer MLP (deep only).")
@click.option("--cv", default=3, show_default=True, type=click.IntRange(min=2),
              help="Folds of GroupKFold (sessions grouped by query).")
@click.option("--scoring", default="snips-dcg", show_default=True,
              help="Selection criterion: snips-METRIC or ips-METRIC (METRIC: dcg, avg_rank or rbp).")
@click.option("--propensity", default=None,
              help="eta of the position-based model, or a JSON file of 'cltr propensity'. Default: eta = 1, "
                   "which must match how the log was collected.")
@click.option("--scale", default="none", show_default=True, type=click.Choice(list(SCALERS)),
              help="Feature preprocessor fitted on each training fold's documents (the estimators' preprocessor=).")
@click.option("--seed", default=0, show_default=True, type=int, help="Random seed (deep, gbdt-propdcg).")
@click.option("--n-estimators", "n_estimators", default=None,
              help="Comma-separated grid of trees (gbdt-propdcg only)  [default: 100,300, the recommended grid "
                   "estimators.GBDT_GRID, which also sets colsample_bytree=0.5]")
@click.option("--learning-rate", "learning_rate", default=None,
              help="Comma-separated grid of learning rates (gbdt-propdcg only)  [default: 0.1, GBDT_GRID]")
@click.option("--num-leaves", "num_leaves", default=None,
              help="Comma-separated grid of leaves per tree (gbdt-propdcg only)  [default: 7,31, GBDT_GRID]")
@click.option("--min-child-samples", "min_child_samples", default=None,
              help="Comma-separated grid of rows per leaf at least (gbdt-propdcg only)  [default: 20]")
@click.option("--objective", "objective", default=None,
              help="Comma-separated objectives to choose from: propdcg, ips_lambdarank (gbdt-propdcg only)  "
                   "[default: propdcg,ips_lambdarank, GBDT_GRID]")
@click.option("--tempering", default=None,
              help="Comma-separated strengths in [0, 1] to choose from by the same cross-validation: the click "
                   "weights of positions the estimated --propensity barely identifies moved towards the smallest "
                   "its interval supports (EstimatedPropensity.tempered)  [default: 0,0.5,1 with an estimate that "
                   "has an interval, else 0]")
@_quiet_option
def fit(log, data, output, features, label, repeated, missing, model_name, learners, noise, C, alpha, epochs, hidden,
        cv, scoring, propensity, scale, seed, tempering, quiet, **options):
    """Fit a ranker on the click LOG over DATA (or a raw LOG and --features), choosing hyper-parameters by grid search.

    Calls counterfactual_ltr.model_selection.tempered_grid_search (grid_search
    once per --tempering strength): GroupKFold(--cv) over the sessions grouped by
    query, each value scored by its IPS/SNIPS estimate on the held-out fold's
    clicks (with an estimated propensity: the improvement over the logged
    rankings that holds in all but a tenth of its replicates). A choice at an end of the grid whose score is
    still above its neighbour's extends the grid by factors of 10 (at most
    3 values) until it is interior. The best is refitted on the
    whole log; the chosen value, the grid and the cross-validated scores are
    printed and stored in the model file. A model that ranks every document
    equal (w = 0) is not written (exit status 2).

    With --features FILE instead of DATA, LOG is a raw log (columns named by
    --query/--doc/--position/--click/--session) joined with the feature table
    by (query id, document id): ClickLog.with_data(RankingDataset.from_frame(...)).

    With --model auto, every learner of --learners is tuned so, on the same
    folds (counterfactual_ltr.select_learner); the table of their best scores,
    spreads, and the best's lead over each with its standard error over the
    log's queries is printed and stored, and the best is refitted (the table
    says when a cheaper learner is within one standard error of it).

    \b
    Examples:
      cltr fit train_log.parquet train.txt --model svm-propdcg --C 0.1,1,10 --cv 3 \\
          --scoring snips-dcg -o model.npz
      cltr fit train_log.parquet train.txt --model auto -o model.npz
      cltr fit clicks.csv --features features.csv --session page --propensity pbm.json -o model.npz
    """
    from ._progress import progress, show_progress
    from .model_selection import selection_lines, tempered_grid_search
    from .model_files.persistence import save_model

    raw = _unprefixed({k: v for k, v in options.items() if k.startswith("raw_")})
    tree_grid = {k: v for k, v in options.items() if not k.startswith("raw_")}
    prop = _propensity(propensity)
    scorer = _scorer(scoring, prop)
    if model_name == "auto":
        candidates = _learner_candidates(learners, C, alpha, epochs, hidden, prop, scale, seed, tree_grid)
        strengths = _tempering_values(tempering, prop, model_name)
        dataset, click_log, _ = _log_and_data(log, data, features, label, raw, repeated, missing)
        return _fit_auto(candidates, click_log, cv, scorer, scoring, strengths, output, quiet, dataset, noise)
    if learners is not None or noise:
        raise click.BadParameter("--learners and --noise are for --model auto",
                                 param_hint="--learners" if learners is not None else "--noise")
    estimator, grid = _make_estimator(model_name, C, alpha, epochs, hidden, prop, scale, seed, tree_grid)
    strengths = _tempering_values(tempering, prop, model_name)
    dataset, click_log, _ = _log_and_data(log, data, features, label, raw, repeated, missing)
    if len(grid) > 1:
        return _fit_tree_grid(estimator, grid, click_log, cv, scorer, scoring, model_name, output, quiet, dataset,
                              strengths)
    (parameter, values), = grid.items()
    with show_progress(_progress_setting(quiet)):
        bar = progress(total=len(values) * cv * len(strengths), desc=f"grid search {model_name}", unit="fit")
        try:
            model = tempered_grid_search(estimator, click_log, parameter, values, strengths=strengths, cv=cv,
                                         scoring=_CountingScorer(scorer, bar), scoring_name=scoring, extend=True,
                                         max_extensions=MAX_GRID_EXTENSIONS)
        finally:
            bar.close()
    _echo_tempering(model.selection_, quiet)
    record = model.selection_
    if _ranks_everything_equal(model, dataset):
        raise InputError(_degenerate_message(model, model_name, record))
    save_model(model, output)
    grown = f"; grid extended by {', '.join(f'{v:g}' for v in record['extended'])}" if record["extended"] else ""
    _echo(quiet, f"chose {parameter}={record['chosen']:g} (cross-validated {scoring} {record['best_score']:.5f}"
                 f"{grown}); wrote {output}")
    for line in selection_lines(record):
        _echo(quiet, line)


def _tempering_values(text, prop, model_name) -> list:
    """The strengths of ``--tempering``: given, or ``TEMPERING`` for an estimate with an interval, else 0."""
    from .model_selection import TEMPERING
    from .propensity import EstimatedPropensity

    estimated = isinstance(prop, EstimatedPropensity) and prop.upper_ is not None
    if text is None:
        return list(TEMPERING) if estimated and model_name != "svm-rank" else [0.0]
    values = _floats(text, "--tempering")
    if any(not 0 <= v <= 1 for v in values):
        raise click.BadParameter("strengths must lie in [0, 1]", param_hint="--tempering")
    if any(v > 0 for v in values) and (model_name == "svm-rank" or not estimated):
        raise click.BadParameter("tempering moves an estimated --propensity towards its interval's upper end: give "
                                 "a propensity file of 'cltr propensity' with --bootstrap > 0 (and a propensity "
                                 "model, not svm-rank)", param_hint="--tempering")
    return sorted(set(values))


def _echo_tempering(record, quiet) -> None:
    """The tempering strengths' best scores, the choice marked (when more than one was tried)."""
    tempering = record.get("tempering")
    if tempering:
        _echo(quiet, "tempering of the propensity's weakly identified positions (best cross-validated score each): "
                     + ", ".join(f"{v:g}: {sc:.5f}{' <- chosen' if v == tempering['chosen'] else ''}"
                                 for v, sc in zip(tempering["strengths"], tempering["best_scores"])))


def _fit_tree_grid(estimator, grid, click_log, cv, scorer, scoring, model_name, output, quiet, dataset,
                   strengths=(0.0,)):
    """``cltr fit`` over a grid of several parameters (the tree options): ``param_grid_search``, its table printed
    and stored as the model's ``selection_``, binding edges warned with values the options accept (no extension)."""
    from ._progress import progress, show_progress
    from .model_selection import param_grid_search, selection_lines
    from .model_files.persistence import save_model

    n_fits = int(np.prod([len(v) for v in grid.values()])) * cv * len(strengths)
    least = {name: low for name, whole, low in TREE_OPTIONS.values() if whole}
    with show_progress(_progress_setting(quiet)):
        bar = progress(total=n_fits, desc=f"grid search {model_name}", unit="fit")
        try:
            model = param_grid_search(estimator, click_log, grid, cv=cv, scoring=_CountingScorer(scorer, bar),
                                      scoring_name=scoring, strengths=strengths, limits=least)
        finally:
            bar.close()
    record = model.selection_
    chosen = ", ".join(f"{k}={_shown(v)}" for k, v in zip(record["parameters"], record["chosen"]))
    if _ranks_everything_equal(model, dataset):
        raise InputError(_degenerate_tree_message(model, grid, chosen))
    _echo_tempering(record, quiet)
    save_model(model, output)
    _echo(quiet, f"chose {chosen} (cross-validated {scoring} {record['best_score']:.5f}); wrote {output}")
    for line in selection_lines(record):
        _echo(quiet, line)


def _learner_candidates(learners, C, alpha, epochs, hidden, prop, scale, seed, tree_grid) -> dict:
    """``{learner: (estimator, grid)}`` of ``--model auto``: each learner takes the options that are its own."""
    from .estimators.gbdt import lightgbm_or_raise
    from .learner_choice import LEARNER_CLASSES, LEARNERS

    names = _choices(learners, "--learners", list(LEARNER_CLASSES)) if learners is not None else list(LEARNERS)
    if learners is None:
        try:
            lightgbm_or_raise()
        except ImportError:                 # the default compares the learners this installation has
            names.remove("gbdt-propdcg")
    given = {"--C": C, "--alpha": alpha, **{"--" + k.replace("_", "-"): v for k, v in tree_grid.items()}}
    owners = {"--C": ("svm-rank", "svm-proprank", "svm-propdcg"), "--alpha": ("deep",)}
    for option, value in given.items():
        if value is not None and not set(owners.get(option, ("gbdt-propdcg",))) & set(names):
            raise click.BadParameter(f"none of the learners ({', '.join(names)}) takes it", param_hint=option)
    out = {}
    for name in (n for n in LEARNER_CLASSES if n in names):   # cheapest first, whatever the order given
        own = dict(C=C if name.startswith("svm") else None, alpha=alpha if name == "deep" else None,
                   tree_grid=tree_grid if name == "gbdt-propdcg" else None)
        out[name] = _make_estimator(name, own["C"], own["alpha"], epochs, hidden, prop, scale, seed, own["tree_grid"])
    return out


def _fit_auto(candidates, click_log, cv, scorer, scoring, strengths, output, quiet, dataset, noise=0.0):
    """``cltr fit --model auto``: select_learner over the candidates, its table printed, the choice written."""
    from ._progress import progress, show_progress
    from .learner_choice import learner_lines, select_learner
    from .model_files.persistence import save_model
    from .model_selection import selection_lines

    n_fits = sum(int(np.prod([len(v) for v in grid.values()])) * cv * (1 if name == "svm-rank" else len(strengths))
                 for name, (_, grid) in candidates.items())
    with show_progress(_progress_setting(quiet)):
        bar = progress(total=n_fits, desc="choosing the learner", unit="fit")
        counting = _CountingScorer(scorer, bar)
        try:
            model = select_learner(click_log, candidates, cv=cv, scoring=scorer, scoring_name=scoring,
                                   strengths=strengths, noise=noise, extend=True, max_extensions=MAX_GRID_EXTENSIONS,
                                   scoring_for=lambda name: counting)
        finally:
            bar.close()
    record = model.selection_
    chosen = record["learners"]["chosen"]
    if _ranks_everything_equal(model, dataset):
        if "parameters" in record:
            raise InputError(_degenerate_tree_message(model, candidates[chosen][1], record["learners"]["chosen_params"]
                                                      [record["learners"]["names"].index(chosen)]))
        raise InputError(_degenerate_message(model, chosen, record))
    save_model(model, output)
    _echo(quiet, f"compared {len(record['learners']['names'])} learners by cross-validated {scoring}:")
    for line in learner_lines(record):
        _echo(quiet, line)
    _echo_tempering(record, quiet)
    _echo(quiet, f"chose {chosen} ({record['learners']['chosen_params'][record['learners']['names'].index(chosen)]}); "
                 f"wrote {output}; its own search:")
    for line in selection_lines(record):
        _echo(quiet, line)


def _ranks_everything_equal(model, data) -> bool:
    """Whether the model gives every document of every query of ``data`` the same score (w = 0)."""
    from ._segments import segment_ids

    scores = np.asarray(model.predict(data), dtype=np.float64)
    first = scores[data.query_offsets[:-1]][segment_ids(data.query_offsets)]
    return bool(np.all(scores == first))


def _degenerate_message(model, model_name, record) -> str:
    """One line: the model ranks everything equal, why, and what to try (nothing is written)."""
    name, p = type(model).__name__, record["parameter"]
    chosen = f"{p}={record['chosen']:g}"
    tried = f"{p} in {', '.join(f'{v:g}' for v in record['grid'])}"
    if model_name == "slam":
        why = (f"w = 0 is SLAM's optimum at the chosen {chosen} (no other value scored better): its loss grows in "
               "every direction from w = 0 on these clicks; try --model svm-propdcg or svm-proprank")
    elif model_name == "deep":
        why = f"the network's output is constant at the chosen {chosen}; try a smaller --alpha or more --epochs"
    else:
        why = (f"coef_ = 0 is optimal at the chosen {chosen} (no other value scored better): the clicks do not move "
               f"the weights; try larger C values (--C {record['grid'][-1] * 10:g},{record['grid'][-1] * 100:g}) "
               "or a log with more clicks")
    return f"the fitted {name} ranks every document equal ({tried}); no model was written: {why}"


def _degenerate_tree_message(model, grid, chosen) -> str:
    """One line: the chosen trees rank everything equal, why, and what to try (nothing is written)."""
    tried = "; ".join(f"{k} in {', '.join(map(_shown, values))}" for k, values in grid.items())
    rows = model.n_train_rows_
    if 2 * int(model.min_child_samples) > rows:
        why = (f"every tree has one leaf: --min-child-samples {model.min_child_samples} is more than half the "
               f"{rows} training rows (the rows of the queries with a click), so no split is possible; try "
               f"--min-child-samples {max(1, rows // 10)} or lower")
    else:
        why = ("every tree has one leaf: no split improved the objective on these clicks; try a smaller "
               "--min-child-samples or a log with more clicks")
    return (f"the fitted {type(model).__name__} ranks every document equal (chose {chosen}; tried {tried}); "
            f"no model was written: {why}")


def _make_estimator(model_name, C, alpha, epochs, hidden, prop, scale, seed, tree_grid=None):
    from . import estimators

    cls = getattr(estimators, MODELS[model_name])
    tree_grid = {k: v for k, v in (tree_grid or {}).items() if v is not None}
    if tree_grid and model_name != "gbdt-propdcg":
        option = "--" + next(iter(tree_grid)).replace("_", "-")
        raise click.BadParameter(f"{model_name} has no {option[2:]}: tree options are for gbdt-propdcg", param_hint=option)
    params = {}
    if model_name != "svm-rank":
        params["propensity"] = prop
    if SCALERS[scale] is not None:
        import sklearn.preprocessing as pre

        params["preprocessor"] = getattr(pre, SCALERS[scale])()
    if model_name == "gbdt-propdcg":
        return _gbdt_estimator(cls, params, C, alpha, seed, tree_grid)
    if model_name == "deep":
        if C is not None:
            raise click.BadParameter("deep has no C; use --alpha", param_hint="--C")
        grid = {"alpha": _floats("1e-6" if alpha is None else alpha, "--alpha")}
        params.update(hidden_layer_sizes=(hidden,), max_epochs=epochs, random_state=seed)
    else:
        if alpha is not None:
            raise click.BadParameter(f"{model_name} has no alpha; use --C", param_hint="--alpha")
        grid = {"C": _floats("0.1,1,10,100" if C is None else C, "--C")}
    for name, values in grid.items():
        for value in values:
            if not (np.isfinite(value) and value > 0 if name == "C" else np.isfinite(value) and value >= 0):
                raise click.BadParameter(f"{value:g} is out of range ({'> 0' if name == 'C' else '>= 0'})",
                                         param_hint=f"--{name}")
    return cls(**params), grid


def _gbdt_estimator(cls, params, C, alpha, seed, tree_grid):
    """GBDTPropDCG and its grid from the tree options (``TREE_OPTIONS``; ``GBDT_GRID`` where not given)."""
    from .estimators.gbdt import GBDT_GRID, OBJECTIVES, lightgbm_or_raise

    try:
        lightgbm_or_raise()                  # a missing extra is named before any data is read
    except ImportError as err:
        raise InputError(str(err)) from None
    for name, value in (("--C", C), ("--alpha", alpha)):
        if value is not None:
            raise click.BadParameter(f"gbdt-propdcg has no {name[2:]}; use the tree options "
                                     f"({', '.join(TREE_OPTIONS)})", param_hint=name)
    estimator = cls(random_state=seed, **params)
    grid = {}
    if "objective" in tree_grid:          # given empty: refused by _choices, not taken as not given
        grid["objective"] = _choices(tree_grid["objective"], "--objective", OBJECTIVES)
    for option, (name, whole, least) in TREE_OPTIONS.items():
        given = tree_grid.get(name)
        values = _floats(given, option) if given is not None else GBDT_GRID.get(name, [estimator.get_params()[name]])
        if whole and any(v != int(v) for v in values if np.isfinite(v)):
            raise click.BadParameter(f"{given!r} must hold whole numbers", param_hint=option)
        bad = [v for v in values if not (np.isfinite(v) and (v >= least if whole else v > least))]
        if bad:
            raise click.BadParameter(f"{bad[0]:g} is out of range ({'>=' if whole else '>'} {least:g})",
                                     param_hint=option)
        grid[name] = [int(v) if whole else float(v) for v in values]
    grid.update({name: list(values) for name, values in GBDT_GRID.items() if name not in grid})
    return estimator, grid


def _load_models(paths):
    from .model_files.persistence import load_model

    models = {}
    for path in paths:
        name = Path(path).name
        name = name[: -len(".npz")] if name.endswith(".npz") else name
        if name in models:  # two files of the same name in different folders
            name = os.fspath(path)
        models[name] = load_model(path)
    return models


@cli.command()
@click.argument("paths", nargs=-1, required=True, metavar="MODELS... LOG [DATA]",
                type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OUTPUT_FILE,
              help="Report to write: .html (verdicts, figures, details), .md (Markdown) or .json (the same, with "
                   "every number).")
@_features_options
@_raw_log_options
@click.option("--baseline", default="logging", show_default=True,
              help="What each model is compared with: 'logging' (the logged rankings) or one of MODELS (its file "
                   "name without .npz).")
@click.option("--estimator", "verdict_estimator", default="snips", show_default=True,
              type=click.Choice(["snips", "ips", "clipped_ips", "dr", "policy_aware"]),
              help="Estimator of the comparisons and verdicts (the details show every estimator).")
@click.option("--metrics", default="dcg,avg_rank", show_default=True, help="Comma-separated metrics.")
@click.option("--propensity", default=None,
              help="eta of the position-based model, or a JSON file of 'cltr propensity'. Default: the one the "
                   "models were trained under (eta = 1 when they carry none).")
@click.option("--confidence", default=0.95, show_default=True, type=click.FloatRange(0, 1, min_open=True,
                                                                                        max_open=True),
              help="Level of the intervals (and of the lower bound, their lower end), Bonferroni-corrected over "
                   "the models.")
@click.option("--random-state", default=0, show_default=True, type=int,
              help="Seed of the bootstraps: the same seed gives the numbers of compare_rankers(..., random_state=SEED) "
                   "and validation_report(..., random_state=SEED).")
@click.option("--propagate-propensity/--known-propensity", default=True, show_default=True,
              help="An estimated --propensity (a file of 'cltr propensity') is re-estimated, or redrawn from its "
                   "replicates, on every resample of the queries, so the intervals include its estimation error; "
                   "--known-propensity treats it as known (the report says which).")
@_quiet_option
def evaluate(paths, output, features, label, repeated, missing, baseline, verdict_estimator, metrics, propensity,
             confidence, random_state, propagate_propensity, quiet, **raw):
    """Should a model replace the logging policy? Compare the MODELS with it on the click LOG over DATA.

    With --features FILE, the last path is a raw LOG (no DATA), joined with the
    feature table by id as in `cltr fit`.

    Calls counterfactual_ltr.evaluation.validation_report: each model's
    estimate, its paired difference to the baseline with an interval, a
    p-value and a lower confidence bound on the improvement, and a plain
    verdict per metric (Bonferroni over the models); the details show every
    estimator. The verdict lines are printed as well.

    \b
    Example:
      cltr evaluate model_a.npz model_b.npz vali_log.parquet vali.txt --baseline logging -o report.html
    """
    from .evaluation import validation_report

    need = 2 if features is not None else 3
    if len(paths) < need:
        raise click.UsageError(f"expected MODELS... LOG {'' if features is not None else 'DATA'}: at least one "
                               f"model file, the log{'' if features is not None else ' and the data file'}"
                               + ("" if features is not None else " (a raw log, keyed by ids, takes its feature "
                                  "table as --features FILE instead of DATA)"))
    models, log = paths[:-(need - 1)], paths[-(need - 1)]
    data = paths[-1] if features is None else None
    suffix = Path(output).suffix.lower()
    if suffix not in (".html", ".htm", ".md", ".json"):
        raise click.BadParameter(f"{output}: expected a .html, .md or .json file", param_hint="--output")
    metric_names = [m.strip() for m in metrics.split(",") if m.strip()]
    if not metric_names:
        raise click.BadParameter("needs at least one metric", param_hint="--metrics")
    prop = None if propensity is None else _propensity(propensity)
    rankers = _load_models(models)
    if baseline != "logging" and baseline not in rankers:
        raise click.BadParameter(f"{baseline!r} is neither 'logging' nor one of the models "
                                 f"({', '.join(rankers)})", param_hint="--baseline")
    dataset, click_log, names = _log_and_data(log, data, features, label, _unprefixed(raw), repeated, missing)
    if names is not None:
        _check_feature_count(rankers, dataset.n_features, names, f"--features {features}")
    report = validation_report(rankers, click_log, propensity=prop, metrics=tuple(metric_names),
                               confidence=confidence, baseline=baseline, verdict_estimator=verdict_estimator,
                               propensity_source=None if propensity is None else f"from --propensity {propensity}",
                               random_state=random_state, propagate_propensity=propagate_propensity)
    if suffix == ".json":
        text = json.dumps(report.to_dict(), indent=1)
    elif suffix == ".md":
        text = report.to_markdown()
    else:
        text = report.to_html()
    Path(output).write_text(text)
    _echo(quiet, f"wrote {output}: {report.content()['title']}")
    for line in report.verdict_lines():
        _echo(quiet, f"  {line}")


@cli.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.argument("data", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OUTPUT_FILE,
              help="Tab-separated file: qid, row (of DATA), score, rank (1 = top of its query); with --features: "
                   "the table's query and document ids in place of qid and row.")
@click.option("--features", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Feature table (CSV or Parquet) keyed by the --query and --doc id columns, instead of a LETOR DATA "
                   "file: every (query, document) of it is scored.")
@click.option("--query", "raw_query", default=None, metavar="COL", help="With --features: the query id column  "
                                                                        "[default: query]")
@click.option("--doc", "raw_doc", default=None, metavar="COL", help="With --features: the document id column  "
                                                                    "[default: doc]")
@_quiet_option
def predict(model, data, output, features, quiet, **raw):
    """Score every document of DATA (or of a --features table) with the saved MODEL.

    Calls load_model(MODEL).predict(data); scores are written with 17
    significant digits, so they read back exactly.

    \b
    Examples:
      cltr predict model.npz test.txt -o scores.tsv
      cltr predict model.npz --features features.csv -o scores.tsv
    """
    from ._segments import rank_within_queries
    from .ids import format_id
    from .model_files.persistence import load_model

    if (data is None) == (features is None):
        raise InputError("give either DATA (a LETOR file) or --features FILE (a feature table keyed by ids), "
                         "not both" if data is not None else "give DATA (a LETOR file) or --features FILE")
    ranker = load_model(model)
    dataset, names = (_load_data(data, "predict"), None) if data is not None else _feature_table(features, None,
                                                                                        _unprefixed(raw))
    source = data if data is not None else f"--features {features}"
    if names is not None:
        _check_feature_count({model: ranker}, dataset.n_features, names, source)
    try:
        scores = np.asarray(ranker.predict(dataset), dtype=np.float64)
    except ValueError as err:
        raise InputError(f"{source}: {err} (the model {model} takes {ranker.n_features_in_} features)") from None
    ranks = rank_within_queries(scores, dataset.query_offsets)
    with open(output, "w", encoding="utf-8") as fh:
        if features is None:
            fh.write("qid\trow\tscore\trank\n")
            for q, row, s, r in zip(dataset.qid.tolist(), range(dataset.n_docs), scores.tolist(), ranks.tolist()):
                fh.write(f"{q}\t{row}\t{s!r}\t{r}\n")
        else:
            columns = _raw_columns(_unprefixed(raw))
            fh.write(f"{columns['query']}\t{columns['doc']}\tscore\trank\n")
            queries = dataset.query_keys[dataset.query_index]
            for q, d, s, r in zip(queries.tolist(), dataset.doc_keys.tolist(), scores.tolist(), ranks.tolist()):
                fh.write(f"{q}\t{d}\t{s!r}\t{r}\n")
    _echo(quiet, f"wrote {output}: {dataset.n_docs} scores of {dataset.n_queries} queries")


def _read_feature_names(path) -> list[str]:
    """One feature name a line, in the model's column order (blank lines at the end ignored)."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except UnicodeDecodeError:
        raise InputError(f"--feature-names {path}: not a UTF-8 text file of one name a line") from None
    while lines and not lines[-1].strip():
        lines.pop()
    return [line.strip() for line in lines]


@cli.command("export")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--format", "fmt", required=True, type=click.Choice(list(EXPORT_FORMATS)),
              help="solr: Solr LTR model JSON; opensearch: the OpenSearch/Elasticsearch LTR plugin's _createmodel "
                   "body; vespa: a rank profile; onnx: an ONNX model; lightgbm: LightGBM model text (trees).")
@click.option("--feature-names", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Text file of the raw features' names, one a line in column order, as the serving stack knows "
                   "them  [default: the feature table's column names for a model fitted with --features, else "
                   "LETOR's numbers 1..n]")
@click.option("--onnx-dtype", default="float32", show_default=True, type=click.Choice(["float32", "float64"]),
              help="Element type of an ONNX model's input and output: float32 (what serving stacks feed; about "
                   "1e-5 relative on float64 features) or float64 (scores equal cltr predict to double rounding).")
@click.option("-o", "--output", required=True, type=OUTPUT_FILE, help="The file to write.")
@_quiet_option
def export(model, fmt, feature_names, onnx_dtype, output, quiet):
    """Write the saved MODEL in a serving stack's format: Solr, OpenSearch/Elasticsearch LTR, Vespa or ONNX.

    Calls counterfactual_ltr.export.write_export(load_model(MODEL), FORMAT,
    OUTPUT, feature_names=..., onnx_dtype=...). The export scores raw features as cltr predict
    does (the model's scaler is folded in); docs/guide/serving.md shows how to
    load each file into its stack and check its scores.

    \b
    Examples:
      cltr export model.npz --format onnx -o ranker.onnx
      cltr export model.npz --format onnx --onnx-dtype float64 -o ranker.onnx
      cltr export model.npz --format solr --feature-names names.txt -o ranker.json
    """
    from .export import write_export
    from .model_files.persistence import load_model

    names = _read_feature_names(feature_names) if feature_names is not None else None
    ranker = load_model(model)
    try:
        write_export(ranker, fmt, output, feature_names=names,
                     onnx_dtype=onnx_dtype if fmt == "onnx" else "float32")
    except ValueError as err:
        where = f" (--feature-names {feature_names})" if names is not None and "feature_names" in str(err) else ""
        raise InputError(f"{model}: {err}{where}") from None
    _echo(quiet, f"wrote {output}: {type(ranker).__name__} as {fmt}")


@cli.command()
@click.argument("logs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OUTPUT_FILE, help="Feature table to write (.csv or .parquet).")
@click.option("--query", "raw_query", default="query", show_default=True, metavar="COL", help="The query id column.")
@click.option("--doc", "raw_doc", default="doc", show_default=True, metavar="COL", help="The document id column.")
@click.option("--position", "raw_position", default="position", show_default=True, metavar="COL",
              help="The position column (1 = top).")
@click.option("--session", "raw_session", required=True, metavar="COL", help="The page (result list) id column.")
@_quiet_option
def features(logs, output, raw_query, raw_doc, raw_position, raw_session, quiet):
    """A feature table from raw LOGS' impressions: per (query, document), how it was shown (never its clicks).

    Calls counterfactual_ltr.logs.impression_features(*frames): log_shown (log of
    1 + impressions), page_share (share of its query's pages showing it) and
    neg_position (minus its mean position), pooled over every LOG given, keyed by
    the query and document ids: the --features table of fit, evaluate and predict.

    \b
    Example:
      cltr features train.csv test.csv --session page -o features.csv
    """
    from .logs import impression_features
    from .logs.log_integrity import read_log_frame

    columns = [raw_query, raw_doc, raw_position, raw_session]
    frames = []
    for path in logs:
        frame = read_log_frame([path], ids=[raw_query, raw_doc])
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise InputError(f"{path}: no column {', '.join(map(repr, missing))} (it has {list(frame.columns)}); "
                             "name the columns with --query/--doc/--position/--session")
        frames.append(frame)
    table = impression_features(*frames, query=raw_query, doc=raw_doc, position=raw_position, page=raw_session)
    if str(output).endswith(".parquet"):
        table.to_parquet(output, index=False)
    else:
        table.to_csv(output, index=False)
    _echo(quiet, f"wrote {output}: {len(table)} (query, document) rows from {len(logs)} log(s)")


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.option("--quick", is_flag=True, help="CI-sized run; writes under results/quick unless --out is given.")
@click.option("--out", type=click.Path(file_okay=False), help="Folder for the JSON and PNG.")
@_quiet_option
def experiments(name, quick, out, quiet):
    """Run the reproduction script NAME ('all' for every one), as python -m experiments NAME.

    \b
    Example:
      cltr experiments table3 --quick
    """
    folder = _experiments_folder()
    if folder is None:
        raise InputError("the experiment scripts are not installed: run cltr experiments from the root of a "
                         "counterfactual-ltr source checkout, or pip install counterfactual-ltr from one")
    missing = [name for name in EXPERIMENT_NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        raise InputError(f"the experiment scripts need {', '.join(missing)}: "
                         "pip install 'counterfactual-ltr[experiments]'")
    scripts = _experiment_scripts(folder)
    if name != "all" and name not in scripts:
        raise InputError(f"unknown experiment {name!r}; choose from: all, {', '.join(scripts)}")
    argv = [name] + (["--quick"] if quick else []) + (["--out", out] if out else []) + (["--quiet"] if quiet else [])
    # The scripts are a program of their own, run as ``python -m experiments`` in a child process (the
    # library never imports them), from the folder found here whatever the current directory holds.
    run = (f"import runpy, sys; sys.path.insert(0, {str(folder.parent)!r}); "
           "runpy.run_module('experiments', run_name='__main__', alter_sys=True)")
    status = subprocess.call([sys.executable, "-c", run, *argv])
    if status:
        raise click.exceptions.Exit(status)


def _experiments_folder() -> Path | None:
    """The folder of this project's ``experiments`` package (installed, or in the current directory), or None.

    Found without importing it; a package of that name without the reproduction protocol
    (``_cltr.py``) belongs to someone else and is not run.
    """
    try:
        spec = importlib.util.find_spec("experiments")
    except (ImportError, ValueError):
        spec = None
    candidates = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    candidates.append(Path.cwd() / "experiments")
    for folder in candidates:
        if (folder / "__main__.py").is_file() and (folder / "_cltr.py").is_file():
            return folder
    return None


def _experiment_scripts(folder: Path) -> list[str]:
    """The reproduction scripts of ``folder``, as ``python -m experiments`` lists them: the modules of ``papers/``.

    A flat folder (scripts beside ``__init__``, as before the papers/benchmarks split) is read as it is.
    """
    flat = [m.name for m in pkgutil.iter_modules([str(folder)]) if not m.ispkg and not m.name.startswith(("_", "bench_"))]
    papers = [m.name for m in pkgutil.iter_modules([str(folder / "papers")]) if not m.name.startswith("_")]
    return sorted(set(flat + papers))


# ----------------------------------------------------------------------------- entry point

def _one_line(text: str) -> str:
    """The message on one line, control characters (from a binary file read as text) escaped."""
    line = "; ".join(part.strip() for part in str(text).splitlines() if part.strip())
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in line)


#: Python's spelling of an option in a message -> the command line's, for every command (the join of a raw
#: log with --features) and for the command that has the option.
_SPELLINGS = {None: [(r"pass missing='drop_sessions' or 'drop_rows'", "use --missing drop-sessions or drop-rows"),
                     (r"^cv=(\d+) folds", r"--cv \1 folds"),
                     (r"with_data\(missing='(\w+)'\)", lambda m: "--missing " + _option_value(m[1])),
                     (r"missing='(\w+)'", lambda m: "--missing " + _option_value(m[1])),
                     (r"repeated='(\w+)' or '(\w+)'",
                      lambda m: f"--repeated {_option_value(m[1])} or {_option_value(m[2])}"),
                     (r"repeated='(\w+)'", lambda m: "--repeated " + _option_value(m[1])),
                     (r"the frame has no column '(.*?)' \(the (query|doc|position|click|session|label) column\)",
                      r"the file has no column '\1' (the \2 column, named by --\2 COL)")],
              "propensity": [(r"\bmax_position\b(=)?", lambda m: "--max-position" + (" " if m[1] else "")),
                             (r"\bn_bootstrap\b(=)?", lambda m: "--bootstrap" + (" " if m[1] else "")),
                             (r"\bmonotone=True\b", "--monotone"), (r"\bmonotone=False\b", "--no-monotone"),
                             (r"\brandom_state\b", "--seed")],
              "evaluate": [(r"\bpropagate_propensity=False\b", "--known-propensity"),
                           (r", or baseline=None for each ranker's estimates alone", ""),
                           (r"^pair_bootstrap=(\d+) is too few resamples", r"\1 resamples of the queries (what cltr "
                                                                           "evaluate draws) are too few"),
                           (r"; use \d+ or more, or 0 for no bootstrap interval", "; lower --confidence"),
                           (r"\brandom_state\b", "--random-state")]}


def _option_value(python_value: str) -> str:
    return "error" if python_value == "raise" else python_value.replace("_", "-")


def _cli_spelling(text: str, command) -> str:
    """``text`` (an error or a warning) with Python's spelling of options replaced by the command line's."""
    import re

    for pattern, replacement in _SPELLINGS[None] + _SPELLINGS.get(command, []):
        text = re.sub(pattern, replacement, text)
    return text


def _command(argv) -> str | None:
    """The command of ``argv`` (its first word that is not an option), or None."""
    return next((a for a in (sys.argv[1:] if argv is None else argv) if not str(a).startswith("-")), None)


def _describe(err: BaseException) -> str:
    return "out of memory" if isinstance(err, MemoryError) else type(err).__name__


def main(argv=None) -> int:
    """Run ``cltr`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status.

    Parameters
    ----------
    argv : list of str, optional
        The command's arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 2 on bad input (one line on stderr; ``cltr`` alone prints its usage), 1 when interrupted.

    Examples
    --------
    >>> main(["predict", "no/such/model.npz", "no/such/data.txt", "-o", "scores.tsv"])
    2
    """
    formatwarning = warnings.formatwarning
    command = _command(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("once")
        warnings.formatwarning = lambda *args, **kwargs: _cli_spelling(_format_warning(*args, **kwargs), command)
        try:
            status = cli.main(args=argv, prog_name="cltr", standalone_mode=False)
        except click.exceptions.Abort:
            click.echo("cltr: interrupted", err=True)
            return 1
        except click.exceptions.NoArgsIsHelpError as err:   # ``cltr`` alone: the usage, as --help shows it
            click.echo(err.format_message())
            return err.exit_code
        except click.ClickException as err:
            click.echo(f"cltr: error: {_cli_spelling(_one_line(err.format_message()), command)}", err=True)
            return 2
        except _INPUT_ERRORS as err:
            click.echo(f"cltr: error: {_cli_spelling(_one_line(err), command) or _describe(err)}", err=True)
            return 2
        finally:
            warnings.formatwarning = formatwarning
    return status if isinstance(status, int) else 0


def _format_warning(message, category, filename, lineno, line=None):
    return f"cltr: {category.__name__}: {_one_line(message)}\n"


if __name__ == "__main__":
    sys.exit(main())
