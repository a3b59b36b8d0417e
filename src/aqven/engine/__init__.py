"""AQVEN engine layer."""
