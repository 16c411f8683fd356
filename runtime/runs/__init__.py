"""Runs: spawn, the runner process, the template executor, status, control (cancel and
kill), ownership, the index, retention and the reconciler.

One run's life from spawn to result. Imports `runtime.delivery` (a run's end becomes a
follow-up), `runtime.messaging`, `runtime.compiler`, `runtime.store` and `runtime.core`.
"""
