"""actors: detached run actors for people and coding agents.

The public Python API is listed in `__all__`; names are imported on first use so that
`import actors` (and the CLI built on it) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "spawn": "actors.api",
    "status": "actors.api",
    "runs": "actors.api",
    "wait": "actors.api",
    "result": "actors.api",
    "tail": "actors.api",
    "cancel": "actors.api",
    "kill": "actors.api",
    "ActorsError": "runtime.errors",
    "BadInput": "runtime.errors",
    "NotFound": "runtime.errors",
    "Conflict": "runtime.errors",
    "Refused": "runtime.errors",
    "StateDamaged": "runtime.errors",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from actors.api import (
        cancel as cancel,
    )
    from actors.api import (
        kill as kill,
    )
    from actors.api import (
        result as result,
    )
    from actors.api import (
        runs as runs,
    )
    from actors.api import (
        spawn as spawn,
    )
    from actors.api import (
        status as status,
    )
    from actors.api import (
        tail as tail,
    )
    from actors.api import (
        wait as wait,
    )
    from runtime.errors import (
        ActorsError as ActorsError,
    )
    from runtime.errors import (
        BadInput as BadInput,
    )
    from runtime.errors import (
        Conflict as Conflict,
    )
    from runtime.errors import (
        NotFound as NotFound,
    )
    from runtime.errors import (
        Refused as Refused,
    )
    from runtime.errors import (
        StateDamaged as StateDamaged,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'actors' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
