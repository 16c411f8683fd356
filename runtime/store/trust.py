"""Trust in the state root, as ssh's StrictModes: a state directory is used only if it
is ours (the effective uid) and no one else can write in it, else the command refuses
in one line that says how to fix it (docs/state-files.md, "Who may use a state root").

One `lstat` per directory: the root and its top directories once per use of the root
(`StateRoot.verify`), each run or session directory as it is entered.
"""

from __future__ import annotations

import os
from pathlib import Path

from runtime.core.errors import Refused, StateDamaged

_S_IFMT, _S_IFLNK = 0o170000, 0o120000


def trusted_dir(path: Path | str, *, root: Path | None = None) -> None:
    """Refuse a state directory that is a link, is not owned by us (the effective uid),
    or is group- or world-writable: someone else could have planted or removed files in
    it (a forged run.json aims a kill). A missing directory passes (we create it 0700).
    One stat; `root` makes the message name the directory within it."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return
    refuse_untrusted(path, st.st_mode, st.st_uid, root=root)


def refuse_untrusted(path: Path | str, mode: int, uid: int, *, root: Path | None = None) -> None:
    """The checks of `trusted_dir` on a stat result already at hand (a scandir entry)."""
    me = os.geteuid()
    if uid == me and not mode & 0o022 and (mode & _S_IFMT) != _S_IFLNK:
        return
    path = Path(path)
    if path == root:
        what = f"state root {path}"
    elif root is not None and path.is_relative_to(root):
        what = f"{path.relative_to(root)}/ in state root {root}"
    else:
        what = f"state directory {path}"
    if (mode & _S_IFMT) == _S_IFLNK:
        raise StateDamaged(
            f"{path} is a symlink; refusing to follow it",
            hint="state directories are never links; remove it",
        )
    if uid != me:
        fix = (
            "use your own ACTORS_HOME" if path == root else "remove it, or use your own ACTORS_HOME"
        )
        raise Refused(f"{what} is owned by uid {uid}, not you (uid {me})", hint=fix)
    raise Refused(
        f"{what} is writable by others (mode {mode & 0o777:o}), so its files cannot be trusted",
        hint=f"run `chmod go-w {path}` (actors makes its directories 0700), or remove it",
    )
