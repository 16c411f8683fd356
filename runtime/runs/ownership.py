"""Who is calling, and may they control this run?

A caller is either a session (`--session`, else `$ACTORS_SESSION`, else `user:<login>`
for a plain shell) or a run acting through its capability token (`$ACTORS_RUN_ID` plus
`$ACTORS_RUN_TOKEN`, set by the runner for every child it starts; the run's `token` file
holds only its verifier, sha256, so reading the file does not give the token). Children never borrow
a session id, so a process inside one run cannot act on a sibling run. A run belongs to
the principal that spawned it; others are refused unless they pass `--force`. A session
that succeeded another in the same harness process (Claude Code's `/clear`, proven by the
harness-process record, never by a caller's word: runtime.delivery.succession) is the
same principal as its predecessors.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

from runtime.core import config
from runtime.core.errors import BadInput, Refused
from runtime.core.ids import is_session_id, is_valid_id, token_matches
from runtime.store.layout import StateRoot
from runtime.store.reads import read_bytes

if TYPE_CHECKING:
    from runtime.store.records import RunRecord


class Principal(NamedTuple):
    """The identity an action is taken under."""

    id: str
    """`session:<id>`-style owner string: a session id, `user:<login>` or `run:<id>`."""

    via_run_token: bool = False


def _login() -> str:
    """What getpass.getuser() answers, without importing getpass (it pulls in termios on
    every CLI start): the login variables first, then the password database."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if value := os.environ.get(name):
            return value
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return ""


def local_user_session() -> str:
    """`user:<login>`, or `user:<uid>` when the login is not a safe id (e.g. `a@corp`)."""
    login = _login()
    return f"user:{login}" if is_valid_id(login) else f"user:{os.getuid()}"


def current_principal(root: StateRoot, session: str | None = None) -> Principal:
    """Resolve the caller from flags and environment; a bad run token fails closed."""
    run_id = config.text(config.RUN_ID)
    if run_id and session is not None:
        raise Refused(
            "--session cannot be used inside a run",
            hint="processes of a run act through its token ($ACTORS_RUN_TOKEN)",
        )
    if run_id:
        token = config.run_token()
        if not is_valid_id(run_id) or not token:
            raise Refused("ACTORS_RUN_ID is set without a valid ACTORS_RUN_TOKEN")
        try:
            token_file = root.run(run_id).token  # a verifier: 4 KiB is plenty
            stored = read_bytes(token_file, limit=4096).decode(errors="replace").strip()
        except OSError:
            raise Refused(
                f"ACTORS_RUN_ID={run_id} names no run in {root.path}",
                hint="unset ACTORS_RUN_ID, or set ACTORS_HOME to the run's state root",
            ) from None
        if not token_matches(stored, token):
            raise Refused(f"ACTORS_RUN_TOKEN does not match run {run_id}")
        return Principal(f"run:{run_id}", via_run_token=True)
    chosen = session or config.text(config.SESSION)
    if not chosen:
        return Principal(local_user_session())
    if not is_session_id(chosen):
        raise BadInput(
            f"invalid session id {chosen[:80]!r}",
            hint="use letters, digits, '._-' (or user:<login> with the same characters)",
        )
    return Principal(chosen)


class NotOwner(Refused):
    """Refused because what is acted on is another principal's: `owner` names it, so a
    caller that can ask again (the dashboard's second confirmation) knows whose it is."""

    def __init__(self, target: str, owner: object, principal: Principal, action: str) -> None:
        super().__init__(
            f"{target} belongs to {owner}, not {principal.id}; refusing to {action} it",
            hint="pass --force to act on another session's run",
        )
        self.owner = str(owner)


def controls(
    root: StateRoot, principal: Principal, owner: object, *, run: str | None = None
) -> bool:
    """Whether `principal` controls what `owner` owns without --force: it is the owner,
    a session that went on from the owner (succession), or the run `run` itself acting
    through its token. The one rule for every run, local or placed on a host (a remote
    run is never a principal here, so its caller passes no `run`)."""
    if principal.id == owner or (run is not None and principal.id == f"run:{run}"):
        return True
    return isinstance(owner, str) and _succeeded(root, principal, owner)


def check_owner(
    root: StateRoot,
    principal: Principal,
    owner: object,
    *,
    target: str,
    action: str,
    force: bool,
    run: str | None = None,
) -> bool:
    """Raise NotOwner unless `principal` controls `target` (see `controls`) or forces it;
    True when it is --force that lets it through (the owner is then told of a stop)."""
    if controls(root, principal, owner, run=run):
        return False
    if not force:
        raise NotOwner(target, owner, principal, action)
    return True


def check_control(
    run: RunRecord, principal: Principal, *, force: bool, action: str, root: StateRoot
) -> bool:
    """Raise NotOwner unless `principal` may `action` this run; True when only --force
    allowed it (check_owner)."""
    run_id = run.get("run")
    owner = run.get("owner_id")
    return check_owner(
        root, principal, owner, target=f"run {run_id}", action=action, force=force, run=run_id
    )


def _succeeded(root: StateRoot, principal: Principal, owner: str) -> bool:
    """Whether session `principal` goes on from `owner` (its lineage holds it)."""
    if principal.via_run_token or not is_valid_id(principal.id):
        return False
    from runtime.core.errors import ActorsError
    from runtime.delivery.succession import lineage

    try:
        return owner in lineage(root, principal.id)
    except (ActorsError, OSError):
        return False
