"""Errors a user can act on.

Every failure caused by input (a malformed recipe, an unknown run, a refused kill) is an
`ActorsError`: the CLI prints its one-line message and exits 2 without a traceback, and
nothing has been written by the time it is raised. Anything else is a bug.
"""

from __future__ import annotations


class ActorsError(Exception):
    """A problem the caller can fix; `str(err)` is one line that says what and how."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}; {hint}")


class BadInput(ActorsError):
    """A value, address, recipe or option is malformed."""


class NotFound(ActorsError):
    """A run, recipe or session named by the caller does not exist."""


class Conflict(ActorsError):
    """The request clashes with current state (an id in use, a run already finished)."""


class Refused(ActorsError):
    """Ownership or process identity does not allow the action."""


class StateDamaged(ActorsError):
    """A state file exists but cannot be read; the data is kept for inspection.

    `path` names the damaged file when it is known, so a view of many runs can show
    `(damaged: FILE)` for the one run and go on with the others."""

    def __init__(self, message: str, *, hint: str | None = None, path: object = None) -> None:
        super().__init__(message, hint=hint)
        self.path = None if path is None else str(path)
