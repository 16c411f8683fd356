"""Messaging primitives: addresses, the one envelope builder, mailboxes (durable inbox
journal, claims, wake doorbells) and where each run keeps its boxes.

Imports `runtime.store` and `runtime.core`; routing a message to an address lives above
runs, in `runtime.routing`.
"""
