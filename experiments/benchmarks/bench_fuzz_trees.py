"""Random edits of a GBDTPropDCG booster text: refused, or loaded with finite scores, never a crash?

    python -m experiments.benchmarks.bench_fuzz_trees [--edits 3000] [--batches 6] [--seed 0]

A model file is untrusted and LightGBM's parser is not: a text cut inside the trees crashes the
process. ``GBDTPropDCG.booster_from_array`` checks the text first
(``counterfactual_ltr.estimators._booster_text``). This script fits a small model (``make_ranking``,
25 queries, 5 features, 4 trees of at most 6 leaves), then applies ``--edits`` random edits per
batch to its text (1-3 of: truncation, a character replaced, inserted, a line deleted, a line
repeated; characters from ``0-9 - . e space newline = T a b c``) and loads each edited text. Each
batch runs in a child process, so a crash is counted (with the text that caused it) instead of
ending the run. Exit status 1 when any edit crashed or loaded a model whose scores are not finite.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys

CHARS = "0123456789-.e \n=Tabc"


def _model_text():
    import warnings

    import numpy as np

    from click_sim import make_ranking, simulate_clicks
    from counterfactual_ltr.estimators import GBDTPropDCG

    data = make_ranking(n_queries=25, n_docs=(4, 9), n_features=5, random_state=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GBDTPropDCG(n_estimators=4, num_leaves=6, min_child_samples=3).fit(
            simulate_clicks(data, data.X[:, 0], n_passes=4, random_state=1))
    text = model.booster_to_array().tobytes().decode("utf-8")
    return data, text[:text.index("end of trees")] + "end of trees\n", np


def _edit(text, rng):
    for _ in range(int(rng.integers(1, 4))):
        if not text:
            break
        kind, p, c = int(rng.integers(5)), int(rng.integers(len(text))), CHARS[int(rng.integers(len(CHARS)))]
        lines = text.split("\n")
        j = int(rng.integers(len(lines)))
        text = [text[:p], text[:p] + c + text[p + 1:], "\n".join(lines[:j] + lines[j + 1:]),
                "\n".join(lines[:j] + [lines[j]] + lines[j:]), text[:p] + c + text[p:]][kind]
    return text


def _batch(seed, edits, progress):
    """Child process: edits and loads; writes each text to ``progress`` before loading it."""
    from counterfactual_ltr.estimators import GBDTPropDCG

    data, text, np = _model_text()
    rng = np.random.default_rng(seed)
    counts = {"refused": 0, "loaded": 0, "not_finite": 0}
    for _ in range(edits):
        edited = _edit(text, rng)
        progress.put(edited)
        try:
            booster = GBDTPropDCG.booster_from_array(np.frombuffer(edited.encode("utf-8"), dtype=np.uint8), 5)
        except ValueError:
            counts["refused"] += 1
            continue
        finite = bool(np.all(np.isfinite(booster.predict(data.X))))
        counts["loaded" if finite else "not_finite"] += 1
    progress.put(counts)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--edits", type=int, default=3000, help="edits per batch")
    p.add_argument("--batches", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    total = {"refused": 0, "loaded": 0, "not_finite": 0, "crashed": 0}
    crashes = []
    ctx = mp.get_context("spawn")
    for b in range(args.batches):
        queue = ctx.Queue()
        child = ctx.Process(target=_batch, args=(args.seed * 1000 + b, args.edits, queue))
        child.start()
        last, counts = None, None
        while counts is None:
            try:
                item = queue.get(timeout=5)
            except Exception:                       # queue.Empty: is the child still alive?
                if not child.is_alive():
                    total["crashed"] += 1
                    crashes.append({"batch": b, "exit": child.exitcode, "text": last})
                    break
                continue
            if isinstance(item, dict):
                counts = item
            else:
                last = item
        child.join()
        for k, v in (counts or {}).items():
            total[k] += v
        print(f"batch {b}: {counts if counts else f'crashed (exit {child.exitcode})'}", flush=True)
    print(json.dumps(total))
    for c in crashes:
        print(f"crash in batch {c['batch']} (exit {c['exit']}) on the text:\n{c['text']}")
    return {"total": total, "crashes": crashes}


if __name__ == "__main__":
    out = main()
    sys.exit(1 if out["total"]["crashed"] or out["total"]["not_finite"] else 0)
