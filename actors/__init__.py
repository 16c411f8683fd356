"""actors: detached run actors for people and coding agents.

The public Python API is listed in `__all__`; names are imported on first use so that
`import actors` (and the CLI built on it) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.core.lazy import lazy_getattr

_EXPORTS = {
    "spawn": "actors.api",
    "status": "actors.api",
    "runs": "actors.api",
    "wait": "actors.api",
    "result": "actors.api",
    "tail": "actors.api",
    "cancel": "actors.api",
    "kill": "actors.api",
    "message": "actors.api",
    "recv": "actors.api",
    "ack": "actors.api",
    "emit": "actors.api",
    "inspect": "actors.api",
    "sender": "actors.api",
    "ActorsError": "runtime.core.errors",
    "BadInput": "runtime.core.errors",
    "NotFound": "runtime.core.errors",
    "Conflict": "runtime.core.errors",
    "Refused": "runtime.core.errors",
    "StateDamaged": "runtime.core.errors",
}

__all__ = sorted(_EXPORTS)
_EXPORTS["__version__"] = "actors._version"  # loaded on first use, like the verbs

if TYPE_CHECKING:
    from actors._version import __version__ as __version__
    from actors.api import (
        ack as ack,
        cancel as cancel,
        emit as emit,
        inspect as inspect,
        kill as kill,
        message as message,
        recv as recv,
        result as result,
        runs as runs,
        sender as sender,
        spawn as spawn,
        status as status,
        tail as tail,
        wait as wait,
    )
    from runtime.core.errors import (
        ActorsError as ActorsError,
        BadInput as BadInput,
        Conflict as Conflict,
        NotFound as NotFound,
        Refused as Refused,
        StateDamaged as StateDamaged,
    )


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
