"""Helpers shared by the tests (and the soak benches): projects on disk, fake providers, live servers,
the series kit and an MCP agent. Nothing here is collected as a test."""
