"""The store: the only code that touches the state root.

`layout` names every file and directory under `$ACTORS_HOME`; `files` holds the atomic
writes, the whole-line appends and the one lock helper; `journals` bounds and compacts the
append-only logs. Imports `runtime.core` only.
"""
