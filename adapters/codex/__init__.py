"""Codex: the app-server adapter and its JSON-RPC client."""
