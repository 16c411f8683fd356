"""The store: the only code that touches the state root.

`layout` names every file and directory under `$ACTORS_HOME`; `writes` holds the atomic
whole-file writes and directories, `appends` the whole-line appends and the one lock
helper, `reads` the readers that never see a half record; `journals` bounds and compacts
the append-only logs. Imports `runtime.core` only.
"""
