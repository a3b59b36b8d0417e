"""`aqven series`: one command that runs an experiment (`aqven series EXPERIMENT ...`) and a group of sub-commands
(`aqven series list`, `aqven series follow ID`).

Click has either a positional argument or sub-commands. This group routes: a first word that names a sub-command
goes to it; anything else (an experiment, or options before it) goes to the hidden command that runs an experiment,
so `aqven series reply_overpromise_risk --cases 2` works as it always did. An experiment named like a sub-command
runs with `--` before its name (`aqven series -- list`), and `aqven series list --cases 2` says so instead of a bare
"no such option".
"""

from __future__ import annotations

from typing import Any

from typer._click.core import Command, Context  # typer >= 0.29 carries its own click: its types, its errors
from typer._click.exceptions import UsageError
from typer.core import TyperCommand, TyperGroup

RUN = "\0experiment"
"""The name of the hidden command that runs an experiment: no word typed at a shell can be it (argv has no NUL)."""

RUN_ONLY = ("--on", "--cases", "--repeats", "--cap", "--simulate", "--client-op-id", "--seed")
"""Options of running an experiment that no sub-command has: given to `list` or `follow`, an experiment of that
name was probably meant."""


class SeriesGroup(TyperGroup):
    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if args and args[0] == "--":
            args = [RUN, *args[1:]]
        elif args and args[0] in self.commands and args[0] != RUN:
            stray = [a for a in args[1:] if a.split("=", 1)[0] in RUN_ONLY]
            if stray and "--help" not in args:
                raise UsageError(
                    f"`aqven series {args[0]}` is a sub-command and has no {stray[0]}; to run an experiment named "
                    f"{args[0]!r}, put -- before it: aqven series -- {' '.join(args)}",
                    ctx,
                )
        elif args:
            args = [RUN, *args]  # an experiment, options before it, or --help (the help of running one)
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        # The command that runs an experiment shows as `aqven series [OPTIONS] EXPERIMENT` in its usage and errors.
        return ("" if name == RUN else name), cmd, rest

    def format_usage(self, ctx: Context, formatter: Any) -> None:
        formatter.write_usage(ctx.command_path, "EXPERIMENT [OPTIONS] | list [OPTIONS] | follow SERIES [OPTIONS]")


class RunCommand(TyperCommand):
    """The hidden command that runs an experiment: its usage reads `aqven series [OPTIONS] EXPERIMENT`."""

    def format_usage(self, ctx: Context, formatter: Any) -> None:
        formatter.write_usage(ctx.command_path.rstrip(), " ".join(self.collect_usage_pieces(ctx)))
