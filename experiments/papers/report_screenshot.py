"""Render a sample validation report (HTML, Markdown, JSON) and take a screenshot of it with headless Chromium.

    python -m experiments report_screenshot             # MQ2008 Fold1 when present, else synthetic data
    python -m experiments report_screenshot --readme    # also writes docs/report_screenshot.png
    python -m experiments report_screenshot --quick     # synthetic data, no screenshot

The sample is what ``cltr evaluate`` writes: a validation log of Fold1's
validation queries (20 sessions each, logged by the usual production ranker,
eta = 1, eps- = 0.1), four candidates trained on Fold1's training log (SVM
PropDCG, SVM PropRank, the naive click Ranking SVM, and batch SLAM, which
ends at w = 0 there, to show the warnings) compared with the logging policy.
The screenshot (Debian's ``chromium``; skipped with a note when it is absent,
so nothing else needs the browser) is of a 1,200 px wide window, shrunk to a
palette PNG; the report's first figure is written beside it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from experiments._common import REPO, figure_path, mq2008_dir, parser, save_results

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars")


def _data(synthetic: bool):
    from click_sim import load_letor, make_ranking

    root = None if synthetic else mq2008_dir()
    if root is None:
        data = make_ranking(n_queries=300, n_docs=(6, 30), n_features=12, random_state=0)
        return data.subset(np.arange(0, 200)), data.subset(np.arange(200, 300)), "synthetic"
    train = load_letor(root / "Fold1" / "train.txt")
    vali = load_letor(root / "Fold1" / "vali.txt", n_features=train.n_features)
    return train, vali, "MQ2008 Fold1"


def sample_report(synthetic: bool = False, seed: int = 0):
    """The sample report and a description of what it is made of."""
    from click_sim import PositionBasedClickModel, simulate_clicks, train_production_ranker
    from counterfactual_ltr.estimators import RankSVM, SLAMRanker, SVMPropDCG, SVMPropRank
    from counterfactual_ltr.evaluation import validation_report

    train, vali, name = _data(synthetic)
    clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    production = train_production_ranker(train, fraction=0.01, random_state=seed)
    train_log = simulate_clicks(train, production, clicks, n_passes=20, random_state=seed)
    vali_log = simulate_clicks(vali, production, clicks, n_passes=20, random_state=seed + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # SLAM's w = 0 warning: the report shows it
        rankers = {"svm_propdcg": SVMPropDCG(C=1000.0, propensity=1.0).fit(train_log),
                   "svm_proprank": SVMPropRank(C=0.01, propensity=1.0).fit(train_log),
                   "naive_ranksvm": RankSVM(C=1.0).fit(train_log),
                   "slam": SLAMRanker(C=1.0, propensity=1.0).fit(train_log)}
        relevance = np.where(vali.relevance() == 1, clicks.eps_plus, clicks.eps_minus)
        report = validation_report(rankers, vali_log, metrics=("dcg", "avg_rank"), true_relevance=relevance,
                                   random_state=seed)
    return report, {"data": name, "validation_sessions": vali_log.n_sessions, "rankers": list(rankers)}


def screenshot(html_path: Path, png_path: Path, width: int = 1200, height: int = 2400):
    """A PNG of the page in a ``width`` x ``height`` window with headless Chromium; None when it is not installed."""
    browser = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
                   None)
    if browser is None:
        return None
    with tempfile.TemporaryDirectory() as profile:
        command = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                   f"--screenshot={png_path}", html_path.resolve().as_uri()]
        subprocess.run(command, capture_output=True, timeout=180, check=False)
    if not png_path.exists():
        return None
    from PIL import Image

    with Image.open(png_path) as image:   # text and flat colours: a 128-colour palette loses nothing visible
        image.convert("RGB").quantize(colors=128).save(png_path, optimize=True)
    return png_path


def main(argv=None):
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--synthetic", action="store_true", help="synthetic data even when MQ2008 is present")
    p.add_argument("--readme", action="store_true", help="also write docs/report_screenshot.png")
    p.add_argument("--height", type=int, default=2400, help="height of the screenshot window in pixels")
    args = p.parse_args(argv)
    started = time.time()
    report, made_of = sample_report(synthetic=args.synthetic or args.quick)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    html_path = out / "report_sample.html"
    html_path.write_text(report.to_html())
    (out / "report_sample.md").write_text(report.to_markdown())
    (out / "report_sample.json").write_text(json.dumps(report.to_dict(), indent=1))
    if not args.no_plot:
        report.plot(figure_path("report_screenshot", out), metric="dcg")
    shot = None
    if not args.quick:
        shot = screenshot(html_path, out / "report_screenshot_page.png", height=args.height)
        print(f"screenshot: {shot}" if shot else "screenshot skipped: no chromium found (apt-get install chromium)")
        if shot and args.readme:
            shutil.copyfile(shot, REPO / "docs" / "report_screenshot.png")
            print(f"wrote {REPO / 'docs' / 'report_screenshot.png'} ({shot.stat().st_size / 1024:.0f} KB)")
    for line in report.verdict_lines():
        print(line)
    results = {"report": str(html_path), "screenshot": None if shot is None else str(shot),
               "verdicts": report.verdict_lines(), **made_of}
    path = save_results("report_screenshot", results, {"quick": args.quick, "height": args.height}, out, started)
    print(f"wrote {html_path} and {path}")
