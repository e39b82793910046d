"""Scripts that reproduce the papers' tables and figures, and benchmarks.

Run one with ``python -m experiments.<name> [--quick]``; ``python -m experiments all --quick``
runs every reproduction script. Each writes ``results/<name>.json`` (every plotted number
with the settings and seeds that made it) and ``results/<name>.png``.
"""
