"""Exporting rankers to the stacks that serve them."""
