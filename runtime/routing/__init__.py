"""Routing: a message to any address (run, branch, room, session, coordinator, tool), the
in-run side (`emit`, `recv`), streaming senders, and `inspect` views of an address.

The top of the runtime: it may import every other runtime room; nothing in the runtime
imports it.
"""
