"""The version of counterfactual-ltr (one place: the package, the command line and saved models read it)."""

__version__ = "0.1.0"
