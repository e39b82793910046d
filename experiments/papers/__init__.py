"""Reproductions of the papers' tables and figures: ``python -m experiments NAME``."""
