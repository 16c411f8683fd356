"""OpenCode: the HTTP adapter (prompt_async, confirmed from the event stream)."""
