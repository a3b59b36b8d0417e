"""AQVEN cli layer."""
