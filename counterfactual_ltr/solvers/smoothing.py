"""The smoothing continuation shared by both Newton paths of :func:`~counterfactual_ltr.solvers.solve_pairwise_hinge`.

The hinge ``max(0, z)`` of every pair is replaced by its Huber smoothing
``phi_mu(z) = max_{0<=a<=1} (a z - mu a^2 / 2)``, whose derivative ``a = clip(z / mu, 0, 1)``
turns every iterate into a feasible dual point ``alpha = C c a`` of the true hinge problem: each
iteration certifies an exact duality gap. ``mu`` starts at a tenth of the margin on a cold start
(the first level's smoothing error, at most ``mu / (2 margin)`` of ``P(0)``, is then small next to
the optimum) and at ``0.03`` margins on a warm start (the start point is near the optimum already),
and shrinks tenfold once the smoothed problem's own gap is below a fifth of the exact gap: from
there the smoothing error, not the Newton iterations, dominates the gap. Between two iterates the
best dual point on the segment joining their dual points is kept (the dual is a concave quadratic
along it), which repairs the poor dual values of iterates far from the smoothed optimum.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

__all__ = ["initial_mu", "shrunk_mu", "next_level", "smoothing_dominates", "below_resolution", "stalls", "best_dual_on_segment"]

# Smallest useful smoothing, relative to the margin.
_MU_FLOOR = 1e-14
# mu shrinks by the ratio of half the target gap to the gap, clipped to these factors.
_MU_MIN_FACTOR, _MU_MAX_FACTOR = 0.1, 0.1
# mu shrinks once the smoothed problem's gap is below this share of the exact gap.
_SWITCH = 0.2
# First smoothing of a warm and of a cold start, in margins (see the module docstring).
_WARM_MU = 0.03
_COLD_MU = 0.1


def initial_mu(margin, warm):
    """The first smoothing level: ``0.03`` margins from a warm start, ``0.1`` from a cold one.

    Parameters
    ----------
    margin : float
        The hinge's margin (1 where it is 0).
    warm : bool
        Whether the solve starts from a warm start.

    Returns
    -------
    float

    Examples
    --------
    >>> initial_mu(1.0, warm=False), initial_mu(2.0, warm=True)
    (0.1, 0.06)
    """
    return (abs(margin) if margin != 0 else 1.0) * (_WARM_MU if warm else _COLD_MU)


def smoothing_dominates(smooth_gap, gap):
    """Whether the smoothed problem is solved well enough that ``mu`` must shrink.

    Parameters
    ----------
    smooth_gap : float
        The smoothed problem's own duality gap at the iterate.
    gap : float
        The exact (hinge) duality gap.

    Returns
    -------
    bool
        ``smooth_gap <= 0.2 gap``: the smoothing error is most of the gap.

    Examples
    --------
    >>> smoothing_dominates(0.1, 1.0), smoothing_dominates(0.5, 1.0)
    (True, False)
    """
    return smooth_gap <= _SWITCH * gap


def shrunk_mu(mu, target, gap):
    """The next smoothing level: ``mu`` times ``0.5 target / gap`` clipped to ``[0.1, 0.1]``, a tenth.

    Parameters
    ----------
    mu : float
        The current smoothing.
    target, gap : float
        The absolute gap asked and the gap reached.

    Returns
    -------
    float

    Examples
    --------
    >>> shrunk_mu(0.1, 1e-6, 1e-3)
    0.010000000000000002
    """
    return mu * float(np.clip(0.5 * target / gap, _MU_MIN_FACTOR, _MU_MAX_FACTOR))


def below_resolution(mu, margin):
    """Whether ``mu`` is below float64's resolution of the hinge arguments (nothing left to gain).

    Parameters
    ----------
    mu, margin : float
        The smoothing and the hinge's margin.

    Returns
    -------
    bool

    Examples
    --------
    >>> below_resolution(1e-15, 1.0), below_resolution(1e-6, 1.0)
    (True, False)
    """
    return mu < _MU_FLOOR * max(abs(margin), 1e-12)


def next_level(mu, target, gap, margin, C, name, stacklevel=2):
    """``(mu, stop)``: the next smoothing level, and whether it fell below float64 resolution (then warned).

    Hinge arguments carry rounding errors far above such a smoothing (huge ``C`` or a ``tol``
    below float64 resolution): further levels would only divide by ~0.

    Parameters
    ----------
    mu, target, gap : float
        As in :func:`shrunk_mu`.
    margin : float
        The hinge's margin.
    C : float
        For the warning.
    name : str
        The solver, for the warning.
    stacklevel : int, default 2
        As in :func:`warnings.warn`, counted from the caller of this function.

    Returns
    -------
    mu : float
    stop : bool

    Examples
    --------
    >>> next_level(1e-3, 1e-9, 1e-4, 1.0, 1.0, "solver")[1]
    False
    """
    mu = shrunk_mu(mu, target, gap)
    if below_resolution(mu, margin):
        warnings.warn(f"{name}: smoothing mu = {mu:.3g} fell below float64 resolution at C = {C:g}, gap {gap:.3g}; "
                      "stopping early", ConvergenceWarning, stacklevel=stacklevel + 1)
        return mu, True
    return mu, False


def stalls(start_P, before_step, best_P, min_decrease):
    """Whether ``min_decrease`` stops a solve: its last Newton step gained less than that, and the
    whole solve at least that.

    A solve that has not yet gained ``min_decrease`` goes on to its gap: near an outer
    loop's fixed point that certifies the small step; at a coarse smoothing the first
    Newton steps can even raise the exact objective.

    Parameters
    ----------
    start_P : float
        The solve's first best objective.
    before_step : float or None
        The best objective before the last Newton step (None: the last iteration took none).
    best_P : float
        The best objective now.
    min_decrease : float
        0 never stops.

    Returns
    -------
    bool

    Examples
    --------
    >>> stalls(10.0, 5.05, 5.0, 0.1), stalls(10.0, 6.0, 5.0, 0.1), stalls(5.05, 5.05, 5.0, 0.1)
    (True, False, False)
    """
    return (min_decrease > 0 and before_step is not None and start_P - best_P >= min_decrease
            and before_step - best_P < min_decrease)


def best_dual_on_segment(ref, point, margin):
    """The best dual point on the segment from ``ref`` to ``point`` (``ref`` itself if none is better).

    Both ends are feasible, so every point between them is: ``D`` is a concave quadratic
    along the segment, maximised in closed form.

    Parameters
    ----------
    ref : tuple ``(alpha, v, D)`` or None
        The best dual point so far (None: start from ``point``): the dual variables (an
        array, or only their sum), ``v = X^T g(alpha)`` and the dual value
        ``D(alpha) = margin sum(alpha) - 0.5 ||v||^2``.
    point : tuple ``(alpha, v, D)``
        The new dual point.
    margin : float
        The hinge's margin (the dual's linear coefficient).

    Returns
    -------
    tuple ``(alpha, v, D)``

    Examples
    --------
    >>> import numpy as np
    >>> a = (np.array([0.0]), np.array([0.0]), 0.0)
    >>> b = (np.array([2.0]), np.array([2.0]), 2.0 - 2.0)         # D = margin * 2 - 0.5 * 4
    >>> alpha, v, D = best_dual_on_segment(a, b, 1.0)             # best at t = 1/2: D = 1 - 0.5
    >>> alpha.tolist(), D
    ([1.0], 0.5)
    """
    if ref is None:
        return point
    ref_alpha, ref_v, ref_D = ref
    alpha, v, _ = point
    dv = v - ref_v
    slope = margin * float(np.sum(alpha) - np.sum(ref_alpha)) - float(ref_v @ dv)
    curv = float(dv @ dv)
    t = 1.0 if curv <= 0 else min(max(slope / curv, 0.0), 1.0)
    D_t = ref_D + t * slope - 0.5 * t * t * curv
    if D_t > ref_D:
        return ref_alpha + t * (alpha - ref_alpha), ref_v + t * dv, D_t
    return ref
