"""Actor addresses: `run:<id>`, `branch:<run>/<branch>`, `room:<run>`, `session:<id>`,
`coordinator`, `tool:<name>`.

Every id component obeys the same rule as run ids (no `/`, no leading `.`), so an
address can never name a path outside the state root (`branch:x/..` is rejected).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from runtime.core.errors import BadInput
from runtime.core.ids import ID_PATTERN, is_valid_id

Kind = Literal["run", "branch", "room", "session", "coordinator", "tool"]
KINDS: tuple[Kind, ...] = ("run", "branch", "room", "session", "coordinator", "tool")


class Address(NamedTuple):
    kind: Kind
    target: str | None = None
    """The run id (run, branch, room), session id, or tool name."""
    branch: str | None = None

    def __str__(self) -> str:
        if self.kind == "coordinator":
            return "coordinator"
        if self.kind == "branch":
            return f"branch:{self.target}/{self.branch}"
        return f"{self.kind}:{self.target}"


def _bad(text: str, why: str) -> BadInput:
    shown = text if len(text) <= 80 else text[:77] + "..."
    return BadInput(
        f"invalid address {shown!r}: {why}",
        hint="use run:ID, branch:RUN/BRANCH, room:RUN, session:ID, coordinator or tool:NAME "
        f"(ids match {ID_PATTERN})",
    )


def parse_address(text: str) -> Address:
    """Parse and validate an address; raises BadInput naming what is wrong."""
    if text == "coordinator":
        return Address("coordinator")
    kind, sep, rest = text.partition(":")
    if not sep:
        raise _bad(text, "missing the KIND: prefix")
    if kind not in KINDS or kind == "coordinator":
        raise _bad(text, f"unknown kind {kind!r}")
    if kind == "branch":
        run, slash, branch = rest.partition("/")
        if not slash or not is_valid_id(run) or not is_valid_id(branch):
            raise _bad(text, "a branch address is branch:RUN/BRANCH with two valid ids")
        return Address("branch", run, branch)
    if kind == "session" and rest.startswith(("user:", "run:")):
        ident = rest.partition(":")[2]
        if is_valid_id(ident):  # the implicit owners: a plain shell user, or a parent run
            return Address("session", rest)
    if not is_valid_id(rest):
        raise _bad(text, f"{rest!r} is not a valid id")
    return Address(kind, rest)
