"""AQVEN: make LLM flows reliable in rounds."""

__version__ = "0.1.0"
ENGINE_VERSION = __version__
