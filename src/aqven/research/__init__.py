"""AQVEN research layer."""
