"""Checks of scalar hyper-parameters, shared by every public entry point.

Every check names the parameter in its message, raises ``TypeError`` for a
value of the wrong kind (a string, a bool where a number belongs, an array)
and ``ValueError`` for a value of the right kind out of range (NaN, inf,
below a bound, a float that is not a whole number where a count belongs).
Nothing is truncated or clipped silently: ``n_passes=2.7`` is an error, not
two passes.

Examples
--------
>>> check_int(3.0, "n_passes", min_value=1)
3
>>> check_int(2.7, "n_passes", min_value=1)
Traceback (most recent call last):
...
ValueError: n_passes must be a whole number, got 2.7
>>> check_real(0.5, "tol", min_value=0, include_min=False)
0.5
>>> check_real("1e-3", "tol")
Traceback (most recent call last):
...
TypeError: tol must be a real number, got str '1e-3'
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["check_int", "check_real", "check_probability", "check_optional_int", "check_optional_real",
           "check_random_state", "check_bool"]


def _describe(value) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _as_scalar(value, name: str):
    """Unwrap 0-d arrays; reject bools, strings, arrays and other non-numbers with a TypeError."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {_describe(value)}")
    return value


def _check_range(value, name, min_value, max_value, include_min, include_max):
    if min_value is not None and (value < min_value or (not include_min and value == min_value)):
        op = ">=" if include_min else ">"
        raise ValueError(f"{name} must be {op} {min_value}, got {value}")
    if max_value is not None and (value > max_value or (not include_max and value == max_value)):
        op = "<=" if include_max else "<"
        raise ValueError(f"{name} must be {op} {max_value}, got {value}")


def check_real(value, name: str, *, min_value=None, max_value=None, include_min: bool = True,
               include_max: bool = True, allow_inf: bool = False) -> float:
    """``value`` as a finite float in the given range, or a clear ``TypeError``/``ValueError``."""
    value = _as_scalar(value, name)
    value = float(value)
    if np.isnan(value) or (np.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be a finite number, got {value}")
    _check_range(value, name, min_value, max_value, include_min, include_max)
    return value


def check_int(value, name: str, *, min_value=None, max_value=None) -> int:
    """``value`` as an int (a float only if it is a whole number) in the given range."""
    value = _as_scalar(value, name)
    if not isinstance(value, numbers.Integral):
        if not np.isfinite(value):
            raise ValueError(f"{name} must be a finite whole number, got {value}")
        if float(value) != int(value):
            raise ValueError(f"{name} must be a whole number, got {value}")
    value = int(value)
    _check_range(value, name, min_value, max_value, True, True)
    return value


def check_bool(value, name: str) -> bool:
    """``value`` as a bool when it is one (Python's or NumPy's), else a ``ValueError`` naming the option.

    An option read by truthiness takes ``"no"``, ``"false"`` or ``[False]`` as on; only a real
    boolean says which the caller meant.

    >>> import numpy as np
    >>> check_bool(np.True_, "monotone")
    True
    >>> check_bool("no", "monotone")
    Traceback (most recent call last):
    ...
    ValueError: monotone must be True or False, got str 'no'
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {_describe(value)}")


def check_probability(value, name: str, *, include_zero: bool = True, include_one: bool = True) -> float:
    """A probability in ``[0, 1]`` (ends excluded on request)."""
    return check_real(value, name, min_value=0.0, max_value=1.0, include_min=include_zero, include_max=include_one)


def check_optional_int(value, name: str, **bounds):
    """``None`` passes through; anything else goes through :func:`check_int`."""
    return None if value is None else check_int(value, name, **bounds)


def check_optional_real(value, name: str, **bounds):
    """``None`` passes through; anything else goes through :func:`check_real`."""
    return None if value is None else check_real(value, name, **bounds)


def check_random_state(random_state, name: str = "random_state") -> np.random.Generator:
    """A NumPy ``Generator`` from ``None``, a non-negative int, a ``Generator``, ``SeedSequence``,
    ``BitGenerator`` or a legacy ``RandomState`` (which seeds a new generator); ``TypeError`` for
    anything else (a float, a string, a bool), ``ValueError`` for a negative seed.

    >>> import numpy as np
    >>> float(check_random_state(0).random()) == float(np.random.default_rng(0).random())
    True
    >>> check_random_state("0")
    Traceback (most recent call last):
    ...
    TypeError: random_state must be None, a non-negative int or a numpy Generator, got str '0'
    """
    if random_state is None or isinstance(random_state, (np.random.Generator, np.random.SeedSequence,
                                                         np.random.BitGenerator)):
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(int(random_state.randint(0, 2**31 - 1)))
    if isinstance(random_state, np.ndarray) and random_state.ndim == 0:
        random_state = random_state.item()
    if isinstance(random_state, (bool, np.bool_)) or not isinstance(random_state, numbers.Integral):
        raise TypeError(f"{name} must be None, a non-negative int or a numpy Generator, got {_describe(random_state)}")
    if random_state < 0:
        raise ValueError(f"{name} must be a non-negative int, got {random_state}")
    return np.random.default_rng(int(random_state))
