"""Single-bit corruption of click-log files: is every flip detected, or read back identical?

    python -m experiments.benchmarks.bench_log_integrity [--flips 1000] [--footer-flips 1000] [--seed 0] [--quick]

Two logs of the same simulated clicks (MQ2008 Fold1 train, 3 passes, swap interventions in 20 % of
the sessions; a synthetic ``make_ranking`` set with ``--quick`` or when MQ2008 is absent):

* ``cltr simulate ... -o log.parquet`` (``write_click_log``, what every ``cltr`` command reads with
  ``read_click_log``), and
* ``ClickLog.to_parquet`` (read with ``ClickLog.read_parquet``);

each gets ``--flips`` single-bit flips at random places of the whole file and ``--footer-flips``
in its Parquet footer (schema, offsets, statistics, the digest: outside every page checksum).
Every corrupted copy is read by the file's reader and by ``aggregate_clicks``; a read either
raises ``ValueError`` (detected), gives back exactly the written log / its aggregate (identical),
or gives something else (different). The criterion of issue 29: **different = 0** for every
writer, reader and place; the script exits with status 1 otherwise.
"""

from __future__ import annotations

import argparse
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _data(quick: bool):
    from experiments._common import load_fold, mq2008_dir

    if not quick and mq2008_dir() is not None:
        return load_fold(1)[0], mq2008_dir() / "Fold1" / "train.txt", "MQ2008 Fold1 train"
    from click_sim import make_ranking

    return make_ranking(n_queries=60, n_docs=(5, 20), random_state=0), None, "make_ranking(60 queries)"


def _write_letor(data, path: Path) -> None:
    from sklearn.datasets import dump_svmlight_file

    dump_svmlight_file(data.X, data.y, str(path), query_id=data.qid, zero_based=False)


def _classify(raw: bytes, positions, rng, target: Path, readers) -> dict:
    """Flip one random bit at each position; count the outcome of every reader."""
    counts = {name: {"detected": 0, "identical": 0, "different": 0} for name in readers}
    for where in positions:
        bad = bytearray(raw)
        bad[int(where)] ^= 1 << int(rng.integers(8))
        target.write_bytes(bytes(bad))
        for name, (read, same) in readers.items():
            try:
                back = read(target)
            except ValueError:
                counts[name]["detected"] += 1
                continue
            counts[name]["identical" if same(back) else "different"] += 1
    return counts


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flips", type=int, default=1000, help="random single-bit flips per file")
    parser.add_argument("--footer-flips", type=int, default=1000, help="flips in each file's Parquet footer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="synthetic data and 100 + 100 flips")
    args = parser.parse_args(argv)
    if args.quick:
        args.flips, args.footer_flips = min(args.flips, 100), min(args.footer_flips, 100)
    from click_sim import SwapIntervention, load_letor, simulate_clicks
    from counterfactual_ltr import ClickLog, aggregate_clicks
    from counterfactual_ltr.cli import main as cltr
    from counterfactual_ltr.logs.files import read_click_log

    data, letor, label = _data(args.quick)
    rng = np.random.default_rng(args.seed)
    results, failed = {}, False
    with tempfile.TemporaryDirectory(prefix="cltr_integrity_") as tmp:
        tmp = Path(tmp)
        if letor is None:
            letor = tmp / "data.txt"
            _write_letor(data, letor)
        data = load_letor(letor)            # the rows cltr reads: the log's doc column refers to them
        written = tmp / "cltr.parquet"
        status = cltr(["simulate", str(letor), "--passes", "3", "--intervention", "swap:0.2", "--seed",
                       str(args.seed), "-q", "-o", str(written)])
        if status != 0:
            raise SystemExit(f"cltr simulate failed with status {status}")
        cltr_log = read_click_log(written, data)
        own = tmp / "to_parquet.parquet"
        log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=args.seed,
                              intervention=SwapIntervention(0.2))
        log.to_parquet(own)
        cases = {
            "cltr simulate": (written, {
                "read_click_log": (lambda p: read_click_log(p, data), cltr_log.equals),
                "aggregate_clicks": (lambda p: aggregate_clicks(p, data), cltr_log.aggregate().equals)}),
            "to_parquet": (own, {
                "ClickLog.read_parquet": (lambda p: ClickLog.read_parquet(p, data), log.equals),
                "aggregate_clicks": (lambda p: aggregate_clicks(p, data), log.aggregate().equals)}),
        }
        print(f"{label}: logs of {cltr_log.n_items:,} and {log.n_items:,} shown rows (3 passes, swap 20 %)")
        for writer, (path, readers) in cases.items():
            raw = path.read_bytes()
            footer = struct.unpack("<i", raw[-8:-4])[0]
            places = {"anywhere": rng.integers(len(raw), size=args.flips),
                      "footer": rng.integers(len(raw) - 8 - footer, len(raw), size=args.footer_flips)}
            for place, positions in places.items():
                start = time.perf_counter()
                counts = _classify(raw, positions, rng, tmp / ("corrupt_" + path.name), readers)
                seconds = time.perf_counter() - start
                for reader, c in counts.items():
                    failed |= c["different"] > 0
                    results[f"{writer} / {place} / {reader}"] = c
                    print(f"  {writer:14s} {len(raw):>9,} B, {len(positions):5d} flips {place:8s} -> {reader:22s}: "
                          f"{c['detected']:5d} detected, {c['identical']:5d} read back identical, "
                          f"{c['different']} read back different ({seconds:.1f} s for the readers)")
    print("criterion (different = 0 everywhere):", "FAILS" if failed else "holds")
    if failed:
        sys.exit(1)
    return results


if __name__ == "__main__":
    main()
