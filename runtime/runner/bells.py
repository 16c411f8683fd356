"""Where the guardians of a run's owner listen, and how a runner tells them it is up.

A guardian (runtime.runner.guardian) sleeps on a doorbell FIFO under the owner's
`guardians/` directory: a session's, a parent run's (`run:<id>` owns the runs it spawned),
or the state root's (every run: `actors watch`). A runner rings its owner's and the
root's once its identity is recorded, so they watch it from then on. Its own module
because the runner's first steps ring, and must not import the guardian itself.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from runtime.core.errors import ActorsError
from runtime.store.layout import StateRoot, session_paths


def guardian_bells(root: StateRoot, owner: str | None) -> Path:
    """Where the guardians of `owner`'s runs listen (runtime.runner.guardian): under the
    parent run's doorbells for a run owner (`run:<id>`), else under the session's; for
    every owner (None: `actors watch`), at the root."""
    if owner is None:
        return root.guardians
    if owner.startswith("run:"):
        return root.run(owner[4:]).guardians
    return session_paths(root, owner).guardians


def ring_guardians(owner: str) -> None:
    """Tell the guardians of `owner` (in the state root of the environment) that one of
    its runners has started with its identity recorded, so they watch it too. Never
    raises: a runner must run whether or not anyone can be told."""
    from runtime.messaging.doorbells import ring

    root = StateRoot.from_env()
    for where in (owner, None):  # its owner's guardians, and those of every run
        with contextlib.suppress(ActorsError, OSError):
            ring(guardian_bells(root, where))
