"""The hints of errors as a person at a terminal reads them: CLI commands instead of REST routes and MCP tools.

The server sets one hint per error, for every surface, and cannot tell who calls (the CLI and an agent's REST
client send the same token and the same requests). The REST and MCP hints stay as they are; the CLI, which knows
its own commands, rewrites the hints of the codes it has a command for (below). The code and the message never
change, so a script that reads them sees the same error on every surface.
"""

from __future__ import annotations

from aqven.errors import (
    CASE_NOT_FOUND,
    HOLDOUT_HIDDEN,
    RUN_NOT_FOUND,
    SERIES_NOT_FOUND,
    AqvenError,
)

CLI_HINTS: dict[str, str] = {
    SERIES_NOT_FOUND: "`aqven series list` lists this project's series, newest first (`--experiment ID` for one)",
    CASE_NOT_FOUND: "`aqven dataset cases DATASET` lists a dataset's working (dev) cases",
    RUN_NOT_FOUND: "`aqven run` prints its run's id; `aqven studio runs` lists the project's runs",
}


def for_the_cli(err: AqvenError) -> AqvenError:
    """`err` with a hint that names CLI commands where the CLI has one for its code (a held-out case asked for
    alone: where the working cases are listed); any other error as the server gave it."""
    hint = CLI_HINTS.get(err.code)
    if err.code == HOLDOUT_HIDDEN and "GET /api/datasets" in err.hint:
        hint = (
            "run working (dev) cases (`aqven dataset cases DATASET` lists them); held-out cases run only inside a "
            "series"
        )
    if hint is None:
        return err
    return AqvenError(
        err.message,
        code=err.code,
        hint=hint,
        file=err.file,
        line=err.line,
        details=err.details,
        http_status=err.http_status,
    )
