"""Click models, interventions and simulated click logs."""

from __future__ import annotations

import numpy as np

from counterfactual_ltr._progress import progress
from counterfactual_ltr._segments import (check_finite_1d, offsets_from_lengths, order_within_queries,
                                          segment_gather, segment_ids)
from counterfactual_ltr._validation import (check_int, check_optional_int, check_probability, check_random_state,
                                           check_real)
from counterfactual_ltr.logs.clicklog import ClickLog
from counterfactual_ltr.datasets import DEFAULT_RELEVANCE_THRESHOLD, RankingDataset
from counterfactual_ltr.examination.logging_policy import PlackettLucePolicy, sample_plackett_luce_orders
from counterfactual_ltr.examination.propensity_models import PositionBasedPropensity, TabularPropensity, TrustBiasPropensity

__all__ = ["PositionBasedClickModel", "SwapIntervention", "TopNShuffle", "simulate_clicks", "ranker_scores"]


def _per_position(value, name: str) -> np.ndarray:
    """A scalar or a 1-D sequence of probabilities in [0, 1], as a float64 array (scalars stay 0-d)."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {value!r}")
    arr = arr.astype(np.float64)
    if arr.ndim > 1 or (arr.ndim == 1 and arr.size == 0):
        raise ValueError(f"{name} must be a scalar or a non-empty 1-D sequence per position")
    bad = np.flatnonzero(~(np.isfinite(arr.ravel()) & (arr.ravel() >= 0) & (arr.ravel() <= 1)))
    if bad.size:
        where = "" if arr.ndim == 0 else f" (position {bad[0] + 1})"
        raise ValueError(f"{name} must lie in [0, 1], got {arr.ravel()[bad[0]]}{where}")
    return arr


def _lookup(values: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Per-position table lookup (positions beyond the table take its last value); scalars broadcast."""
    if values.ndim == 0:
        return np.full(positions.shape, float(values))
    return values[np.minimum(positions, len(values)) - 1]


class PositionBasedClickModel:
    """Position-based click model (Joachims et al. 2017), with optional trust bias (Agarwal et al., WWW 2019).

    A document at position ``r`` is examined with probability ``theta_r``:
    ``(1 / r) ** eta`` by default, or ``examination[r - 1]`` when a curve is
    given (any shape; positions beyond it take its last value). An examined
    relevant document is clicked with probability ``eps_plus_r``, an examined
    irrelevant one with ``eps_minus_r``::

        P(click | r, relevant)   = theta_r * eps_plus_r
        P(click | r, irrelevant) = theta_r * eps_minus_r

    ``eps_minus`` and ``eps_plus`` are scalars or per-position sequences; a
    per-position ``eps`` is trust bias.

    Parameters
    ----------
    eta : float >= 0, default 1.0
        Severity of the position bias, ``theta_r = (1 / r) ** eta``; used when
        ``examination`` is None.
    eps_minus : float or sequence in [0, 1], default 0.1
        Click probability of an examined irrelevant document (per position
        when a sequence).
    eps_plus : float or sequence in [0, 1], default 1.0
        Click probability of an examined relevant document (per position
        when a sequence).
    examination : sequence in (0, 1], optional
        ``theta_1 .. theta_K``; overrides ``eta``.

    Examples
    --------
    >>> model = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    >>> model.click_probability([1, 2, 4], [1, 0, 1]).tolist()
    [1.0, 0.05, 0.25]
    >>> trust = PositionBasedClickModel(examination=[1.0, 0.5], eps_minus=[0.3, 0.1], eps_plus=1.0)
    >>> trust.click_probability([1, 2, 3], [0, 0, 1]).tolist()
    [0.3, 0.05, 0.5]
    """

    def __init__(self, eta: float = 1.0, eps_minus=0.1, eps_plus=1.0, *, examination=None):
        self.eps_minus = _per_position(eps_minus, "eps_minus")
        self.eps_plus = _per_position(eps_plus, "eps_plus")
        if self.eps_minus.ndim == 0:
            self.eps_minus = float(self.eps_minus)
        if self.eps_plus.ndim == 0:
            self.eps_plus = float(self.eps_plus)
        if examination is None:
            self.eta = check_real(eta, "eta", min_value=0.0)
            self.examination = PositionBasedPropensity(self.eta)
        else:
            self.examination = TabularPropensity(examination)  # validates (0, 1]
            self.eta = None

    @property
    def has_trust_bias(self) -> bool:
        """Whether ``eps_minus`` or ``eps_plus`` varies with the position."""
        return any(np.ndim(e) == 1 and np.ptp(e) > 0 for e in (self.eps_minus, self.eps_plus))

    def examination_curve(self, max_position: int) -> np.ndarray:
        """``theta_1 .. theta_max_position``.

        Parameters
        ----------
        max_position : int >= 1
            The last position of the curve.

        Returns
        -------
        ndarray of float64, shape (max_position,)
        """
        return self.examination(np.arange(1, check_int(max_position, "max_position", min_value=1) + 1))

    def propensity_model(self):
        """The true examination model: ``PositionBasedPropensity(eta)`` or a ``TabularPropensity`` of the curve."""
        if self.eta is not None:
            return PositionBasedPropensity(self.eta)
        return TabularPropensity(self.examination.values)

    def trust_model(self, max_position: int | None = None) -> TrustBiasPropensity:
        """The true affine click model (examination and per-position eps) as a ``TrustBiasPropensity``.

        Parameters
        ----------
        max_position : int >= 1, optional
            Tabulate at least this many positions (default: as many as the
            model's curves have; later positions repeat the last value).

        Returns
        -------
        TrustBiasPropensity
        """
        K = max(np.size(self.eps_minus), np.size(self.eps_plus),
                1 if self.eta is not None else len(self.examination.values),
                1 if max_position is None else check_int(max_position, "max_position", min_value=1))
        r = np.arange(1, K + 1)
        return TrustBiasPropensity(self.examination(r), eps_plus=_lookup(np.asarray(self.eps_plus), r),
                                   eps_minus=_lookup(np.asarray(self.eps_minus), r))

    def click_probability(self, positions, relevant) -> np.ndarray:
        """``theta_r * (eps_plus_r if relevant else eps_minus_r)``, elementwise.

        Parameters
        ----------
        positions : array of int >= 1
            Positions of the shown documents (1 = top).
        relevant : array of bool or numbers, same shape
            Whether each document is relevant (non-zero = relevant).

        Returns
        -------
        ndarray of float64
            The click probability of each document.
        """
        positions = np.asarray(positions)
        relevant = np.asarray(relevant)
        if relevant.dtype.kind not in "biuf" or not np.all(np.isfinite(relevant)):
            raise ValueError("relevant must hold booleans or finite numbers (non-zero = relevant)")
        relevant = relevant.astype(bool)
        plus = _lookup(np.asarray(self.eps_plus), positions)
        minus = _lookup(np.asarray(self.eps_minus), positions)
        return self.examination(positions) * np.where(relevant, plus, minus)

    def __repr__(self) -> str:
        def show(v):
            return v if np.ndim(v) == 0 else np.asarray(v).tolist()
        exam = f"eta={self.eta}" if self.eta is not None else f"examination={self.examination.values.tolist()}"
        return f"PositionBasedClickModel({exam}, eps_minus={show(self.eps_minus)}, eps_plus={show(self.eps_plus)})"


def ranker_scores(ranker, data: RankingDataset) -> np.ndarray:
    """Scores of every row: ``ranker.predict(data.X)``, or ``ranker`` itself if it is an array.

    Parameters
    ----------
    ranker : object with ``predict``, callable, or array (n_docs,)
        A fitted ranker, a function of ``X``, or the scores themselves.
    data : RankingDataset
        The rows to score.

    Returns
    -------
    array (n_docs,) of float64

    Examples
    --------
    >>> from click_sim import make_ranking
    >>> data = make_ranking(n_queries=5, random_state=0)
    >>> bool((ranker_scores(data.X[:, 1], data) == data.X[:, 1]).all())
    True
    """
    if hasattr(ranker, "predict"):
        scores = ranker.predict(data.X)
    elif callable(ranker):
        scores = ranker(data.X)
    else:
        scores = ranker
    kind = np.asarray(scores).dtype.kind
    if kind not in "biuf":
        raise TypeError(f"ranker scores must be real numbers, got dtype {np.asarray(scores).dtype} "
                        f"from {type(ranker).__name__}")
    return check_finite_1d(np.ravel(scores) if np.ndim(scores) > 1 and np.shape(scores)[-1] == 1 else scores,
                           "ranker scores", data.n_docs)


class _Intervention:
    """A randomisation of the shown orders: ``apply`` permutes some sessions' documents and codes them."""

    def apply(self, docs, offsets, rng):
        """``(docs, codes)``: the shown rows after the intervention and each session's code.

        Parameters
        ----------
        docs : ndarray of int, shape (n_items,)
            Data-set rows shown, session after session, in position order.
        offsets : ndarray of int, shape (n_sessions + 1,)
            Items of session ``i`` are ``docs[offsets[i]:offsets[i + 1]]``.
        rng : numpy Generator
            Draws which sessions are intervened on, and how.

        Returns
        -------
        docs : ndarray of int, shape (n_items,)
            The shown rows after the intervention (a new array).
        codes : ndarray of int, shape (n_sessions,)
            Each session's ``intervention`` code (0: none).
        """
        raise NotImplementedError


class SwapIntervention(_Intervention):
    """Swap the top result with a random lower one in a share of the sessions (Joachims et al., WSDM 2017, sec. 6).

    In each session, with probability ``share``, the document at position 1
    is swapped with the one at a position ``k`` drawn uniformly from
    ``2 .. min(max_position, shown length)``. The log records ``k`` as the
    session's ``intervention`` code (0 = not intervened; one-document
    sessions are never swapped).

    The log keeps no logging policy (``log.logging_policy`` is None): the
    swaps change the chance of each document at each position, so the
    policy-aware estimator refuses the log rather than use the ranker's.
    The logger may be deterministic or a :class:`click_sim.StochasticRanker`,
    which samples a fresh ranking for every session before the swap.

    Parameters
    ----------
    share : float in (0, 1]
        Share of the sessions intervened on.
    max_position : int >= 2
        Deepest position swapped with the top one.

    Examples
    --------
    >>> SwapIntervention(0.1, max_position=10)
    SwapIntervention(share=0.1, max_position=10)
    """

    def __init__(self, share: float, max_position: int = 10):
        self.share = check_probability(share, "share", include_zero=False)
        self.max_position = check_int(max_position, "max_position", min_value=2)

    def apply(self, docs, offsets, rng):
        lengths = np.diff(offsets)
        n = len(lengths)
        chosen = rng.random(n) < self.share
        top = np.minimum(lengths, self.max_position)
        k = 2 + np.floor(rng.random(n) * (top - 1)).astype(np.int64)
        chosen &= lengths >= 2
        codes = np.where(chosen, k, 0)
        first, other = offsets[:-1][chosen], offsets[:-1][chosen] + k[chosen] - 1
        docs = docs.copy()
        docs[first], docs[other] = docs[other], docs[first]
        return docs, codes

    def __repr__(self) -> str:
        return f"SwapIntervention(share={self.share}, max_position={self.max_position})"


class TopNShuffle(_Intervention):
    """Shuffle the top ``n`` results uniformly in a share of the sessions (Wang et al., SIGIR 2016).

    The log records ``-n`` as the session's ``intervention`` code (``-m``
    for a session of ``m < n`` shown documents; 0 = not intervened).

    Parameters
    ----------
    n : int >= 2
        Number of top positions shuffled.
    share : float in (0, 1]
        Share of the sessions intervened on.

    Examples
    --------
    >>> TopNShuffle(5, share=0.2)
    TopNShuffle(n=5, share=0.2)
    """

    def __init__(self, n: int, share: float = 1.0):
        self.n = check_int(n, "n", min_value=2)
        self.share = check_probability(share, "share", include_zero=False)

    def apply(self, docs, offsets, rng):
        lengths = np.diff(offsets)
        chosen = rng.random(len(lengths)) < self.share
        session = segment_ids(offsets)
        position = np.arange(len(docs)) - offsets[session] + 1
        # Random keys in [0, 1) put the shuffled top n, in random order, ahead of the rest (keys >= 2).
        shuffled = chosen[session] & (position <= self.n)
        key = position.astype(np.float64) + 1.0
        key[shuffled] = rng.random(int(shuffled.sum()))
        order = np.lexsort((key, session))
        depth = np.minimum(self.n, lengths)
        return docs[order], np.where(chosen & (depth >= 2), -depth, 0)

    def __repr__(self) -> str:
        return f"TopNShuffle(n={self.n}, share={self.share})"


def _as_rankers(ranker) -> list:
    """A list or tuple of rankers is several loggers; anything else is one."""
    if isinstance(ranker, (list, tuple)):
        if len(ranker) == 0:
            raise ValueError("ranker is an empty list: give at least one ranker")
        return list(ranker)
    return [ranker]


def _logger_shares(shares, n_loggers: int) -> np.ndarray:
    if shares is None:
        return np.full(n_loggers, 1.0 / n_loggers)
    shares = np.asarray(shares, dtype=np.float64)
    if shares.shape != (n_loggers,):
        raise ValueError(f"shares must give one share per ranker ({n_loggers}), got shape {shares.shape}")
    if not np.all(np.isfinite(shares) & (shares >= 0)) or shares.sum() <= 0:
        raise ValueError(f"shares must be finite, >= 0 and not all 0, got {shares.tolist()}")
    return shares / shares.sum()


def _stochastic(ranker) -> bool:
    """A logger that samples a ranking per session (e.g. ``StochasticRanker``)."""
    return callable(getattr(ranker, "sample_orders", None))


def _serve(ranker, data: RankingDataset, session_query: np.ndarray, max_shown, rng) -> np.ndarray:
    """The rows one logger shows in its sessions, session after session in position order.

    A deterministic ranker shows every session of a query the same order, so
    it is computed once per query; a stochastic one (``StochasticRanker``)
    draws a Plackett-Luce ranking per session with ``rng`` (Gumbel-max over
    every session at once).
    """
    items = segment_gather(data.query_offsets, session_query)
    lengths = data.query_lengths[session_query]
    if _stochastic(ranker):
        scores = ranker.scores(data) / ranker._temperature()
        shown = items[sample_plackett_luce_orders(scores[items], offsets_from_lengths(lengths), rng)]
    else:
        order = order_within_queries(ranker_scores(ranker, data), data.query_offsets)
        shown = order[items]
    if max_shown is not None:
        position = np.arange(len(items)) - np.repeat(np.cumsum(lengths) - lengths, lengths) + 1
        shown = shown[position <= max_shown]
    return shown


def _logging_policy(rankers, data, max_shown, intervention):
    """What the policy-aware estimator needs: each row's chance of each position under the one logger.

    Kept for a single logger without interventions (a deterministic ranker is a Plackett-Luce
    policy at temperature 0); a mixture of loggers or a randomised log keeps none, so the
    policy-aware estimator refuses it rather than use wrong position probabilities.
    """
    if len(rankers) != 1 or intervention is not None:
        return None
    ranker = rankers[0]
    if _stochastic(ranker):
        return ranker.logging_policy(ranker.scores(data), max_shown)
    return PlackettLucePolicy(ranker_scores(ranker, data), 0.0, max_shown)


def _check_simulation(data, click_model, n_passes, relevance_threshold, max_shown, intervention):
    """The checked options of :func:`simulate_clicks` (the default click model filled in, ``max_shown`` capped)."""
    if not isinstance(data, RankingDataset):
        raise TypeError(f"data must be a RankingDataset, got {type(data).__name__}")
    if click_model is None:
        click_model = PositionBasedClickModel()
    if not callable(getattr(click_model, "click_probability", None)):
        raise TypeError(f"click_model must be a click model (with click_probability), got {type(click_model).__name__}")
    n_passes = check_int(n_passes, "n_passes", min_value=1)
    relevance_threshold = check_real(relevance_threshold, "relevance_threshold")
    max_shown = check_optional_int(max_shown, "max_shown", min_value=1)
    if max_shown is not None:
        max_shown = min(max_shown, int(data.query_lengths.max()))  # a huge Python int would overflow NumPy
    if intervention is not None and not hasattr(intervention, "apply"):
        raise TypeError(f"intervention must be a SwapIntervention or TopNShuffle, got {intervention!r}")
    return click_model, n_passes, relevance_threshold, max_shown


def _check_size(data, n_passes, max_shown):
    """``ValueError`` before allocating a log that cannot fit in memory."""
    shown = int(data.query_lengths.sum() if max_shown is None else np.minimum(data.query_lengths, max_shown).sum())
    if shown * n_passes > 2**40:
        # a whole-number float of 1e306 passes is an int here: format the size in floats (inf, not OverflowError)
        raise ValueError(f"n_passes={n_passes} would simulate {float(shown) * float(n_passes):.3g} shown documents; "
                         "too many for memory")


def _draw_clicks(data, docs, offsets, lengths, click_model, relevance_threshold, rng) -> np.ndarray:
    """Clicks of every shown item, drawn in chunks (the random stream does not depend on the chunk size)."""
    positions = np.arange(len(docs)) - np.repeat(offsets[:-1], lengths) + 1
    clicks = np.empty(len(docs), dtype=bool)
    chunk = 1 << 22
    for start in progress(range(0, len(docs), chunk), desc="simulating clicks", unit="chunk", leave=False):
        stop = min(start + chunk, len(docs))
        relevant = data.y[docs[start:stop]] >= relevance_threshold
        prob = click_model.click_probability(positions[start:stop], relevant)
        clicks[start:stop] = rng.random(stop - start) < prob
    return clicks


def simulate_clicks(data: RankingDataset, ranker, click_model: PositionBasedClickModel | None = None,
                    n_passes: int = 1, random_state=None, *,
                    relevance_threshold=DEFAULT_RELEVANCE_THRESHOLD, max_shown: int | None = None,
                    shares=None, intervention=None) -> ClickLog:
    """Simulate ``n_passes`` sessions of every query, ranked by ``ranker`` (or several rankers).

    Each pass shows every query once (in data-set order). The steps:

    1. each session is assigned a logger: one of the rankers, drawn with
       probabilities ``shares`` (uniform by default; no draw for one ranker);
    2. each logger produces the orders of its sessions: its documents sorted
       by its scores (ties by row order), truncated to the top ``max_shown``;
    3. ``intervention`` (:class:`SwapIntervention` or :class:`TopNShuffle`),
       if given, permutes the shown documents of a random share of sessions;
    4. clicks are drawn from ``click_model`` against the binarised relevance
       ``y >= relevance_threshold``.

    Sessions without clicks are kept (they count in IPS averages). The log
    records each session's ``logger`` (index into the ranker list) and
    ``intervention`` code. Vectorised over documents; the same
    ``random_state`` gives the same log, and with one ranker and no
    intervention the random stream is that of the single-ranker simulator.

    Parameters
    ----------
    data : RankingDataset
        The queries and documents; ``data.y`` gives the relevance clicks are drawn against.
    ranker : object with ``predict(X)``, callable, array (n_docs,), StochasticRanker, or a list of these
        The logging ranker(s): scores per data-set row (higher is shown first), or a
        :class:`~click_sim.StochasticRanker` that samples Plackett-Luce orders.
    click_model : PositionBasedClickModel, optional
        Examination and click noise (default ``eta=1, eps_minus=0.1, eps_plus=1``).
    n_passes : int >= 1, default 1
        Sessions per query.
    random_state : None, int or numpy Generator, default None
        Seed of every random choice (loggers, stochastic orders, interventions, clicks).
    relevance_threshold : float, default 1
        A document is relevant when ``y >= relevance_threshold``.
    max_shown : int >= 1, optional
        Only the top ``max_shown`` documents of each ranking are shown (and logged);
        default: the whole list.
    shares : sequence of float, optional
        Share of the sessions served by each ranker of a list (default uniform).
    intervention : SwapIntervention or TopNShuffle, optional
        Randomisation of the shown orders in a share of the sessions (for
        propensity estimation).

    Returns
    -------
    ClickLog
        The sessions, query by query within each pass, with their loggers,
        intervention codes and (one logger, no intervention) the logging policy.

    Examples
    --------
    >>> from click_sim import make_ranking
    >>> data = make_ranking(n_queries=30, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=2, random_state=0)
    >>> log.n_sessions
    60
    >>> log = simulate_clicks(data, [data.X[:, 0], data.X[:, 1]], n_passes=2, random_state=0,
    ...                       intervention=SwapIntervention(0.5))
    >>> sorted(set(log.logger.tolist())), bool((log.intervention > 0).any())
    ([0, 1], True)
    """
    click_model, n_passes, relevance_threshold, max_shown = _check_simulation(
        data, click_model, n_passes, relevance_threshold, max_shown, intervention)
    rankers = _as_rankers(ranker)
    p = _logger_shares(shares, len(rankers))
    rng = check_random_state(random_state)
    _check_size(data, n_passes, max_shown)
    session_query = np.tile(np.arange(data.n_queries), n_passes)
    n_sessions = len(session_query)
    lengths = data.query_lengths[session_query]
    if max_shown is not None:
        lengths = np.minimum(lengths, max_shown)
    offsets = offsets_from_lengths(lengths)
    # 1. which logger serves each session
    if len(rankers) == 1:
        logger = np.zeros(n_sessions, dtype=np.int64)
    else:
        logger = rng.choice(len(rankers), size=n_sessions, p=p)
    # 2. each logger produces the orders of its sessions
    docs = np.empty(int(offsets[-1]), dtype=np.int64)
    for index, one in enumerate(rankers):
        mine = np.flatnonzero(logger == index)
        if mine.size:
            docs[segment_gather(offsets, mine)] = _serve(one, data, session_query[mine], max_shown, rng)
    # 3. interventions
    codes = np.zeros(n_sessions, dtype=np.int64)
    if intervention is not None:
        docs, codes = intervention.apply(docs, offsets, rng)
    # 4. clicks
    clicks = _draw_clicks(data, docs, offsets, lengths, click_model, relevance_threshold, rng)
    return ClickLog(data, session_query, offsets, docs, clicks, logger=logger, intervention=codes,
                    logging_policy=_logging_policy(rankers, data, max_shown, intervention))
