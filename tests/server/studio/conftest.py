"""The browser tests' fixtures (a spawned server, the browser, a logged-in page), from tests/support/studio.py."""

from support.studio import browser, page, server

__all__ = ["browser", "page", "server"]
