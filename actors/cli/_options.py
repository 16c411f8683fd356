"""Click options several command modules share, spelled once."""

from __future__ import annotations

from typing import Any

import click

session_option = click.option(
    "--session",
    metavar="ID",
    help="Act as this session (default: $ACTORS_SESSION, else your user).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
force_option = click.option("--force", is_flag=True, help="Act even on another session's run.")


class _Seconds(click.ParamType[float]):
    """A `--timeout` or `--grace`: runtime.core.config.parse_seconds's rule, so NaN, an
    infinite, negative or too long wait is refused here, in one line, not by the poll it
    would reach (the hand parser, actors.cli._fast, applies the same rule)."""

    name = "seconds"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        from runtime.core.config import SECONDS_RULE, parse_seconds

        parsed = parse_seconds(str(value))
        if parsed is None:
            self.fail(f"{str(value)!r} is not {SECONDS_RULE}", param, ctx)
        return parsed


SECONDS = _Seconds()
