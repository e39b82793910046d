"""A small sample of MSLR-WEB10K (web search features), fetched from a package that ships it.

The source distribution of ``rankeval`` 0.8.2 on PyPI holds ``rankeval/test/data/msn1.fold1.train.5k.txt``
and ``msn1.fold1.test.5k.txt``: the first 5,000 rows of MSLR-WEB10K Fold 1's training and test files
(43 queries each, 136 features, grades 0-4, CRLF line endings). The data set is Microsoft's (Qin and Liu,
2013); it is never committed here. :func:`load_mslr_sample` downloads the archive once (checked
against its published SHA-256), keeps the two files in a cache folder and loads them.

Features: MSLR's raw values span ten orders of magnitude (counts, BM25, PageRank, URL lengths), so
they are read through ``sign(x) * log1p(|x|)``, the usual log-scale of this set (a monotone map:
trees split alike, linear models see comparable scales).
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import urllib.request
from pathlib import Path

import numpy as np

URL = ("https://files.pythonhosted.org/packages/79/a7/436c3492eb252df3a3747fa675e5781bc7c89c56e508ecbaf3b2c79f1e54/"
       "rankeval-0.8.2.tar.gz")
SHA256 = "c7d71602ab7fe0a0281976c1f0e883cb16431f72e4e946e5fd83790449bb21a9"
MEMBERS = {"train": "rankeval-0.8.2/rankeval/test/data/msn1.fold1.train.5k.txt",
           "test": "rankeval-0.8.2/rankeval/test/data/msn1.fold1.test.5k.txt"}
SOURCE = "MSLR-WEB10K Fold 1, first 5,000 rows of train and test (from the rankeval 0.8.2 sdist on PyPI)"


def cache_dir() -> Path:
    """``$CLTR_CACHE``, else ``~/.cache/counterfactual_ltr``."""
    return Path(os.environ.get("CLTR_CACHE") or Path.home() / ".cache" / "counterfactual_ltr")


def mslr_sample_files(timeout: float = 60.0) -> dict:
    """``{"train": path, "test": path}`` of the two sample files, downloaded and checked when not cached.

    Raises
    ------
    OSError
        The archive cannot be fetched (no network) or its checksum differs.
    """
    folder = cache_dir() / "mslr-sample"
    paths = {part: folder / Path(member).name for part, member in MEMBERS.items()}
    if all(p.is_file() for p in paths.values()):
        return paths
    with urllib.request.urlopen(URL, timeout=timeout) as response:
        archive = response.read()
    digest = hashlib.sha256(archive).hexdigest()
    if digest != SHA256:
        raise OSError(f"{URL} has SHA-256 {digest}, expected {SHA256}")
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for part, member in MEMBERS.items():
            data = tar.extractfile(member).read()
            tmp = paths[part].with_suffix(".part")
            tmp.write_bytes(data)
            tmp.replace(paths[part])
    return paths


def log_scale(X):
    """``sign(x) * log1p(|x|)``, element-wise."""
    X = np.asarray(X, dtype=np.float64)
    return np.sign(X) * np.log1p(np.abs(X))


def load_mslr_sample(timeout: float = 60.0):
    """``(train, test)`` RankingDatasets of the sample, features log-scaled (see the module docstring)."""
    from click_sim import RankingDataset, load_letor

    paths = mslr_sample_files(timeout)
    out = []
    for part in ("train", "test"):
        d = load_letor(paths[part])
        out.append(RankingDataset(log_scale(d.X), d.y, d.qid, name=f"MSLR sample {part} (log-scaled)"))
    return tuple(out)


def mslr_or_exit(timeout: float = 60.0):
    """:func:`load_mslr_sample`, or status 2 with one line saying why (a script's way to stop)."""
    import sys

    try:
        return load_mslr_sample(timeout)
    except OSError as err:
        print(f"the MSLR sample could not be fetched ({err}); it comes from {URL}", file=sys.stderr)
        raise SystemExit(2) from None
