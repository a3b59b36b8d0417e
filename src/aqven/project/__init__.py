"""AQVEN project layer."""
