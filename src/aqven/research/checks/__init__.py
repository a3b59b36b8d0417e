"""Experiment checks: what a check sees of an attempt and how built-in, function and judge checks score it."""
