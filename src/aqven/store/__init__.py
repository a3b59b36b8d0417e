"""AQVEN store layer."""
