"""Experiments: their typed schema, loading and variant assembly, the loaded workspace, input hashes."""
