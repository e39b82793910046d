"""The Hessian-free Newton path of the pairwise hinge over query partitions on Dask workers.

Minimises ``0.5||w||^2 + C sum_p c_p max(0, margin - (x_{i_p} - x_{j_p}).w)`` where every pair
lives inside one query, hence inside one partition. Each partition holds its features and its
pairs (:class:`PairPart`, built once per fit on its worker); the driver holds ``w``. The steps are
those of the in-memory solver (:func:`~counterfactual_ltr.solvers.solve_pairwise_hinge`): the
smoothing continuation and the dual point of :mod:`counterfactual_ltr.solvers.smoothing`, Newton
directions by preconditioned conjugate gradients (:mod:`counterfactual_ltr.solvers.hessian_free`, its
forcing term and CG loop) and a line search on the smoothed objective, stopping at
``gap <= tol * max(1, |P|)`` with ``gap`` the exact duality gap of the best primal and dual points,
so ``coef``, ``objective`` and ``gap`` mean what they mean in memory. Near the optimum the
in-memory finisher's exact solve of the pairs at the kink
(:func:`~counterfactual_ltr.solvers.finisher.kink_rounds`) ends the solve: the kink pairs' feature
differences (a bounded number of ``d``-rows) come to the driver. (No screening: it speculates on
pair arrays gathered in one place.)

Every product with the features is a task on a partition's worker, and what travels is ``w``, a
direction or a CG vector (``d`` floats) to each partition and a ``d``-vector and a few scalars
back: per Newton iteration ``O(d x partitions)`` bytes, counted in :attr:`Traffic`. Per-row and
per-pair vectors (scores, hinge arguments, the smoothing band) stay in futures on the workers.
Each evaluation starts from ``X w`` of the partition (no chain of updates), so a lost worker's
state is recomputed from the partition and ``w`` alone: the result does not change.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from . import hessian_free as _hf
from .common import SolverResult, aggregate_pairs, doc, make_result, slope_line_search
from .finisher import Finisher, finish_cap, kink_rounds, kink_threshold, near_kink
from .smoothing import best_dual_on_segment, initial_mu, next_level, smoothing_dominates

__all__ = ["Traffic", "solve_distributed"]

# Line searches stop at a strong Wolfe slope (|phi'(t)| <= 0.1 |phi'(0)|): every evaluation of the
# slope is a round trip to every partition (as on the implicit path, where each is a sort).
_LINE_SEARCH_RTOL = 0.1
# Rows of a partition squared at a time for the preconditioner (bounded extra memory on the worker).
_CHUNK_BYTES = 1 << 24


@dataclass
class PairPart:
    """One partition's features and pairs: rows ``i`` over ``j`` with weights ``c`` (``owner``: the clicked document).

    Parameters
    ----------
    X : array or CSR matrix (n_rows, d)
        The partition's features.
    i, j : int arrays (n_pairs,)
        The preferred and the other row of every pair.
    c : array (n_pairs,)
        Pair weights.
    owner : int array (n_pairs,), optional
        The clicked document of every pair (for per-document weights).
    """

    X: object
    i: np.ndarray
    j: np.ndarray
    c: np.ndarray
    owner: np.ndarray | None = None


@dataclass
class Traffic:
    """Bytes the driver sent to and gathered from the workers (pickled sizes), and the round trips.

    Parameters
    ----------
    sent, gathered : int
        Bytes so far.
    round_trips : int
        Maps over the partitions so far.
    per_iteration : list of int
        ``sent + gathered`` after every Newton evaluation.

    Examples
    --------
    >>> t = Traffic(sent=800, gathered=1600)
    >>> t.total()
    2400
    """

    sent: int = 0
    gathered: int = 0
    round_trips: int = 0
    per_iteration: list = field(default_factory=list)

    def total(self) -> int:
        return self.sent + self.gathered


def _weights(part, doc_w):
    return part.c if doc_w is None else doc_w[part.owner]


def _evaluate(part, doc_w, w, C, margin, mu, width):
    """``(state, summary)`` at ``w``: the hinge, the dual point's ``X^T g``, the Newton model's gradient part
    and the preconditioner's diagonal.

    ``width > mu`` (the first step after ``mu`` shrank): the Newton model follows the path, as in
    memory -- the last level's band ``0 < z < width`` keeps its quadratic piece with slope ``1 / mu``.
    """
    X, i, j = part.X, part.i, part.j
    n = X.shape[0]
    Cc = C * _weights(part, doc_w)
    s = X @ w
    z = margin - (s[i] - s[j])
    hinge = float(np.dot(Cc, np.maximum(z, 0.0)))
    a = np.clip(z / mu, 0.0, 1.0)
    alpha = Cc * a
    v = np.asarray(X.T @ aggregate_pairs(i, j, alpha, n)).ravel()
    if width > mu:
        band = (z > 0.0) & (z < width)
        model_a = np.where(band, z / mu, (z >= width).astype(np.float64))
        v_model = np.asarray(X.T @ aggregate_pairs(i, j, Cc * model_a, n)).ravel()
    else:
        band, v_model = (a > 0.0) & (a < 1.0), v
    ib, jb, h = i[band], j[band], Cc[band] / mu
    degree = np.bincount(ib, h, minlength=n) + np.bincount(jb, h, minlength=n)
    precond = _squared_product(X, degree)
    state = (z, Cc, ib, jb, h)
    counts = np.array([np.count_nonzero((z > 0.0) & (z < mu)), np.count_nonzero(near_kink(z, mu))])
    return state, (hinge, float(alpha.sum()), float(alpha @ z), v, v_model, precond, counts)


def _squared_product(X, degree):
    """``(X o X)^T degree`` over the rows with ``degree > 0``, block by block (no copy of ``X o X``)."""
    rows = np.flatnonzero(degree)
    out = np.zeros(X.shape[1])
    if _hf.is_sparse(X):
        sub = X[rows]
        return np.asarray(sub.multiply(sub).T @ degree[rows]).ravel()
    step = max(1, _CHUNK_BYTES // (8 * max(X.shape[1], 1)))
    for start in range(0, rows.size, step):
        block = X[rows[start:start + step]]
        out += degree[rows[start:start + step]] @ (block * block)
    return out


# ---------------------------------------------------------------------- the finisher's pieces
def _near_kink(state, mu, cap):
    """``|z|`` of the partition's pairs nearest the kink (its closest ``cap``: enough for the global threshold)."""
    z = state[0]
    dist = np.abs(z[near_kink(z, mu)])
    return dist if dist.size <= cap else np.partition(dist, cap - 1)[:cap]


def _kink_start(state, mu, threshold):
    """``(held, in_kink)``: each pair's side at the iterate, and the kink set's pairs (``|z| <= threshold``)."""
    z = state[0]
    return z > 0.0, near_kink(z, mu) & (np.abs(z) <= threshold)


def _restricted(part, state, sides):
    """``X^T g`` of the pairs held above the kink, the kink pairs' feature differences and weights, the held sum."""
    held, in_kink = sides
    Cc, i, j = state[1], part.i, part.j
    top = held & ~in_kink
    q = np.asarray(part.X.T @ aggregate_pairs(i[top], j[top], Cc[top], part.X.shape[0])).ravel()
    k = np.flatnonzero(in_kink)
    Z = part.X[i[k]] - part.X[j[k]]
    return q, (Z.toarray() if _hf.is_sparse(Z) else np.asarray(Z)), Cc[k], float(Cc[top].sum())


def _candidate(part, state, sides, v, margin):
    """``((hinge at v, pairs on the other side, kink set size), sides)``: the set grown by the wrongly held pairs."""
    held, in_kink = sides
    s = part.X @ v
    z = margin - (s[part.i] - s[part.j])
    wrong = ~in_kink & ((z > 0.0) != held)
    summary = np.array([float(np.dot(state[1], np.maximum(z, 0.0))), wrong.sum(), in_kink.sum()])
    return summary, (held, in_kink | wrong)


def _hessian_product(part, state, p):
    """``X^T L X p`` of the partition's band pairs."""
    _, _, ib, jb, h = state
    if ib.size == 0:
        return np.zeros(p.shape[0])
    n = part.X.shape[0]
    apply, _ = _hf.explicit_band(ib, jb, h, n)
    return np.asarray(part.X.T @ apply(part.X @ p)).ravel()


def _direction(part, state, u):
    """The line-search state along ``u``: hinge arguments, their change ``delta`` and the weights."""
    Xu = part.X @ u
    z, Cc = state[0], state[1]
    return z, Xu[part.i] - Xu[part.j], Cc


def _ray(part, doc_w, u, C, margin):
    """The line-search state along ``u`` from ``w = 0`` (a warm start's ray): every pair at the margin."""
    Xu = part.X @ u
    delta = Xu[part.i] - Xu[part.j]
    return np.full(delta.shape, margin), delta, C * _weights(part, doc_w)


def _slope(line, t, mu):
    """``(sum_p Cc delta clip(q, 0, 1), sum_band Cc delta^2 / mu)`` at step ``t``, ``q = (z - t delta) / mu``."""
    z, delta, Cc = line
    q = (z - t * delta) / mu
    band = (q > 0.0) & (q < 1.0)
    Cd = Cc * delta
    return float(np.dot(Cd, np.clip(q, 0.0, 1.0))), float(np.dot(Cd[band], delta[band])) / mu


class _Cluster:
    """The partitions' futures and what one solve sends to and gathers from them."""

    def __init__(self, client, parts, doc_weights, traffic):
        self.client, self.parts, self.traffic = client, parts, traffic
        self.doc_weights = doc_weights if doc_weights is not None else [None] * len(parts)
        # Every task of a partition is asked to run where the partition is (the scheduler's work
        # stealing would otherwise move per-pair states between workers); elsewhere if it is lost.
        holders = client.who_has(parts)
        self.where = [list(holders.get(f.key, ())) or None for f in parts]

    def map(self, func, columns, *args):
        """Futures of ``func(*column_k, *args)``; ``args`` (``d``-vectors, scalars) are what is sent."""
        self.traffic.sent += len(pickle.dumps(args, protocol=5)) * len(self.parts)
        self.traffic.round_trips += 1
        return [self.client.submit(func, *row, *args, **self._placed(k)) for k, row in enumerate(zip(*columns))]

    def _placed(self, k):
        """Keyword arguments of a task of partition ``k``: on its worker where that is known, else anywhere."""
        where = self.where[k]
        return {"pure": False} if where is None else {"pure": False, "workers": where, "allow_other_workers": True}

    def gather(self, futures):
        out = self.client.gather(futures)
        self.traffic.gathered += sum(len(pickle.dumps(o, protocol=5)) for o in out)
        return out

    def summed(self, func, columns, *args):
        """Sum over partitions of a tuple (or array) of ``func``'s results."""
        out = self.gather(self.map(func, columns, *args))
        if isinstance(out[0], tuple):
            return tuple(sum(o[k] for o in out) for k in range(len(out[0])))
        return sum(out)


@doc
def solve_distributed(client, parts, C, *, doc_weights=None, margin=1.0, w0=None, tol=1e-6, max_iter=1000,
                      verbose=False, traffic=None, on_iteration=None) -> SolverResult:
    """Minimise the pairwise hinge over partitions held by Dask workers (see the module docstring).

    Parameters
    ----------
    client : dask.distributed.Client
        The client whose workers hold ``parts``.
    parts : list of Future
        One :class:`PairPart` per partition.
    C : float > 0
        Weight of the hinge sum (pair weights ``c_p`` from the parts, or ``doc_weights``).
    doc_weights : list of Future, optional
        Per partition, a weight per clicked document: pair ``p`` weighs ``doc_weights[owner_p]``.
    margin : float
        The hinge's margin.
    w0 : (d,) array, optional
        Warm start (its ray is searched first, as in memory).
    tol : float
        Stop when ``gap <= tol * max(1, |objective|)``.
    max_iter : int
        Newton iterations (a ``ConvergenceWarning`` when exhausted).
    verbose : bool
        Print one line per iteration.
    traffic : Traffic, optional
        Receives the bytes sent and gathered.
    on_iteration : callable, optional
        ``it -> None`` after every evaluation (tests interrupt workers there).

    {returns_result}
        ``method`` is ``"newton_cg"``.

    Examples
    --------
    >>> import numpy as np
    >>> from dask.distributed import Client
    >>> from counterfactual_ltr.solvers import solve_pairwise_hinge
    >>> client = Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None)
    >>> X = np.random.default_rng(0).normal(size=(6, 3))
    >>> parts = client.scatter([PairPart(X[:3], np.array([0, 0]), np.array([1, 2]), np.ones(2)),
    ...                         PairPart(X[3:], np.array([1]), np.array([0]), np.array([0.5]))])
    >>> res = solve_distributed(client, parts, C=1.0, tol=1e-9)
    >>> ref = solve_pairwise_hinge(X, [0, 0, 4], [1, 2, 3], [1.0, 1.0, 0.5], C=1.0, tol=1e-9)
    >>> res.converged, bool(abs(res.objective - ref.objective) <= 1e-8 * ref.objective)
    (True, True)
    >>> client.close()
    """
    traffic = traffic if traffic is not None else Traffic()
    cluster = _Cluster(client, parts, doc_weights, traffic)
    solver = _Solver(cluster, float(C), float(margin), w0, tol, max_iter, verbose, on_iteration)
    w, P, D, it, converged, history = solver.run()
    return make_result("solve_distributed", w, P, D, it, converged, history, tol, "newton_cg", False, stacklevel=3)


class _Solver:
    """One distributed solve: the iterate, the best points and the smoothing level on the driver."""

    def __init__(self, cluster, C, margin, w0, tol, max_iter, verbose, on_iteration):
        self.cluster, self.C, self.margin, self.tol, self.max_iter = cluster, C, margin, tol, max_iter
        self.verbose, self.on_iteration = verbose, on_iteration
        self.d = int(cluster.gather([cluster.client.submit(_width, cluster.parts[0], pure=False)])[0])
        warm = w0 is not None and np.any(w0)
        self.w = np.zeros(self.d) if w0 is None else np.asarray(w0, dtype=np.float64).copy()
        self.mu = self.width = initial_mu(margin, bool(warm))
        if warm:
            self._start_on_the_ray()
        self.best_P, self.best_w, self.best_D, self.ref = np.inf, self.w.copy(), -np.inf, None
        self.history, self.it, self.converged, self.done = [], 0, False, False
        self.finisher = Finisher()

    def _start_on_the_ray(self):
        """The best point ``t w0`` on the ray of a warm start (as the in-memory paths)."""
        c = self.cluster
        lines = c.map(_ray, [c.parts, c.doc_weights], self.w, self.C, self.margin)
        t = self._line_search(lines, np.zeros(self.d), self.w, None)
        self.w = t * self.w

    def run(self):
        while not self.done:
            self.evaluate()
            if self.on_iteration is not None:
                self.on_iteration(self.it)
            if self.finish_near_kink():
                continue
            if self.stop() or self.shrink_smoothing():
                continue
            self.newton_step()
        return self.best_w, self.best_P, self.best_D, self.it, self.converged, self.history

    def evaluate(self):
        c, w = self.cluster, self.w
        out = c.map(_evaluate, [c.parts, c.doc_weights], w, self.C, self.margin, self.mu, self.width)
        self.states = [c.client.submit(itemgetter(0), o, **c._placed(k)) for k, o in enumerate(out)]
        hinge, alpha_sum, alpha_z, v, v_model, precond, (self.n_band, self.n_near) = c.summed(itemgetter(1), [out])
        self.hinge, self.P = hinge, 0.5 * float(w @ w) + hinge
        self.v, self.model_grad, self.precond = v, w - v_model, 1.0 + precond
        self.D = self.margin * alpha_sum - 0.5 * float(v @ v)
        if self.P < self.best_P:
            self.best_P, self.best_w = self.P, w.copy()
        self.ref = best_dual_on_segment(self.ref, (alpha_sum, v, self.D), self.margin)
        self.best_D = max(self.best_D, self.ref[2])
        self.history.append((self.best_P, self.best_D))
        self._gap()
        # The smoothed problem's own gap: its smoothing terms cancel (see the explicit path).
        self.smooth_gap = self.P - hinge + alpha_z - self.D
        c.traffic.per_iteration.append(c.traffic.total())
        if self.verbose:
            print(f"[solve_distributed] it={self.it:3d} mu={self.mu:.2e} P={self.P:.10g} D={self.D:.10g} "
                  f"rel gap={self.gap / max(1.0, abs(self.best_P)):.2e}")

    def _gap(self):
        self.gap = self.best_P - self.best_D
        self.target = self.tol * max(1.0, abs(self.best_P))

    def finish_near_kink(self) -> bool:
        """The in-memory finisher's exact solve near the kink (:func:`~counterfactual_ltr.solvers.finisher.kink_rounds`).

        The kink pairs' feature differences (at most twice ``finish_cap(d)`` rows of ``d``) come to
        the driver, the rest stays: ``v``'s part from the pairs held above the kink is a summed
        ``d``-vector, the candidate's hinge a summed scalar. True when the iterate moved.
        """
        cap = finish_cap(self.d)
        if not self.finisher.due(self.gap, self.target, self.best_P) or self.n_band > cap or not self.n_near:
            return False
        c, mu = self.cluster, self.mu
        self.finisher.tried(self.gap)
        threshold = np.inf
        if self.n_near > cap:
            threshold = kink_threshold(np.concatenate(c.gather(c.map(_near_kink, [self.states], mu, cap))), mu, self.d)
        sides = c.map(_kink_start, [self.states], mu, threshold)
        held = [0.0]

        def restricted():
            out = c.gather(c.map(_restricted, [c.parts, self.states, sides]))
            held[0] = sum(o[3] for o in out)
            return (sum(o[0] for o in out), np.vstack([o[1] for o in out]), np.concatenate([o[2] for o in out]),
                    held[0])

        def candidate(lam, v):
            out = c.map(_candidate, [c.parts, self.states, sides], v, self.margin)
            sides[:] = [c.client.submit(itemgetter(1), o, **c._placed(k)) for k, o in enumerate(out)]
            hinge, n_wrong, n_kink = c.summed(itemgetter(0), [out])
            return 0.5 * float(v @ v) + hinge, int(n_wrong), int(n_kink), held[0] + float(lam.sum())

        alpha_sum, v, P, D = kink_rounds(restricted, candidate, self.margin, self.target, self.d)
        if D > self.best_D:
            self.best_D, self.ref = D, (alpha_sum, v, D)
        if P < self.best_P:
            self.best_P, self.best_w = P, v.copy()
        if P < self.P:                           # go on from the better point, evaluated afresh
            self.w = v
            return True
        self._gap()
        return False

    def stop(self) -> bool:
        if self.gap <= self.target:
            self.converged = self.done = True
        else:
            self.done = self.it >= self.max_iter
        return self.done

    def shrink_smoothing(self) -> bool:
        if not smoothing_dominates(self.smooth_gap, self.gap):
            return False
        self.width = self.mu
        self.mu, stop = next_level(self.mu, self.target, self.gap, self.margin, self.C, "solve_distributed", 4)
        self.it += 1
        self.done = self.done or stop
        return True

    def newton_step(self):
        c, w = self.cluster, self.w
        grad = w - self.v
        b = -self.model_grad                     # the path-following model's after a shrink, else grad
        self.width = self.mu
        b_norm = float(np.linalg.norm(b))
        rtol = _hf.forcing(self.smooth_gap, self.P)

        def hessian(p):
            return p + c.summed(_hessian_product, [c.parts, self.states], p)

        u, _, r_norm = _hf.pcg(hessian, b, self.precond, rtol * b_norm, min(_hf.CG_MAX_ITER, self.d + 10))
        u = _hf.cg_or_descent(u, r_norm, b, self.precond)
        lines = c.map(_direction, [c.parts, self.states], u)
        t = self._line_search(lines, w, u, float(grad @ u))
        self.w = w + t * u
        self.it += 1

    def _line_search(self, lines, w, u, f0):
        """Step ``t`` along ``u`` to a strong Wolfe slope of the smoothed objective (one round trip per trial)."""
        c, mu = self.cluster, self.mu
        c0, c1 = float(w @ u), float(u @ u)

        def slope(t):
            S, curv = c.summed(_slope, [lines], t, mu)
            return c0 + t * c1 - S, c1 + curv

        return slope_line_search(slope, slope(0.0)[0] if f0 is None else f0, _LINE_SEARCH_RTOL)


def _width(part):
    return part.X.shape[1]
