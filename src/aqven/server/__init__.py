"""AQVEN server layer."""
