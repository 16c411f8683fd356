"""Delivery: follow-ups, sessions, the delivery engine, the adapter contract and registry.

Carries an envelope from a finished run to its owner session: the follow-up is written
durably to the session inbox first, then the session's adapter (found by harness name in
the registry, never imported by name here) surfaces it. Imports `runtime.messaging`,
`runtime.compiler`, `runtime.store` and `runtime.core`; never `runtime.runs` or `adapters`.
"""
