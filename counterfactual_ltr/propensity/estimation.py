"""Propensities estimated from the click log itself, with bootstrap intervals.

:func:`estimate_propensities` turns a :class:`~counterfactual_ltr.logs.clicklog.ClickLog`
into a propensity model usable wherever ``propensity=`` is accepted. Every
method reduces the log to per-query sufficient statistics first (one pass of
``bincount`` over the shown items), and writes its estimate as a function of
per-query weights: weights of one give the estimate, multinomial weights over
queries give the bootstrap replicates (queries are resampled, since the
sessions of a query share its documents), all replicates at once.

Methods (``theta_r`` is the examination probability at position ``r``; the
position-only methods estimate ``theta_r / theta_1``):

``"swap"`` (Joachims et al., WSDM 2017, sec. 6)
    In sessions where position 1 was swapped with position ``k``, the top
    document ``A`` of the logger sits at ``k``; in sessions without
    intervention it sits at 1. With ``P(click) = theta_r c(A)``, per query
    ``E[click at k | swap k] / E[click at 1 | no swap] = theta_k / theta_1``;
    the estimate is ``sum_q (clicks at k in swap-k sessions of q) /
    sum_q (swap-k sessions of q) x (click rate at 1 of q without swap)``,
    so both sides average over the same queries.
``"harvest"`` (Agarwal et al., WSDM 2019, AllPairs)
    No randomisation: the same (query, document) is shown at different
    positions in different sessions (by several loggers, or rankings that
    drift; no logger column needed). For positions ``k != k'``, ``S_kk'`` is the set of
    (query, document) shown at both; ``c_k^kk' = sum_S w_d CTR(d at k)``, with
    ``w_d`` the harmonic mean of d's impressions at k and k' (the rates'
    precision), has expectation ``theta_k r_kk'``, ``r_kk' = sum_S w_d c(d)``
    shared by both positions. ``theta`` and ``r`` are fitted by closed-form
    Poisson estimating equations (AllPairs' model, alternating updates), with
    a weak prior (``prior_strength``) so no position is put at 0.
``"pbm"``: the position-based click model's ``theta`` (EM's fixed point, by Newton: ``_click_em``);
    ``monotone=True`` makes pbm or harvest non-increasing.
``"smooth"``: for logs where few documents move (``_smooth``): the conditional likelihood of where
    documents shown at several positions were clicked, each position shrunk towards a fitted power
    law as far as the log leaves it unidentified, with intervals that say so. ``"auto"`` picks among
    the examination estimates by how well they predict held-out clicks of moving documents (``_auto``).
``"em"`` (regression EM, Wang et al., WSDM 2018)
    ``P(click) = theta_k gamma(x)``, ``gamma`` a classifier on the
    documents' features. By default ``gamma`` is L2-penalised logistic
    regression (scikit-learn's ``LogisticRegression(C=1)`` objective with
    impression weights), and the fixed point that regression EM converges
    to is found directly: Newton's method on the joint penalised likelihood
    of ``theta`` and the logistic weights, over (document, position) counts,
    so a bootstrap replicate (warm-started at the estimate) costs a few
    Newton steps. With ``relevance_model`` (any scikit-learn classifier with
    ``sample_weight`` and ``predict_proba``) EM refits that model in every
    M-step, and every bootstrap replicate refits the whole EM: use a small
    ``n_bootstrap`` there. One logger suffices, but with a deterministic one
    position and relevance are told apart only through the relevance model's
    form (its misfit shows up in ``theta``); rankings that vary need no such luck.
``"trust_em"`` (Agarwal et al., WWW 2019)
    ``P(click | k, R) = theta_k eps+_k`` if ``R = 1`` else ``theta_k eps-_k``
    with ``R`` a latent binary relevance per (query, document), fixed across
    its sessions: a two-component mixture at each position, fitted by EM.
    Clicks identify only ``a_k = theta_k eps+_k`` and ``b_k = theta_k eps-_k``
    (hence the affine correction ``alpha = a - b``, ``beta = b``); the split
    assumes ``eps+`` independent of the position and ``max theta = 1``, or
    uses a known ``eps_plus`` option.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._validation import check_bool, check_int, check_probability, check_real
from ..logs.clicklog import ClickLog
from ..examination.propensity_models import is_session_dependent
from ._methods import _BootstrapWeights, _em, _harvest, _pbm, _swap, _trust_em
from ._smooth import _smooth
from ._results import EstimatedPropensity, EstimatedTrustBias, IdentificationWarning

__all__ = ["estimate_propensities", "reestimate", "non_increasing", "EstimatedPropensity", "EstimatedTrustBias", "IdentificationWarning",
           "METHODS"]

METHODS = ("swap", "harvest", "em", "trust_em", "pbm", "smooth")
#: The position-only methods that can be refitted on a resample of the log (all but ``"trust_em"``).
_FITS = {"swap": _swap, "harvest": _harvest, "em": _em, "pbm": _pbm, "smooth": _smooth}
#: Methods that fit a cascade click model and give a session-dependent propensity per shown result.
CASCADE_METHODS = ("ubm", "dbn", "dcm")


def _cascade(log, method, options):
    """A ``CascadePropensity`` from the click model ``method`` fitted to ``log``."""
    from .click_models import CascadePropensity, DependentClickModel, DynamicBayesianNetworkModel, UserBrowsingModel

    unknown = set(options) - {"prior_strength", "max_iter", "tol", "min_propensity"}
    if unknown:
        raise ValueError(f"{method!r} takes the options prior_strength, max_iter, tol and min_propensity, not "
                         f"{', '.join(sorted(unknown))}")
    if log.n_clicks == 0:
        raise ValueError("the click log has no clicks: no propensity can be estimated")
    cls = {"ubm": UserBrowsingModel, "dbn": DynamicBayesianNetworkModel, "dcm": DependentClickModel}[method]
    params = {k: options[k] for k in ("prior_strength", "max_iter", "tol") if k in options}
    if method == "dcm":   # a propensity is P(E_r = 1 | C_<r): EM's conditionals predict held-out clicks better
        params["method"] = "em"
    model = cls(**params).fit(log)
    return CascadePropensity(model, options.get("min_propensity", 0.01))


#: Default pseudo-impressions of the Beta prior on every attractiveness of ``"pbm"`` (see ``click_models``).
PBM_PRIOR_STRENGTH = 5.0
#: Default pseudo-pairs of ``"harvest"``'s prior on every linked position pair (clicked at the pooled rate).
HARVEST_PRIOR_STRENGTH = 1.0
#: ``"pbm"`` and ``"harvest"`` warn (``IdentificationWarning``) at a position that fewer (query, document)
#: pairs, shown there and at another position, identify.
MIN_SUPPORT = 20


# ----------------------------------------------------------------------------- entry point


def estimate_propensities(log: ClickLog, method: str, *, max_position: int = 10, n_bootstrap: int = 200,
                          random_state=None, **options):
    """Estimate the position bias (and trust bias) of a click log, with bootstrap intervals.

    Parameters
    ----------
    log : ClickLog
        The logged sessions (with interventions for ``"swap"``, several loggers for ``"harvest"``).
    method : {"swap", "harvest", "em", "trust_em", "pbm", "smooth", "ubm", "dbn", "dcm", "auto"}
        See the module docstring for what each needs ("auto": see ``_auto``; its options are
        ``n_folds`` and the shared ones): swap sessions and
        sessions without intervention; documents shown at several positions
        (several loggers, or rankings that drift); one logger and document
        features; impressions of documents over many sessions; "pbm" as
        "harvest" (no features: a log from ``ClickLog.from_events`` works).
    max_position : int >= 2
        Positions ``1..max_position`` are estimated.
    n_bootstrap : int >= 0
        Bootstrap replicates (queries resampled with replacement); 0 gives no interval.
    random_state : int, Generator or None
        Seeds the bootstrap.
    **options
        ``confidence`` (0.95), ``min_clicks`` (10: fewest clicks per position
        for an estimate with an interval), ``max_iter`` and ``tol`` of the
        iterative methods (``tol`` 1e-8, or 1e-4 for ``"em"`` with a
        ``relevance_model``), ``relevance_model`` ("em": a scikit-learn
        classifier with ``sample_weight`` and ``predict_proba`` in place of
        the built-in logistic regression),
        ``eps_plus`` ("trust_em": known eps+, scalar or per position),
        ``prior_strength`` ("pbm": pseudo-impressions of the prior on every
        attractiveness, default 5; "harvest": pseudo-pairs on every linked
        position pair, clicked at the pooled rate of the varied pairs,
        default 1, 0 for the maximum-likelihood fit), ``monotone`` ("pbm", "harvest": a
        non-increasing curve; default True for "harvest", False for "pbm", see
        ``MONOTONE_DEFAULT``), ``min_support`` ("pbm", "harvest": warn
        at a position that fewer (query, document) pairs shown there and at
        another position identify, default 20).

        ``"ubm"``, ``"dbn"``, ``"dcm"``: the click model of that name is fitted to the log
        (options ``prior_strength``, ``max_iter``, ``tol`` of the model, ``min_propensity`` of
        :class:`~counterfactual_ltr.propensity.click_models.CascadePropensity`; no bootstrap, and
        ``max_position`` and ``n_bootstrap`` are not used). ``"dcm"`` fits the DCM by EM
        (``method="em"``, not the model's closed-form default): its examination given the clicks
        above, which the propensity is, predicts held-out clicks better (``docs/click-models.md``).

    Returns
    -------
    EstimatedPropensity, EstimatedTrustBias for ``"trust_em"``, or CascadePropensity for ``"ubm"``,
    ``"dbn"``, ``"dcm"`` (one propensity per shown result given the clicks above it, Vardasbi et al. 2020)

    Warns
    -----
    IdentificationWarning
        ``"pbm"``/``"harvest"`` at positions with fewer than ``min_support``
        identifying pairs, or fewer than ``min_clicks`` clicks on them.
        ``"em"`` on a log where (nearly) every document was shown at one position only,
        as a deterministic logger shows them: the estimate then rests on the relevance
        model's form and its intervals cannot be trusted.

    Examples
    --------
    >>> import numpy as np
    >>> from click_sim import PositionBasedClickModel, SwapIntervention, make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=200, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(eta=1.0), n_passes=200,
    ...                       random_state=0, intervention=SwapIntervention(0.5, max_position=4))
    >>> model = estimate_propensities(log, "swap", max_position=4, n_bootstrap=50, random_state=0)
    >>> np.round(model.relative_, 1).tolist()   # truth: 1, 1/2, 1/3, 1/4
    [1.0, 0.5, 0.3, 0.2]
    >>> bool(np.all(model.lower_ <= model.upper_))
    True
    """
    if not isinstance(log, ClickLog):
        raise TypeError(f"log must be a ClickLog, got {type(log).__name__}")
    K = check_int(max_position, "max_position", min_value=2)
    B = check_int(n_bootstrap, "n_bootstrap", min_value=0)
    if method == "auto":
        return _auto(log, K, B, random_state, options)
    if method in CASCADE_METHODS:
        return _cascade(log, method, options)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS + CASCADE_METHODS + ('auto',)}, got {method!r}")
    opts = _check_options(method, K, options)
    _check_log_shows(log, method, K)
    estimate, n_sessions = {**_FITS, "trust_em": _trust_em}[method](log, K, opts)
    Q = log.n_queries
    present = np.bincount(log.session_query, minlength=Q) > 0
    if opts["monotone"]:
        estimate = _monotone(estimate)
    point, point_converged = _point(estimate, present)
    if not point_converged.all():
        warnings.warn(f"{method!r}: the fit on the whole log did not converge in max_iter={opts['max_iter']} steps",
                      ConvergenceWarning, stacklevel=2)
    at_cap, boot, converged = _replicates_checked(method, estimate, opts, B, Q, present, random_state)
    if method == "trust_em":
        return _trust_bias_model(point, boot, opts["confidence"], n_sessions)
    model = _propensity_model(method, point, boot, opts["confidence"], n_sessions, converged)
    return _with_provenance(model, method, K, opts, options, log, estimate, at_cap)


def _point(estimate, present):
    """The estimate on the whole log (one row) and whether its fit converged."""
    if hasattr(estimate, "point"):          # "smooth": its replicates are random draws, its point the averaged fit
        return estimate.point[None, :], np.array([estimate.point_converged])
    return estimate(present[None, :].astype(np.float64)), getattr(estimate, "converged", np.ones(1, dtype=bool))


def _replicates_of(estimate, W, rng):
    """The curves of ``estimate`` on rows of query weights ``W``, drawn with ``rng`` where its replicates draw."""
    return estimate(W, rng=rng) if hasattr(estimate, "point") else estimate(W)


def _check_log_shows(log, method: str, K: int) -> None:
    """``ValueError`` for a log that never shows position ``K`` or has no click (before any table is allocated)."""
    longest = int(log.positions.max(initial=0))
    if K > longest:
        raise ValueError(f"{method!r}: position {longest + 1} is never shown (the log's largest position is "
                         f"{longest}); lower max_position")
    if log.n_clicks == 0:
        raise ValueError("the click log has no clicks: no propensity can be estimated")


def _with_provenance(model, method, K, opts, options, log, estimate, at_cap):
    """The estimate with how it was made: support, recipe (options as given, and the shape used), log, full fit."""
    model.support_, model.pair_support_ = opts.get("support"), opts.get("pair_support")
    kept = {key: value for key, value in options.items() if key != "start"}
    if method in MONOTONE_DEFAULT:          # the shape it was made with, whatever the default later
        kept["monotone"] = opts["monotone"]
    model.recipe_ = {"method": method, "max_position": K, "options": kept}
    model.log_fingerprint_ = log_fingerprint(log)
    model._full_fit = getattr(estimate, "full_fit", None)
    model.at_cap_ = at_cap
    if hasattr(estimate, "borrowed"):       # "smooth": its fitted power law continues the table beyond K
        model.eta_, model.borrowed_ = estimate.eta, estimate.borrowed
    return model


def reestimate(estimate, log: ClickLog, query_weights) -> "EstimatedPropensity":
    """Refit an estimate's recipe on a query-weighted replicate of ``log`` (no interval).

    The method and options come from ``estimate.recipe_`` (what :func:`estimate_propensities`
    made it with); ``query_weights`` (n_queries,) are the multiplicities of ``log``'s queries in the
    replicate (a bootstrap draw, or 0/1 for a subset). ``"pbm"`` starts from the estimate's own fit
    (``estimate`` must then come from this ``log``), so a replicate costs a few Newton steps. The
    returned estimate's ``converged_`` says whether the refit converged.

    Parameters
    ----------
    estimate : EstimatedPropensity
        A result of :func:`estimate_propensities`.
    log : ClickLog
        The log it was estimated from.
    query_weights : array (log.n_queries,)
        Non-negative weights per query.

    Returns
    -------
    EstimatedPropensity

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import ClickLog
    >>> rng = np.random.default_rng(0)
    >>> docs = np.array([rng.permutation(4) for _ in range(400)]).ravel()
    >>> positions = np.tile(np.arange(1, 5), 400)
    >>> log = ClickLog.from_events({"query": np.repeat(rng.integers(0, 5, 400), 4), "doc": docs,
    ...                             "position": positions, "click": rng.random(1600) < 0.5 / positions})
    >>> est = estimate_propensities(log, "harvest", max_position=4, n_bootstrap=0, min_support=0)
    >>> same = reestimate(est, log, np.ones(log.n_queries))
    >>> bool(np.allclose(same.relative_, est.relative_))
    True
    """
    recipe = getattr(estimate, "recipe_", None)
    if recipe is None:
        raise ValueError("reestimate needs an estimate made by estimate_propensities (it has no recipe_)")
    if not isinstance(log, ClickLog):
        raise TypeError(f"log must be a ClickLog, got {type(log).__name__}")
    w = np.asarray(query_weights, dtype=np.float64)
    if w.shape != (log.n_queries,) or not np.all(np.isfinite(w) & (w >= 0)):
        raise ValueError(f"query_weights must be {log.n_queries} finite non-negative numbers (one per query of "
                         f"the log), got shape {w.shape}")
    method, K = recipe["method"], recipe["max_position"]
    if method == "trust_em":
        raise ValueError("reestimate: 'trust_em' estimates are not position-only; refit with estimate_propensities")
    opts = _check_options(method, K, dict(recipe["options"]))
    if method == "pbm" and getattr(estimate, "_full_fit", None) is not None:
        if estimate._full_fit["alpha"].shape != (log.n_rows,):
            raise ValueError("reestimate: the log is not the one the estimate was made from (its rows differ)")
        opts["start"] = estimate._full_fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentificationWarning)   # said when the estimate was made
        fit, n_sessions = _FITS[method](log, K, opts)
    if opts["monotone"]:
        fit = _monotone(fit)
    if hasattr(fit, "point_for"):           # an estimate whose replicates draw: its point on these weights
        values, converged = fit.point_for(w)
        values = values[None, :]
    else:
        values = fit(w[None, :])
        converged = bool(getattr(fit, "converged", np.ones(1, dtype=bool)).all())
    model = _propensity_model(method, values, None, opts["confidence"], n_sessions)
    model.recipe_ = recipe
    model.converged_ = converged
    return model


def _replicates_checked(method, estimate, opts, B, Q, present, random_state):
    """The bootstrap replicates, with the warnings of their convergence and (pbm) of theta at its cap."""
    at_cap = None
    if method == "pbm":
        at_cap = estimate.full_fit["theta"] >= 1.0
        capped = np.flatnonzero(at_cap[1:]) + 2
        if capped.size:
            warnings.warn(f"'pbm': theta is at its cap 1 at positions {', '.join(map(str, capped))}: the prior on "
                          "attractiveness (by placement) carries the fall of the click rate there and pushes theta up "
                          "to the bound, so the estimate reads 1 and intervals can collapse to [1, 1]; that is the "
                          "bound, not certainty (see at_cap_, support_, and compare harvest)", IdentificationWarning,
                          stacklevel=2)
    boot = None
    converged = None
    if B:
        rng = np.random.default_rng(random_state)
        weights = _BootstrapWeights(rng, B, Q, np.flatnonzero(present))
        boot = _replicates_of(estimate, weights, rng)
        converged = getattr(estimate, "converged", None)
        if converged is not None and not converged.all():
            warnings.warn(f"{method!r}: {int((~converged).sum())} of {B} bootstrap replicates did not converge (no "
                          f"regular fixed point reached in max_iter={opts['max_iter']} steps: Newton stalled where a "
                          "theta sits at its bound or the fixed point is not unique); they are left out of the "
                          "intervals (see bootstrap_converged_)", ConvergenceWarning, stacklevel=2)
    return at_cap, boot, converged


def _check_options(method, K, options) -> dict:
    """The checked ``**options`` of :func:`estimate_propensities`, with the defaults filled in."""
    known = {"confidence", "min_clicks", "max_iter", "tol", "relevance_model", "eps_plus", "prior_strength",
             "min_support", "start", "monotone"}
    unknown = set(options) - known
    if unknown:
        raise TypeError(f"estimate_propensities got unknown options {sorted(unknown)}; known: {sorted(known)}")
    if "relevance_model" in options and method != "em":
        raise TypeError("relevance_model is an option of method 'em' only")
    if "eps_plus" in options and method != "trust_em":
        raise TypeError("eps_plus is an option of method 'trust_em' only")
    if "prior_strength" in options and method not in ("pbm", "harvest"):
        raise TypeError("prior_strength is an option of methods 'pbm' and 'harvest' only")
    if options.get("monotone") and method not in ("pbm", "harvest"):
        raise TypeError("monotone is an option of methods 'pbm' and 'harvest' only")
    if "min_support" in options and method not in ("pbm", "harvest"):
        raise TypeError("min_support is an option of methods 'pbm' and 'harvest' only ('smooth' says where the log "
                        "is weak from the information itself)")
    opts = {
        "confidence": check_probability(options.get("confidence", 0.95), "confidence", include_zero=False,
                                        include_one=False),
        "min_clicks": check_int(options.get("min_clicks", 10), "min_clicks", min_value=1),
        "max_iter": check_int(options.get("max_iter", {"em": 100, "pbm": 100}.get(method, 500)), "max_iter",
                              min_value=1),
        # EM with a user's relevance model refits it every step: a looser default there. The
        # position-based model's tolerance is on the mean log-likelihood per impression.
        "tol": check_real(options.get("tol", 1e-4 if options.get("relevance_model") is not None
                                      else 1e-8), "tol", min_value=0, include_min=False),
        "prior_strength": check_real(options.get("prior_strength", HARVEST_PRIOR_STRENGTH if method == "harvest"
                                                 else PBM_PRIOR_STRENGTH), "prior_strength",
                                     min_value=0),
        "min_support": check_int(options.get("min_support", MIN_SUPPORT), "min_support", min_value=0),
    }
    opts["monotone"] = check_bool(options.get("monotone", MONOTONE_DEFAULT.get(method, False)), "monotone")
    for key in ("relevance_model", "eps_plus", "start"):
        if options.get(key) is not None:
            opts[key] = options[key]
    if "relevance_model" in opts:
        _check_relevance_model(opts["relevance_model"])
    if "eps_plus" in opts:
        plus = np.asarray(opts["eps_plus"], dtype=np.float64)
        if plus.ndim > 1 or (plus.ndim == 1 and plus.size != K) or not np.all((plus > 0) & (plus <= 1)):
            raise ValueError(f"eps_plus must be a number in (0, 1] or {K} of them (one per position)")
    return opts


def _check_relevance_model(model) -> None:
    """``TypeError`` unless ``model`` is a scikit-learn classifier with ``predict_proba`` and weighted ``fit``."""
    from sklearn.base import is_classifier
    from sklearn.utils.validation import has_fit_parameter

    name = type(model).__name__
    if not (hasattr(model, "fit") and hasattr(model, "get_params")):
        raise TypeError(f"relevance_model must be a scikit-learn classifier, got {name}")
    if not (is_classifier(model) and hasattr(model, "predict_proba")):
        raise TypeError(f"relevance_model must be a classifier with predict_proba (the probability of relevance), "
                        f"got {name}, which {'has no predict_proba' if is_classifier(model) else 'is not a classifier'}"
                        "; e.g. LogisticRegression()")
    if not has_fit_parameter(model, "sample_weight"):
        raise TypeError(f"relevance_model {name} does not take sample_weight in fit: EM fits it on soft labels "
                        "given as weights")


def _percentiles(values, confidence):
    """The two-sided percentile interval of bootstrap replicates (rows) at level ``confidence``."""
    return np.percentile(values, [50 * (1 - confidence), 50 * (1 + confidence)], axis=0)


def _trust_bias_model(point, boot, confidence, n_sessions) -> EstimatedTrustBias:
    """The ``"trust_em"`` estimate with the intervals of every part (and of relative, alpha, beta)."""
    theta, plus, minus, a, b = (v[0] for v in point)
    intervals, reps = {}, {}
    if boot is not None:
        for name, values in zip(("examination", "eps_plus", "eps_minus", "a", "b"), boot):
            intervals[name] = tuple(_percentiles(values, confidence))
            reps[name] = values
        extra = {"relative": boot[0] / boot[0][:, :1], "alpha": boot[3] - boot[4], "beta": boot[4]}
        for name, values in extra.items():
            intervals[name] = tuple(_percentiles(values, confidence))
            reps[name] = values
    return EstimatedTrustBias(theta, plus, np.minimum(minus, plus - 1e-9), intervals=intervals, bootstrap=reps,
                              confidence=confidence, n_sessions=n_sessions)


def _propensity_model(method, point, boot, confidence, n_sessions, converged=None) -> EstimatedPropensity:
    """A position-only estimate with its interval; ``ValueError`` where a position or a replicate had no data."""
    relative = point[0]
    bad = np.flatnonzero(~(np.isfinite(relative) & (relative > 0)))
    if bad.size:
        raise ValueError(f"{method!r}: the estimate at position {bad[0] + 1} is {relative[bad[0]]}: too few clicks "
                         "there (log more sessions or lower max_position)")
    lower = upper = None
    if boot is not None:
        if not np.all(np.isfinite(boot)):
            raise ValueError(f"{method!r}: some bootstrap replicates have no data at a position (resamples of the "
                             "queries without a click there on documents shown at several positions): the log is too "
                             "small for an interval; log more sessions, use n_bootstrap=0, or method 'smooth', which "
                             "borrows from a power law where the log is silent")
        used = boot if converged is None or not converged.any() else boot[converged]
        lower, upper = _percentiles(used, confidence)
        # A percentile interval need not hold its estimate (a bound, a skewed or biased bootstrap): widened to it.
        lower, upper = np.minimum(lower, relative), np.maximum(upper, relative)
    model = EstimatedPropensity(relative, lower, upper, bootstrap=boot, method=method, confidence=confidence,
                                n_sessions=n_sessions)
    if boot is not None:
        model.bootstrap_converged_ = np.ones(len(boot), dtype=bool) if converged is None else converged
    return model


# ----------------------------------------------------------------------------- shape and choice

#: ``monotone`` by default, per method: on for harvest, whose non-increasing curve predicted
#: held-out clicks at least as well as the plain one on 18 of 19 logs (the TREC Session log and
#: simulated logs, eta 0.5-2, weak and strong ranking drift; the one loss 0.0006 in perplexity);
#: off for pbm, where the two were level (at least as good on 5 of 11 logs, mean difference
#: +0.0001). ``python -m experiments.benchmarks.bench_monotone_default`` measures it.
MONOTONE_DEFAULT = {"harvest": True, "pbm": False}


def non_increasing(values) -> np.ndarray:
    """The closest non-increasing curve to each row of ``values`` in least squares (isotonic regression).

    Pool adjacent violators (Barlow et al., Statistical Inference under Order Restrictions, 1972):
    a run of positions whose values rise is replaced by its mean until none rises. A curve that is
    already non-increasing is returned unchanged. The loop runs over positions (at most ``K``
    poolings), each step vectorised over the rows.

    Parameters
    ----------
    values : array (K,) or (B, K)
        A curve over positions ``1..K`` (or one per row: bootstrap replicates).

    Returns
    -------
    array of the same shape

    Examples
    --------
    >>> non_increasing([1.0, 0.5, 0.7, 0.2]).tolist()
    [1.0, 0.6, 0.6, 0.2]
    """
    v = np.array(values, dtype=np.float64, ndmin=1)
    flat = v.reshape(-1, v.shape[-1]) if v.ndim > 1 else v[None, :]
    out = np.empty_like(flat)
    for b, row in enumerate(flat):   # rows are replicates (tens to hundreds); positions are few
        means, sizes = [], []
        for x in row:
            means.append(x)
            sizes.append(1)
            while len(means) > 1 and means[-2] < means[-1]:
                m = (means[-2] * sizes[-2] + means[-1] * sizes[-1]) / (sizes[-2] + sizes[-1])
                sizes[-2] += sizes[-1]
                means[-2] = m
                means.pop()
                sizes.pop()
        out[b] = np.repeat(means, sizes)
    return out.reshape(v.shape) if v.ndim > 1 else out[0]


def _monotone(estimate):
    """``estimate`` (query weights -> curves) followed by :func:`non_increasing`, keeping its attributes."""

    def shaped(W):
        values = non_increasing(estimate(W))
        for name in ("converged", "full_fit"):
            if hasattr(estimate, name):
                setattr(shaped, name, getattr(estimate, name))
        return values / values[:, :1]

    return shaped


#: The candidates of ``"auto"``: (name, method, options), examination estimates only. The first is the one
#: preferred when the others do not predict held-out clicks better beyond their noise: its intervals say
#: how little the log tells at the positions it does not identify.
AUTO_CANDIDATES = (("smooth", "smooth", {}), ("pbm monotone", "pbm", {"monotone": True}),
                   ("pbm", "pbm", {"monotone": False}), ("harvest monotone", "harvest", {"monotone": True}),
                   ("harvest", "harvest", {"monotone": False}))
#: "auto" takes another candidate over the first only if its held-out log-likelihood per query is higher by
#: more than this many standard errors (paired over queries).
AUTO_MARGIN_SE = 2.0


def _auto_folds(log, n_folds, rng) -> np.ndarray:
    """A fold per session: each query's sessions, in random order, dealt to the folds in turn.

    With whole queries held out every held-out pair is unseen, the prediction is ``theta_r`` times the
    placement prior, and the score rewards the marginal click rate by position, which is not an
    examination estimate.
    """
    n = len(log)
    order = rng.permutation(n)
    order = order[np.argsort(log.session_query[order], kind="stable")]
    query_sorted = log.session_query[order]
    first = np.r_[0, np.flatnonzero(np.diff(query_sorted)) + 1]
    rank = np.arange(n) - np.repeat(first, np.diff(np.r_[first, n]))
    fold = np.empty(n, dtype=np.int64)
    fold[order] = (rank + rng.integers(0, n_folds, first.size).repeat(np.diff(np.r_[first, n]))) % n_folds
    return fold


def _options_for(method, options) -> dict:
    """``auto``'s options that ``method`` takes (``min_support`` is pbm's and harvest's)."""
    return {k: v for k, v in options.items() if k != "min_support" or method in ("pbm", "harvest")}


def _auto(log, max_position, n_bootstrap, random_state, options) -> EstimatedPropensity:
    """``method="auto"``: the examination estimate that best predicts held-out clicks, cross-validated over sessions.

    Every candidate of ``AUTO_CANDIDATES`` is estimated on all sessions but one fold (``n_folds``,
    default 3; see ``_auto_folds``) and scored on the held-out fold by where its moving documents
    were clicked given their clicks (``held_out_conditional_loglik``: the part of the clicks that
    only examination predicts; a click model's perplexity is mostly its attractiveness, whose prior
    can carry the fall of the click rate). The candidate with the highest held-out log-likelihood
    is the best; the first candidate (``"smooth"``) is kept unless the best is ahead by more than
    ``AUTO_MARGIN_SE`` standard errors of the paired per-query difference (within that noise the
    candidates cannot be told apart, and the first one's intervals are the honest ones). The choice
    is refitted on the whole log with ``n_bootstrap`` replicates. ``auto_table_`` holds every
    candidate's held-out log-likelihood per click, per fold and in all, and its gain over the first
    in standard errors (``None`` where it could not be estimated on every fold); ``auto_choice_``
    the chosen name and ``auto_reason_`` why.
    """
    from ._smooth import held_out_conditional_loglik

    options = dict(options)
    n_folds = check_int(options.pop("n_folds", 3), "n_folds", min_value=2)
    unknown = set(options) - {"confidence", "min_clicks", "tol", "min_support"}
    if unknown:
        raise TypeError(f"method 'auto' takes the options confidence, min_clicks, tol, min_support and n_folds, "
                        f"got {sorted(unknown)}")
    K = check_int(max_position, "max_position", min_value=2)
    B = check_int(n_bootstrap, "n_bootstrap", min_value=0)
    _check_log_shows(log, "auto", K)
    rng = np.random.default_rng(random_state)
    if len(log) < n_folds:
        raise ValueError(f"method 'auto': the log has {len(log)} sessions, fewer than n_folds={n_folds}")
    fold = _auto_folds(log, n_folds, rng)
    n_cand = len(AUTO_CANDIDATES)
    per_fold = np.full((n_cand, n_folds), np.nan)                 # held-out log-likelihood per scored click
    loglik = np.zeros((n_cand, log.n_queries))                   # held-out, summed over the folds
    scored = 0.0
    failures = [[] for _ in AUTO_CANDIDATES]
    for f in range(n_folds):
        train, test = log[np.flatnonzero(fold != f)], log[np.flatnonzero(fold == f)]   # query codes kept
        for i, (_, method, extra) in enumerate(AUTO_CANDIDATES):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # each candidate's own warnings come with the refit on the whole log
                try:
                    curve = estimate_propensities(train, method, max_position=K, n_bootstrap=0, **extra,
                                                  **_options_for(method, options))
                except ValueError as err:
                    failures[i].append(str(err))
                    continue
            ll, clicks = held_out_conditional_loglik(test, K, curve.relative_)
            per_fold[i, f] = ll.sum() / clicks if clicks else 0.0
            loglik[i] += ll
        scored += held_out_conditional_loglik(test, K, np.ones(K))[1]
    complete = np.isfinite(per_fold).all(1)
    if not complete.any():
        raise ValueError("method 'auto': no candidate could be estimated on every fold: "
                         + "; ".join(f"{c[0]}: {fails[0]}" for c, fails in zip(AUTO_CANDIDATES, failures) if fails))
    total = np.where(complete, loglik.sum(1), -np.inf)
    best = int(np.argmax(total))
    queries = np.flatnonzero(np.bincount(log.session_query, minlength=log.n_queries) > 0)
    gain = np.full(n_cand, np.nan)     # held-out log-likelihood gain over the first, in standard errors
    for i in np.flatnonzero(complete):
        if complete[0]:
            d = loglik[i, queries] - loglik[0, queries]
            se = d.std(ddof=1) * np.sqrt(d.size) if d.size > 1 else np.inf
            gain[i] = d.sum() / se if se > 0 else 0.0
    chosen = best
    first, top = AUTO_CANDIDATES[0][0], AUTO_CANDIDATES[best][0]
    if not complete[0]:
        reason = f"{first} could not be estimated on every fold ({failures[0][0]}); {top} predicts best"
    elif best == 0:
        reason = f"{first} predicts the held-out clicks best"
    elif gain[best] > AUTO_MARGIN_SE:
        reason = f"{top} predicts the held-out clicks better than {first} by {gain[best]:.1f} standard errors"
    else:
        chosen = 0
        reason = (f"{top} predicts the held-out clicks best, but within the noise of {first} ({gain[best]:+.1f} "
                  f"standard errors of the per-query difference, <= {AUTO_MARGIN_SE:g}): kept {first}, whose "
                  "intervals say where the log is silent")
    if scored == 0:
        reason += "; no held-out click was on a document shown at two positions, so the folds told nothing"
    name, method, extra = AUTO_CANDIDATES[chosen]
    model = estimate_propensities(log, method, max_position=K, n_bootstrap=B, random_state=random_state,
                                  **extra, **_options_for(method, options))

    def number(x):
        return float(x) if np.isfinite(x) else None

    model.auto_table_ = [{"candidate": c[0], "loglik_per_click": number(total[i] / scored) if scored else None,
                          "folds": [number(v) for v in per_fold[i]], "gain_se": number(gain[i])}
                         for i, c in enumerate(AUTO_CANDIDATES)]
    model.auto_choice_ = name
    model.auto_reason_ = reason
    return model


# ----------------------------------------------------------------------------- replicates for other resamples


def log_fingerprint(log: ClickLog) -> str:
    """A digest of a log's sessions (their lengths, positions and clicks, in order).

    The same for a raw log and the log ``with_data`` joins from it (document codes differ, the
    sessions do not), so an estimate can tell whether a comparison runs on the log it came from.
    """
    import hashlib

    digest = hashlib.sha1()
    for array in (np.diff(log.session_offsets), log.positions, log.clicks):
        digest.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
    return digest.hexdigest()


def replicate_curves(model, log: ClickLog, query_weights: np.ndarray, random_state=None):
    """Replicates of an estimated propensity for resampled queries of ``log``: ``(curves, how)``.

    * ``model`` was estimated on ``log`` (same :func:`log_fingerprint`): re-estimated with the
      recipe it keeps on every row of ``query_weights`` (``(B, log.n_queries)``), the same
      resamples the comparison draws, so the two errors are paired (``how = "re-estimated"``);
    * estimated on another log: its own bootstrap replicates, independent of the comparison's
      resamples as the two logs are (``how = "replicates of its own log"``; cycled when fewer);
    * neither possible (a given model, or an estimate without recipe or replicates):
      ``(None, reason)``.

    ``curves`` is ``(B, K)``: each row a replicate's ``relative_`` at positions ``1..K``.
    """
    if is_session_dependent(model):
        return None, (f"it is a cascade model's examination per shown result ({model!r}), whose fit has no "
                      "bootstrap replicates")
    if getattr(model, "method_", "given") == "given" or not hasattr(model, "relative_"):
        return None, "it is given, not estimated"
    B = query_weights.shape[0]
    if model.recipe_ is not None and model.log_fingerprint_ == log_fingerprint(log):
        recipe = model.recipe_
        K = recipe["max_position"]
        opts = _check_options(recipe["method"], K, recipe["options"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # the point estimate has said its warnings already
            estimate, _ = _FITS[recipe["method"]](log, K, opts)
            if opts["monotone"]:                      # the shape of the point estimate, on every replicate
                estimate = _monotone(estimate)
            W = np.asarray(query_weights, dtype=np.float64)
            curves = np.asarray(_replicates_of(estimate, W, np.random.default_rng(random_state)))
        return curves, "re-estimated"
    if model.bootstrap_.shape[0] == 0:
        return None, "an estimate from another log, without bootstrap replicates"
    converged = getattr(model, "bootstrap_converged_", None)
    replicates = model.bootstrap_ if converged is None or not converged.any() else model.bootstrap_[converged]
    rows = np.arange(B) % replicates.shape[0]
    return replicates[rows], "replicates of its own log"
