"""``python -m counterfactual_ltr``: the ``cltr`` command (see :mod:`counterfactual_ltr.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
