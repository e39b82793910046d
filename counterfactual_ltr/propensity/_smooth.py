"""``"smooth"``: position-based examination from documents shown at several positions, shrunk towards a power law.

The likelihood. Under the position-based model ``P(click at k) = theta_k a_d``, the clicks of a
(query, document) ``d`` shown ``n_dk`` times at positions ``k`` are, given their total ``C_d``,
spread over its positions in proportion to ``n_dk theta_k`` (exactly so for Poisson counts; for
Bernoulli clicks the estimating equation
``sum_d [c_dk - C_d n_dk theta_k / sum_j n_dj theta_j] = 0`` still has expectation 0 at the true
``theta``). So the conditional log-likelihood

``l(u) = sum_d [sum_k c_dk u_k - C_d log sum_k n_dk exp(u_k)]``, ``u_k = log theta_k``, ``u_1 = 0``,

holds no attractiveness at all: no prior on ``a_d`` can carry the fall of the click rate (as the
position-based model's prior by placement can, which puts ``theta`` at its bound on logs where
few documents move), and a document shown at one position only says nothing, as it should.

The shrinkage. Each ``u_k`` is a power law plus a deviation, ``u_k = -eta log k + delta_k`` with
``delta_k ~ N(0, tau^2)`` and a weak prior ``eta ~ N(1, 2^2)``. A position that many moving
documents link to the others is set by its clicks (``delta_k`` free); one that few link borrows
``-eta log k`` from the positions the log does identify. The strength ``tau`` is the data's:
the marginal likelihood (Laplace) of every ``tau`` of ``TAU_GRID`` weighs the grid (a uniform
prior on ``log tau``), and the estimate averages the fits of ``u`` over those weights.

The interval. A replicate (queries resampled with replacement) draws ``tau`` from those weights,
refits on the resample, and adds the shrinkage's own error: where the fit shrinks ``delta`` by
``S = Sigma / tau^2`` (``Sigma = (H + I / tau^2)^{-1}``, ``H`` the likelihood's information in
``u``), the estimate misses the unknown ``delta ~ N(0, tau^2 I)`` by ``-S delta``, so the replicate
adds a draw of ``N(0, Sigma Sigma / tau^2)``. At a well identified position ``S`` is near 0 and
the bootstrap's spread is the interval; at a position the log does not identify the draw has
standard deviation near ``tau``, and the interval says how little the log tells there.
"""

from __future__ import annotations

import warnings

import numpy as np

from ._results import IdentificationWarning

#: The strengths weighed by their marginal likelihood (standard deviation of ``log theta_k`` about the power law).
TAU_GRID = (0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5)
#: The weak prior on the power law's exponent: mean and standard deviation.
ETA_PRIOR = (1.0, 2.0)
#: A position is weakly identified (warned) where the log alone cannot pin its log-theta down to within
#: ``IDENTIFIED_SD`` (one standard deviation of the likelihood's information about it), so that a
#: deviation of that size from the power law would be shrunk by more than half.
IDENTIFIED_SD = 0.5


class _MovingDocuments:
    """Impressions ``n`` and clicks ``c`` (documents x K, dense) of the documents shown at two positions or more."""

    def __init__(self, imp):
        shown_at = np.bincount(imp.doc)
        keep = shown_at[imp.doc] > 1
        docs, doc = np.unique(imp.doc[keep], return_inverse=True)
        self.K, self.n_docs = imp.K, docs.size
        self.n = np.zeros((docs.size, imp.K))
        self.c = np.zeros((docs.size, imp.K))
        self.n[doc, imp.k[keep] - 1] = imp.n[keep]
        self.c[doc, imp.k[keep] - 1] = imp.c[keep]
        self.doc_query = imp.query[np.searchsorted(imp.doc, docs)]
        clicked = self.c.sum(1) > 0            # a document without clicks adds nothing to the likelihood
        self.n, self.c, self.doc_query = self.n[clicked], self.c[clicked], self.doc_query[clicked]
        self.n_docs = int(clicked.sum())
        self.clicks = self.c.sum(1)
        self.log_k = np.log(np.arange(1, imp.K + 1, dtype=np.float64))

    def _shares(self, u):
        """``n_dk theta_k / sum_j n_dj theta_j`` and ``log sum_j n_dj theta_j`` of every document."""
        scale = self.n * np.exp(u - u.max())
        total = scale.sum(1)
        return scale / total[:, None], np.log(total) + u.max()

    def value(self, x, doc_weight, tau, _log_total=None):
        """The negative log posterior ``f`` of ``x = (u_2..u_K, eta)``."""
        u = np.r_[0.0, x[:-1]]
        log_total = self._shares(u)[1] if _log_total is None else _log_total
        r = u[1:] + x[-1] * self.log_k[1:]
        mean, sd = ETA_PRIOR
        loglik = (doc_weight @ self.c) @ u - (doc_weight * self.clicks) @ log_total
        return -loglik + 0.5 * (r @ r) / tau ** 2 + 0.5 * ((x[-1] - mean) / sd) ** 2

    def objective(self, x, doc_weight, tau):
        """``f``, its gradient and Hessian in ``x``, and the likelihood's information ``H`` in ``u_2..u_K``."""
        K = self.K
        u = np.r_[0.0, x[:-1]]
        eta = x[-1]
        share, log_total = self._shares(u)
        C = doc_weight * self.clicks
        expected = C @ share
        grad_u = expected - doc_weight @ self.c
        H = np.diag(expected) - share.T @ (share * C[:, None])
        r = u[1:] + eta * self.log_k[1:]
        mean, sd = ETA_PRIOR
        f = self.value(x, doc_weight, tau, log_total)
        g = np.r_[grad_u[1:] + r / tau ** 2, (r @ self.log_k[1:]) / tau ** 2 + (eta - mean) / sd ** 2]
        hess = np.empty((K, K))
        hess[:-1, :-1] = H[1:, 1:] + np.eye(K - 1) / tau ** 2
        hess[:-1, -1] = hess[-1, :-1] = self.log_k[1:] / tau ** 2
        hess[-1, -1] = self.log_k[1:] @ self.log_k[1:] / tau ** 2 + 1.0 / sd ** 2
        return f, g, hess, H[1:, 1:]

    def subset(self, rows):
        """The documents ``rows`` only (those a replicate draws)."""
        part = object.__new__(_MovingDocuments)
        part.K, part.log_k = self.K, self.log_k
        part.n, part.c, part.clicks, part.doc_query = self.n[rows], self.c[rows], self.clicks[rows], self.doc_query[rows]
        part.n_docs = int(np.size(part.clicks))
        return part

    def fit(self, doc_weight, tau, start=None, max_iter=100, tol=1e-9):
        """Newton's method with backtracking on the convex ``f``: ``(x, f, hess, H, converged)``."""
        x = np.r_[-self.log_k[1:], ETA_PRIOR[0]] if start is None else np.array(start, dtype=np.float64)
        f, g, hess, H = self.objective(x, doc_weight, tau)
        for _ in range(max_iter):
            step = np.linalg.solve(hess, g)
            decrease = g @ step
            if decrease < tol:
                return x, f, hess, H, True
            t = 1.0
            while True:
                trial = x - t * step
                f_new = self.value(trial, doc_weight, tau)
                if f_new <= f - 1e-4 * t * decrease or t < 1e-10:
                    break
                t *= 0.5
            x = trial
            f, g, hess, H = self.objective(x, doc_weight, tau)
        return x, f, hess, H, False


def _tau_weights(fits, K):
    """Posterior weights of ``TAU_GRID`` (Laplace marginal likelihood, uniform prior on ``log tau``)."""
    evidence = np.array([-f - (K - 1) * np.log(tau) - 0.5 * np.linalg.slogdet(hess)[1]
                         for tau, (_, f, hess, _, _) in zip(TAU_GRID, fits)])
    w = np.exp(evidence - evidence.max())
    return w / w.sum()


def _shrinkage_noise(H, tau):
    """The matrix ``Sigma / tau`` whose product with standard normals has covariance ``Sigma Sigma / tau^2``."""
    sigma = np.linalg.inv(H + np.eye(H.shape[0]) / tau ** 2)
    return sigma / tau


def _smooth(log, K, options):
    from ._methods import _Impressions, _position_support

    plain = log.intervention == 0
    imp = _Impressions(log, K, plain)
    imp.check_positions("smooth", 0, "in sessions without intervention")   # a position without clicks borrows
    moving = _MovingDocuments(imp)
    if moving.n_docs == 0 or moving.clicks.sum() == 0:
        raise ValueError("'smooth': no (query, document) was shown at two positions and clicked: the log cannot "
                         "tell position from relevance at any position (a logger whose rankings vary, or swap "
                         "interventions, give it documents that move)")
    options["support"] = _position_support(imp)     # (query, document)s shown there and elsewhere, as pbm's

    def averaged(query_weight):
        """The fits over ``TAU_GRID`` on queries weighted ``query_weight``, their weights, and the averaged ``x``."""
        doc_weight = query_weight[moving.doc_query]
        fits, start = [], None
        for tau in TAU_GRID:
            fits.append(moving.fit(doc_weight, tau, start=start, max_iter=options["max_iter"]))
            start = fits[-1][0]
        weights = _tau_weights(fits, K)
        return fits, weights, sum(w * fit[0] for w, fit in zip(weights, fits))

    fits, weights, x_point = averaged(np.ones(log.n_queries))
    point = np.exp(np.r_[0.0, x_point[:-1]])
    # Share of each position's deviation that the fit shrinks away, averaged over the strengths.
    borrowed = np.r_[0.0, sum(w * np.diag(np.linalg.inv(fit[3] + np.eye(K - 1) / tau ** 2)) / tau ** 2
                              for w, fit, tau in zip(weights, fits, TAU_GRID))]
    # Weak where the data alone would shrink a deviation of IDENTIFIED_SD by more than half: a log that agrees
    # with the power law is shrunk towards it too, but there the data could have told otherwise.
    reference = np.diag(np.linalg.inv(fits[-1][3] + np.eye(K - 1) / IDENTIFIED_SD ** 2)) / IDENTIFIED_SD ** 2
    weak = np.flatnonzero(np.r_[0.0, reference] > 0.5)
    if weak.size:
        several = weak.size > 1
        where = (f"positions {', '.join(str(k + 1) for k in weak)} are" if several
                 else f"position {weak[0] + 1} is")
        warnings.warn(f"'smooth': {where} weakly identified by this log (few moving documents clicked there): "
                      f"{'their estimates borrow' if several else 'its estimate borrows'} from the power law "
                      f"(1/r)^{x_point[-1]:.2f} fitted to the positions it identifies, and "
                      f"{'their intervals are' if several else 'its interval is'} wide (see borrowed_)",
                      IdentificationWarning, stacklevel=3)
    converged_point = all(fit[4] for fit in fits)

    def estimate(W, rng=None):
        """Replicates for rows of query weights ``W``: ``tau`` drawn, refit, and the shrinkage's error added."""
        rng = np.random.default_rng(0) if rng is None else rng
        from ._methods import _BootstrapWeights

        rows = W if isinstance(W, _BootstrapWeights) else np.atleast_2d(W)
        out, ok = [], []
        for query_weight in rows:
            j = int(rng.choice(len(TAU_GRID), p=weights))
            tau = TAU_GRID[j]
            doc_weight = query_weight[moving.doc_query]
            drawn = np.flatnonzero(doc_weight)          # the documents of the queries this replicate drew
            x, _, _, H, good = moving.subset(drawn).fit(doc_weight[drawn], tau, start=fits[j][0],
                                                        max_iter=options["max_iter"])
            u = np.r_[0.0, x[:-1] + _shrinkage_noise(H, tau) @ rng.standard_normal(K - 1)]
            out.append(np.exp(u))
            ok.append(good)
        estimate.converged = np.array(ok, dtype=bool)
        return np.array(out).reshape(-1, K)

    def point_for(query_weight):
        """The estimate (no replicate) on queries weighted ``query_weight``, and whether every fit converged."""
        fits_w, _, x = averaged(np.asarray(query_weight, dtype=np.float64))
        return np.exp(np.r_[0.0, x[:-1]]), all(fit[4] for fit in fits_w)

    estimate.point = point
    estimate.point_for = point_for
    estimate.eta = float(x_point[-1])
    estimate.borrowed = borrowed
    estimate.tau_weights = weights
    estimate.point_converged = converged_point
    return estimate, int(plain.sum())


def held_out_conditional_loglik(log, K, curve) -> tuple:
    """Per query: the log-likelihood of where ``log``'s moving documents were clicked, given their clicks and ``curve``.

    For every (query, document) shown at two positions or more in ``log`` (sessions without
    intervention, positions ``1..K``), ``sum_k c_dk log(n_dk theta_k / sum_j n_dj theta_j)``: how well
    ``theta`` says at which of its positions a document is clicked, whatever its attractiveness.
    This is the part of the clicks that only examination predicts, so it scores an examination
    estimate on held-out sessions without a model of attractiveness (whose prior could carry the
    fall of the click rate instead). Returns ``(per_query, clicks)``: an array ``(log.n_queries,)`` and
    the number of clicks scored.
    """
    from ._methods import _Impressions

    imp = _Impressions(log, K, log.intervention == 0)
    moving = _MovingDocuments(imp)
    if moving.n_docs == 0:
        return np.zeros(log.n_queries), 0.0
    u = np.log(np.asarray(curve, dtype=np.float64)[:K])
    share, _ = moving._shares(u)
    with np.errstate(divide="ignore"):
        per_doc = np.where(moving.c > 0, moving.c * np.log(np.where(share > 0, share, 1.0)), 0.0).sum(1)
    return np.bincount(moving.doc_query, weights=per_doc, minlength=log.n_queries), float(moving.clicks.sum())
