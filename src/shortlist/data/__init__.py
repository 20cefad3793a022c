"""Bundled example data (a small tool catalog for the quick start)."""
