"""Benchmarks that print their figures: ``python -m experiments.benchmarks.NAME``; never timed unit tests."""
