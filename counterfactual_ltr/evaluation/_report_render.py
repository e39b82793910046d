"""The validation report's sections as text (:func:`content`), and that text as Markdown, HTML and figures.

One function builds the sections (title, log summary, per metric a verdict
table with its explanation, verdict sentences and warnings, the column
definitions, the details, the notes); the writers only lay them out, so the
three formats cannot say different things.
"""

from __future__ import annotations

import base64
import html as _html
import io

import numpy as np

from ..metrics import LOWER_IS_BETTER
from .compare import value_label

__all__ = ["content", "markdown", "html", "figure", "figures_png"]

_EST = {"ips": "IPS", "snips": "SNIPS", "clipped_ips": "clipped IPS", "dr": "DR", "policy_aware": "policy-aware",
        "on_policy": "on-policy", "on_policy_snips": "on-policy"}


def _num(x, signed=False) -> str:
    if x is None:
        return "-"
    if not np.isfinite(x):
        return "inf" if x > 0 else "-inf"
    x = 0.0 if abs(x) < 5e-5 else x     # no "-0.0000"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def _interval(low, high, signed=True) -> str:
    return "-" if low is None else f"[{_num(low, signed)}, {_num(high, signed)}]"


def _p(p) -> str:
    return f"{p:.2g}" if p >= 1e-4 else "< 0.0001"


def _direction(metric) -> str:
    return "lower is better" if metric in LOWER_IS_BETTER else "higher is better"


# ----------------------------------------------------------------------------- the sections


def _summary(r) -> list:
    est = _EST.get(r.verdict_estimator, r.verdict_estimator)
    pct = f"{r.confidence:.0%}"
    lines = [f"Log: {r.n_sessions:,} sessions over {r.n_queries:,} queries, {r.n_clicks:,} clicks "
             f"({r.n_clicks / max(r.n_sessions, 1):.2f} per session).",
             f"Propensity model: {r.propensity}, {r.propensity_source}.",
             f"Logging policy: {r.logger}."]
    if r.baseline is not None:
        m = len(next(iter(r.comparisons.values()), []))
        fix = f"; Bonferroni-corrected over the {m} candidates" if m > 1 else ""
        first = next((cs[0] for cs in r.comparisons.values() if cs), None)
        uncertainty = f"; {first.propensity_uncertainty}" if first is not None else ""
        lines.append(f"Verdicts: {est}, paired over the {r.n_queries:,} queries (the independent units), "
                     f"{pct} two-sided intervals, lower bounds at their ends{fix}{uncertainty}.")
    return lines


def _what_is_compared(r, metric) -> str:
    est = _EST.get(r.verdict_estimator, r.verdict_estimator)
    comps = r.comparisons[metric]
    snips = " SNIPS divides both by the same estimated number of relevant documents." \
        if r.verdict_estimator == "snips" else ""
    if r.baseline == "logging policy" and comps[0].value == "clicks":
        return (f"Compared: the {metric} of clicks, what an online A/B test measures. The logging policy's is "
                f"observed in the log (each click weighted by the metric at the position it was shown); each "
                f"candidate's is estimated by {est} as if it had ranked the same sessions.{snips}")
    if r.baseline == "logging policy":
        return (f"Compared: the {metric} over click-relevance (as if every document were examined). The {metric} "
                f"of clicks is the same for every ranking under {r.propensity} (rank weight times examination is "
                f"constant), so the logging policy's is estimated from its own rankings (each click weighted by "
                f"its session's propensity) and each candidate's by {est}, on the same sessions.{snips}")
    return (f"Compared: the {metric} over click-relevance (as if every document were examined), estimated by "
            f"{est} for {r.baseline} and each candidate on the same sessions.{snips}")


def _verdict_cell(c) -> str:
    """The verdict and why, in words that cannot contradict the bound beside it."""
    if c.verdict == "cannot tell":
        return "cannot tell: " + "; ".join(c.reasons)
    bound = "lower bound clears 0" if c.clears_zero else "lower bound does not clear 0"
    return f"{c.verdict} ({bound})"


def _verdict_table(r, metric) -> tuple[list, list]:
    pct = f"{r.confidence:.0%}"
    comps = r.comparisons[metric]
    label = value_label(metric, comps[0].value)
    turned = "" if comps[0].higher_is_better else " (lower is better: baseline minus candidate)"
    header = ["ranker", f"{label} ({_EST.get(r.verdict_estimator)})", f"improvement over {r.baseline}{turned}",
              f"{pct} CI", "p-value", "lower bound on improvement", "verdict"]
    base = comps[0].baseline_estimate
    rows = [[f"{r.baseline} (baseline)", _num(base.value), "-", "-", "-", "-", "baseline"]]
    for c in comps:
        name = f"{c.candidate} (see warnings)" if c.candidate in r.ranker_warnings else c.candidate
        rows.append([name, _num(c.candidate_estimate.value), _num(c.improvement, True),
                     _interval(*c.improvement_interval), _p(c.p_value), _num(c.lower_bound, True), _verdict_cell(c)])
    return header, rows


def _verdict_definitions(r) -> list:
    pct = f"{r.confidence:.0%}"
    m = len(next(iter(r.comparisons.values()), []))
    fix = f", Bonferroni over the {m} candidates" if m > 1 else ""
    return [("ranker", "the baseline first, then each candidate"),
            ("estimate", "the value compared (see above), by the verdicts' estimator"),
            ("improvement", "candidate minus baseline on the same sessions, signed so that positive is better "
                            "(baseline minus candidate where lower is better)"),
            (f"{pct} CI", f"paired interval of the improvement: Student t over the queries{fix}"),
            ("p-value", f"two-sided, of 'no difference'{' (Bonferroni-adjusted)' if m > 1 else ''}"),
            ("lower bound", "the interval's lower end (the t bound of Thomas et al., ICML 2015, at the interval's "
                            "level): above 0 exactly when the verdict is better"),
            ("verdict", "better or worse when the interval excludes 0, else no difference found; cannot tell when "
                        "the estimate rests on what the log cannot show (too few effective clicks, metric mass on "
                        "documents never shown, one click or query carrying the weight, clicks at thinly "
                        "supported positions of an estimated propensity), whatever the interval says")]


def _paired_table(r, metric) -> tuple[list, list]:
    pct = f"{r.confidence:.0%}"
    truth = r.truth.get(metric, {})
    header = ["candidate", "difference", "std. error (paired)", "std. error (unpaired)", f"{pct} CI (t)",
              f"{pct} CI ({_BOOT_PROPAGATED if _propagated(r) else 'BCa bootstrap'})", "queries"] + (
                  ["true difference"] if truth else [])
    rows = []
    for c in r.comparisons[metric]:
        rows.append([c.candidate, _num(c.difference, True), _num(c.stderr), _num(c.unpaired_stderr),
                     _interval(c.ci_low, c.ci_high), _interval(c.boot_low, c.boot_high), f"{c.n_queries:,}"]
                    + ([_num(truth.get(c.candidate), True)] if truth else []))
    return header, rows


_PAIRED_DEFINITIONS = [
    ("std. error (paired)", "of the difference, delta method over the queries' summed session terms"),
    ("std. error (unpaired)", "what it would be with the two estimates taken as independent: pairing removes the "
                              "variation the rankers share"),
    ("CI (BCa bootstrap)", "bias-corrected and accelerated bootstrap over the queries"),
    ("true difference", "from the known relevance (simulation only)")]


def _estimates_table(r, metric) -> tuple[list, list]:
    pct = f"{r.confidence:.0%}"
    has_truth = any("true" in row[metric] for row in r.rows)
    header = ["ranker", "estimator", value_label(metric, "relevance"), f"{pct} CI (normal)", f"{pct} CI (bootstrap)", "ESS",
              "max weight share", "unshown mass", "bias bound"] + (["true"] if has_truth else []) + ["warnings"]
    lines = []
    for row in r.rows:
        for kind in r.estimators:
            e = row[metric][kind]
            line = [row["name"], _EST.get(kind, kind), _num(e.value), _interval(e.ci_low, e.ci_high, False),
                    _interval(e.boot_low, e.boot_high, False), f"{e.ess:,.0f}", f"{e.max_weight_share:.3f}",
                    f"{e.unshown_mass:.3f}", _num(e.bias_bound)]
            if has_truth:
                t = row[metric].get("true", {})
                line.append(_num(t.get("snips" if kind == "snips" else "ips")))
            tied = [w for w in r.ranker_warnings.get(row["name"], ()) if w.startswith("ranks every document equal")]
            line.append("; ".join(tied + list(e.warnings)))
            lines.append(line)
    return header, lines


def _propagated(r) -> bool:
    """Whether the verdicts' intervals carry the propensity's estimation error."""
    return any(c.stderr_known_propensity is not None for cs in r.comparisons.values() for c in cs)


def _paired_definitions(r) -> list:
    """The paired table's definitions; with a propagated propensity, what its columns then hold."""
    if not _propagated(r):
        return _PAIRED_DEFINITIONS
    changed = {"std. error (paired)": "of the difference with the propensity's estimation error: the larger of the "
                                      "delta method over the queries and the spread over resamples of the queries "
                                      "that redraw the propensity",
               "CI (BCa bootstrap)": "over the queries, the propensity redrawn on each resample"}
    return [(f"CI ({_BOOT_PROPAGATED})" if term == "CI (BCa bootstrap)" else term, changed.get(term, text))
            for term, text in _PAIRED_DEFINITIONS]


_BOOT_PROPAGATED = "percentile bootstrap, propensity redrawn"


def _estimate_definitions(r) -> list:
    """The estimates table's definitions; its intervals treat an estimated propensity as known: say so."""
    if not _propagated(r):
        return _ESTIMATE_DEFINITIONS
    known = " (the propensity treated as known: the verdicts' intervals above include its estimation error)"
    return [(term, text + known if term in ("CI (normal)", "CI (bootstrap)") else text)
            for term, text in _ESTIMATE_DEFINITIONS]


_ESTIMATE_DEFINITIONS = [
    ("estimator", "IPS; SNIPS (per relevant document); clipped IPS; DR (doubly robust); policy-aware"),
    ("over click-relevance", "the metric over click-relevance that the estimator targets (not the metric of "
                             "clicks a verdict table may compare)"),
    ("CI (normal)", "central limit over sessions (delta method for SNIPS)"),
    ("CI (bootstrap)", "percentile bootstrap over sessions"),
    ("ESS", "effective sample size of the click weights, (sum w)^2 / sum w^2"),
    ("max weight share", "the largest click weight over their sum"),
    ("unshown mass", "share of the ranker's metric mass on documents the log never showed"),
    ("bias bound", "bound on the bias clipping adds (clipped IPS), else 0"),
    ("true", "the value the estimator targets, from the known relevance (simulation only)"),
    ("warnings", "diagnostics that say not to trust the number")]


def content(r) -> dict:
    """The report's sections (see the module docstring) from a :class:`ValidationReport`."""
    n = len(r.rows)
    if r.baseline is None:
        title = f"Offline evaluation of {n} ranker{'s' if n != 1 else ''}"
    elif r.baseline == "logging policy":
        m = len(next(iter(r.comparisons.values()), []))
        title = f"Offline evaluation: {m} candidate{'s' if m != 1 else ''} against the logging policy"
    else:
        title = f"Offline evaluation: candidates against {r.baseline}"
    sections = []
    for metric in r.metrics:
        section = {"metric": metric, "direction": _direction(metric)}
        if r.comparisons.get(metric):
            header, rows = _verdict_table(r, metric)
            section.update(compared=_what_is_compared(r, metric), header=header, rows=rows,
                           verdicts=[c.summary() for c in r.comparisons[metric]])
            section["paired_header"], section["paired_rows"] = _paired_table(r, metric)
        section["estimates_header"], section["estimates_rows"] = _estimates_table(r, metric)
        sections.append(section)
    warnings = [f"{name}: {w}" for name, ws in r.ranker_warnings.items() for w in ws]
    return {"title": title, "summary": _summary(r), "metrics": sections, "warnings": warnings,
            "definitions": _verdict_definitions(r) if r.baseline is not None else [],
            "paired_definitions": _paired_definitions(r) if r.baseline is not None else [],
            "estimate_definitions": _estimate_definitions(r), "notes": list(r.notes)}


# ----------------------------------------------------------------------------- Markdown


def _md_table(header, rows) -> list:
    cell = [lambda s: str(s).replace("|", "\\|")][0]
    return (["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows])


def _md_definitions(pairs) -> list:
    return [f"* **{name}**: {text}" for name, text in pairs]


def markdown(c: dict) -> str:
    """The sections of :func:`content` as Markdown."""
    out = [f"# {c['title']}", ""] + [f"* {line}" for line in c["summary"]] + [""]
    for s in c["metrics"]:
        if "rows" not in s:
            continue
        out += [f"## {s['metric']} ({s['direction']})", "", s["compared"], ""] + _md_table(s["header"], s["rows"])
        out += [""] + [f"* {line}" for line in s["verdicts"]] + [""]
    if c["warnings"]:
        out += ["## Warnings", ""] + [f"* {w}" for w in c["warnings"]] + [""]
    if c["definitions"]:
        out += ["## How to read the verdict tables", ""] + _md_definitions(c["definitions"]) + [""]
    out += ["## Details", ""]
    for s in c["metrics"]:
        if "paired_rows" in s:
            out += [f"### Paired differences, {s['metric']}", ""] + _md_table(s["paired_header"], s["paired_rows"])
            out += [""]
        out += [f"### Every estimator, {s['metric']} ({s['direction']})", ""]
        out += _md_table(s["estimates_header"], s["estimates_rows"]) + [""]
    out += _md_definitions(c["paired_definitions"] + c["estimate_definitions"]) + [""]
    if c["notes"]:
        out += ["## Notes", ""] + [f"* {n}" for n in c["notes"]] + [""]
    out += ["(The figures are in the HTML report.)"]
    return "\n".join(out)


# ----------------------------------------------------------------------------- HTML

_CSS = """
body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;max-width:1150px;margin:20px auto;padding:0 16px;
     color:#1d1d1d;line-height:1.45;font-size:15px}
h1{font-size:1.55em;margin:.2em 0 .4em}h2{font-size:1.25em;margin:1.5em 0 .4em;border-bottom:1px solid #ddd}
h3{font-size:1.05em;margin:1.2em 0 .3em}
ul.summary{padding-left:1.2em;margin:.3em 0}p.compared{color:#333;margin:.3em 0 .5em}
table{border-collapse:collapse;margin:.4em 0 .6em}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right;
     vertical-align:top}th{background:#f2f2f2;font-weight:600}td:first-child,th:first-child{text-align:left}
td{white-space:nowrap}tr.baseline td{background:#f7f7f7;color:#444}th.text,td.text{text-align:left}
td.wrap{white-space:normal;min-width:200px}
.better{color:#0b6b20;font-weight:600}.worse{color:#b3141e;font-weight:600}.cannot-tell{color:#8a5a00;font-weight:600}
ul.verdicts{padding-left:1.2em;margin:.3em 0}ul.verdicts li{margin:.15em 0}
div.warn{background:#fff5dc;border-left:4px solid #d89b00;padding:6px 12px;margin:.8em 0}
div.warn ul{margin:.2em 0;padding-left:1.2em}img{max-width:100%;height:auto;display:block;margin:.5em 0}
dl.defs{font-size:.9em;color:#333;margin:.3em 0}dl.defs dt{font-weight:600;float:left;clear:left;
     margin-right:.4em}dl.defs dt:after{content:":"}dl.defs dd{margin:0 0 .15em 0}
div.details table{font-size:.82em}ul.verdicts{font-size:.93em;color:#333}
"""


def _esc(text) -> str:
    return _html.escape(str(text))


def _html_table(header, rows, *, text_cols=(0,), first_row_class=None, verdict_col=None) -> str:
    """A table; ``text_cols`` are left-aligned (and may wrap when they are the last), numbers right-aligned."""
    last = len(header) - 1

    def attr(j, cell=None):
        classes = ["text"] if j in text_cols else []
        if j == last and j in text_cols:
            classes.append("wrap")
        if j == verdict_col and cell is not None:
            classes += [k.replace(" ", "-") for k in ("better", "worse", "cannot tell") if str(cell).startswith(k)]
        return f' class="{" ".join(classes)}"' if classes else ""

    out = ["<table><tr>" + "".join(f"<th{attr(j)}>{_esc(h)}</th>" for j, h in enumerate(header)) + "</tr>"]
    for i, row in enumerate(rows):
        cls = f' class="{first_row_class}"' if first_row_class and i == 0 else ""
        out.append(f"<tr{cls}>" + "".join(f"<td{attr(j, c)}>{_esc(c)}</td>" for j, c in enumerate(row)) + "</tr>")
    return "\n".join(out) + "</table>"


def _html_definitions(pairs) -> str:
    return "<dl class='defs'>" + "".join(f"<dt>{_esc(a)}</dt><dd>{_esc(b)}</dd>" for a, b in pairs) + "</dl>"


def html(c: dict, images: dict | None = None) -> str:
    """The sections of :func:`content` as one HTML page; ``images``: metric -> PNG bytes (or a note string)."""
    images = images or {}
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
             "<meta name='viewport' content='width=device-width, initial-scale=1'>",
             f"<title>{_esc(c['title'])}</title><style>{_CSS}</style></head><body>",
             f"<h1>{_esc(c['title'])}</h1>",
             "<ul class='summary'>" + "".join(f"<li>{_esc(line)}</li>" for line in c["summary"]) + "</ul>"]
    if c["warnings"]:
        parts.append("<div class='warn'><strong>Warnings</strong><ul>"
                     + "".join(f"<li>{_esc(w)}</li>" for w in c["warnings"]) + "</ul></div>")
    for s in c["metrics"]:
        if "rows" not in s:
            continue
        parts += [f"<h2>{_esc(s['metric'])} ({_esc(s['direction'])})</h2>",
                  f"<p class='compared'>{_esc(s['compared'])}</p>",
                  _html_table(s["header"], s["rows"], text_cols=(0, len(s["header"]) - 1), first_row_class="baseline",
                              verdict_col=len(s["header"]) - 1),
                  "<ul class='verdicts'>" + "".join(f"<li>{_esc(v)}</li>" for v in s["verdicts"]) + "</ul>"]
        parts.append(_image(images.get(s["metric"]), s["metric"]))
    if c["definitions"]:
        parts += ["<h2>How to read the verdict tables</h2>", _html_definitions(c["definitions"])]
    parts.append("<h2>Details</h2><div class='details'>")
    for s in c["metrics"]:
        if "paired_rows" in s:
            parts += [f"<h3>Paired differences, {_esc(s['metric'])}</h3>",
                      _html_table(s["paired_header"], s["paired_rows"])]
        else:
            parts.append(_image(images.get(s["metric"]), s["metric"]))
        parts += [f"<h3>Every estimator, {_esc(s['metric'])} ({_esc(s['direction'])})</h3>",
                  _html_table(s["estimates_header"], s["estimates_rows"],
                              text_cols=(0, 1, len(s["estimates_header"]) - 1))]
    parts += [_html_definitions(c["paired_definitions"] + c["estimate_definitions"]), "</div>"]
    if c["notes"]:
        parts += ["<h2>Notes</h2><ul>" + "".join(f"<li>{_esc(n)}</li>" for n in c["notes"]) + "</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts)


def _image(png, metric) -> str:
    if png is None:
        return ""
    if isinstance(png, str):
        return f"<p><em>{_esc(png)}</em></p>"
    data = base64.b64encode(png).decode()
    return (f"<img alt='{_esc(metric)}: every ranker\\'s estimate, and each candidate\\'s improvement with its "
            f"interval' src='data:image/png;base64,{data}'>")


# ----------------------------------------------------------------------------- figures


def figures_png(r) -> dict:
    """Metric -> PNG bytes of :func:`figure` (or one note for all when matplotlib is missing)."""
    try:
        import matplotlib
    except ImportError:
        return {m: "(figure omitted: matplotlib is not installed)" for m in r.metrics}
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    for metric in r.metrics:
        fig = figure(r, metric)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
        plt.close(fig)
        out[metric] = buffer.getvalue()
    return out


def figure(r, metric):
    """Left: every ranker's estimate with its interval; right: each candidate's improvement, interval, lower bound.

    At 100 dpi the figure is 1,080 px wide: it fits a 1,200 px window.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    comps = r.comparisons.get(metric, [])
    if comps:
        names = [r.baseline] + [c.candidate for c in comps]
        est = [comps[0].baseline_estimate] + [c.candidate_estimate for c in comps]
        kind = _EST.get(r.verdict_estimator, r.verdict_estimator)
        left_title = f"{metric}{' of clicks' if comps[0].value == 'clicks' else ''} ({kind}), {_direction(metric)}"
    else:
        kind = r.verdict_estimator if r.verdict_estimator in r.estimators else r.estimators[0]
        names = [row["name"] for row in r.rows]
        est = [row[metric][kind] for row in r.rows]
        left_title = f"{metric} ({_EST.get(kind, kind)}), {_direction(metric)}"
    height = 1.3 + 0.42 * len(names)
    fig, axes = plt.subplots(1, 2 if comps else 1, figsize=(10.8, height), squeeze=False, sharey=True)
    y = np.arange(len(names))[::-1]
    ax = axes[0][0]
    values = np.array([e.value for e in est])
    err = np.array([[e.value - e.ci_low for e in est], [e.ci_high - e.value for e in est]])
    ax.errorbar(values, y, xerr=np.where(np.isfinite(err), err, 0), fmt="o", capsize=3, color="C0")
    ax.set_yticks(y, names)
    ax.set_title(left_title, fontsize=10)
    ax.set_xlabel(f"estimate with its {r.confidence:.0%} interval", fontsize=9)
    if comps:
        _improvement_panel(axes[0][1], r, comps, y[1:])
    fig.tight_layout()
    return fig


def _improvement_panel(ax, r, comps, y):
    imp = np.array([c.improvement for c in comps])
    sign = 1.0 if comps[0].higher_is_better else -1.0
    low = np.array([min(sign * c.ci_low, sign * c.ci_high) for c in comps])
    high = np.array([max(sign * c.ci_low, sign * c.ci_high) for c in comps])
    colors = ["#0b6b20" if c.verdict == "better" else "#b3141e" if c.verdict == "worse" else "0.35" for c in comps]
    for yi, v, lo, hi, col in zip(y, imp, low, high, colors):
        ax.errorbar([v], [yi], xerr=[[v - lo], [hi - v]], fmt="o", capsize=3, color=col)
    ax.plot([c.lower_bound for c in comps], y, "^", markerfacecolor="white", markeredgecolor="k", label="lower bound")
    ax.axvline(0, color="k", lw=0.8)
    ax.set_title(f"improvement over {r.baseline} (positive = better)", fontsize=10)
    ax.set_xlabel(f"paired difference, {r.confidence:.0%} interval; triangle: lower bound", fontsize=9)
