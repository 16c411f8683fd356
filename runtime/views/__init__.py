"""Read models: what a run, a session or a room is now, derived from their files.

A run's status (`status`), the listing and its index (`listing`, `index`), the live board
of a long-lived viewer (`board`), the operator's tally (`tally`), the artifact manifest
(`artifacts`), waiting for a run's end (`waiting`), `inspect` views of an address
(`inspect`), a swarm's room (`room_board`), one run's page (`run_page`) and each
session's deliveries as observed (`observed`). Nothing here writes a run's state.

Imports `runtime.delivery`, `runtime.messaging`, `runtime.compiler`, `runtime.store` and
`runtime.core`; the runner, the run operations and routing import it.
"""
