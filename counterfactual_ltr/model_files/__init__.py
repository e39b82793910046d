"""Model files: fitted rankers and propensities saved as JSON and arrays, never pickle.

* :mod:`.persistence`: :func:`save_model`, :func:`load_model`, and the propensity files of
  ``cltr propensity``;
* ``_model_state``: what each class's file may hold (every entry checked on load);
* ``_untrusted``: reading a file that may be hostile (sizes, types and depths bounded).

Above the estimators, whose fitted state it writes.
"""

from .persistence import load_model, save_model

__all__ = ["save_model", "load_model"]
