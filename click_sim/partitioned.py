"""Simulation at scale: passes simulated in independent, seeded partitions written as Parquet.

A partition ``k`` simulates passes ``[a_k, b_k)`` with a random stream that
starts exactly where the serial :func:`simulate_clicks` would be after ``a_k``
passes (the PCG64 generator jumps ahead by the number of uniforms a pass
draws), so the union of the partitions is bit-identical to the serial log for
the same seed, whatever the number of partitions or workers. Session ids are
global (``pass * n_queries + query``), as in the serial log.
"""

from __future__ import annotations

import os

import numpy as np

from counterfactual_ltr._validation import check_int
from counterfactual_ltr.datasets import DEFAULT_RELEVANCE_THRESHOLD, RankingDataset
from counterfactual_ltr.logs.log_integrity import LOG_SUFFIXES, write_log_frame

from .clicks import PositionBasedClickModel, ranker_scores, simulate_clicks

__all__ = ["simulate_clicks_partitioned"]


def _seed_of(random_state) -> np.random.SeedSequence:
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, (np.random.Generator, np.random.RandomState)):
        raise TypeError("simulate_clicks_partitioned needs an int or SeedSequence random_state (a generator "
                        "cannot be split into reproducible partitions)")
    return np.random.SeedSequence(check_int(random_state, "random_state", min_value=0))


def _items_per_pass(data: RankingDataset, max_shown) -> int:
    lengths = data.query_lengths if max_shown is None else np.minimum(data.query_lengths, max_shown)
    return int(lengths.sum())


def _simulate_partition(data, scores, click_model, seed, first_pass, n_passes, items_per_pass, path,
                        relevance_threshold, max_shown):
    bit_generator = np.random.PCG64(seed)
    # One uniform (one 64-bit draw) per shown item and pass: jump to this partition's first pass.
    bit_generator.advance(first_pass * items_per_pass)
    log = simulate_clicks(data, scores, click_model, n_passes=n_passes, random_state=np.random.Generator(bit_generator),
                          relevance_threshold=relevance_threshold, max_shown=max_shown)
    frame = log.to_frame()
    frame["session"] += first_pass * data.n_queries
    write_log_frame(frame, path)             # page checksums and the content digest, as every log writer
    return path, len(frame)


def simulate_clicks_partitioned(data: RankingDataset, ranker, click_model: PositionBasedClickModel | None = None,
                                n_passes: int = 1, random_state=None, *, path, passes_per_partition: int = 10,
                                engine: str = "processes", n_workers: int | None = None,
                                relevance_threshold=DEFAULT_RELEVANCE_THRESHOLD,
                                max_shown: int | None = None) -> list[str]:
    """Simulate ``n_passes`` passes in partitions written to ``path/part-XXXXX.parquet``, in parallel.

    Parameters
    ----------
    data, ranker, click_model, n_passes, relevance_threshold, max_shown
        As in :func:`simulate_clicks`, for one deterministic ranker (no list of
        loggers, no stochastic ranker, no intervention); ``ranker`` is scored
        once here, so it need not be picklable.
    random_state : int or SeedSequence
        The same seed gives the same files, and the union of the files equals
        ``simulate_clicks(..., random_state=random_state).to_frame()`` exactly.
    path : str or path
        Directory to create (it must not hold Parquet files yet).
    passes_per_partition : int
        Passes per file; the last file may hold fewer.
    engine : {"processes", "dask", "serial"}
        ``"processes"``: a local process pool of ``n_workers``; ``"dask"``: tasks
        on the active ``dask.distributed`` client; ``"serial"``: in this process.
    n_workers : int >= 1, optional
        Size of the process pool of ``engine="processes"`` (default: the
        number of CPUs); ignored by the other engines.

    Returns
    -------
    list of str
        The written files, in pass order. Read them back with
        ``ClickLog.read_parquet(path, data)`` or reduce them with
        :func:`counterfactual_ltr.aggregate_clicks`.

    Examples
    --------
    >>> import tempfile
    >>> from click_sim import make_ranking, simulate_clicks
    >>> from counterfactual_ltr import ClickLog
    >>> data = make_ranking(n_queries=20, random_state=0)
    >>> out = tempfile.mkdtemp()
    >>> files = simulate_clicks_partitioned(data, data.X[:, 0], n_passes=5, random_state=1, path=out,
    ...                                     passes_per_partition=2, engine="serial")
    >>> len(files)
    3
    >>> ClickLog.read_parquet(out, data).equals(simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=1))
    True
    """
    if not isinstance(data, RankingDataset):
        raise TypeError(f"data must be a RankingDataset, got {type(data).__name__}")
    n_passes = check_int(n_passes, "n_passes", min_value=1)
    per = check_int(passes_per_partition, "passes_per_partition", min_value=1)
    if engine not in ("processes", "dask", "serial"):
        raise ValueError(f"engine must be 'processes', 'dask' or 'serial', got {engine!r}")
    if max_shown is not None:
        max_shown = check_int(max_shown, "max_shown", min_value=1)
    if isinstance(ranker, (list, tuple)) or callable(getattr(ranker, "sample_orders", None)):
        # Several loggers or a stochastic logger draw more than one uniform per shown item and pass,
        # so a partition could not jump to its passes' place in the serial stream.
        raise ValueError("simulate_clicks_partitioned takes one deterministic ranker; for several loggers or a "
                         "stochastic ranker use simulate_clicks")
    seed = _seed_of(random_state)
    # The serial simulate_clicks seeds np.random.default_rng(random_state), i.e. PCG64(SeedSequence(seed)).
    click_model = PositionBasedClickModel() if click_model is None else click_model
    scores = ranker_scores(ranker, data)
    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    if any(name.lower().endswith(LOG_SUFFIXES["parquet"]) for name in os.listdir(path)):
        raise ValueError(f"{path} already holds Parquet files: write a new partitioned log to an empty directory")
    items = _items_per_pass(data, max_shown)
    starts = list(range(0, n_passes, per))
    jobs = [(data, scores, click_model, seed, a, min(per, n_passes - a), items,
             os.path.join(path, f"part-{k:05d}.parquet"), relevance_threshold, max_shown)
            for k, a in enumerate(starts)]
    if engine == "serial":
        results = [_simulate_partition(*job) for job in jobs]
    elif engine == "processes":
        from concurrent.futures import ProcessPoolExecutor

        workers = check_int(n_workers, "n_workers", min_value=1) if n_workers is not None else os.cpu_count()
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            results = list(pool.map(_simulate_partition, *zip(*jobs)))
    else:
        from distributed import default_client

        client = default_client()
        shared = client.scatter([data, scores], broadcast=True)
        futures = [client.submit(_simulate_partition, shared[0], shared[1], *job[2:], pure=False) for job in jobs]
        results = client.gather(futures)
    return [r[0] for r in results]
