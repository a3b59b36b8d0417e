"""`aqven studio`: start the project server if none runs, then open (or print) Studio's address."""

from __future__ import annotations

import webbrowser
from pathlib import Path

from aqven.cli.render import console
from aqven.server.lifecycle import HOST, ensure_server


def studio_url(port: int, page: str | None = None) -> str:
    route = (page or "").strip().lstrip("#/")
    return f"http://{HOST}:{port}/studio/" + (f"#/{route}" if route else "")


def open_studio(root: Path, *, page: str | None = None, open_browser: bool = True) -> str:
    """The Studio URL of this project's server (started when needed); opened in a browser unless told not to."""
    url = studio_url(ensure_server(root), page)
    console.print(f"Studio: {url}", markup=False, soft_wrap=True)
    if open_browser:
        try:
            opened = webbrowser.open(url)
        except webbrowser.Error:
            opened = False
        if not opened:
            console.print("(no browser found here: open the address above)", markup=False)
    return url
