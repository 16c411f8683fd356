"""`actors dashboard`: a local web page over the state root (runs, rooms, sessions), with
live updates and the CLI's cancel / kill / message actions, and the `/metrics` it serves
(metrics: the Prometheus text of runtime.views.tally).

server (bind, token, Ctrl-C) -> app (ASGI routes) -> auth (token, CSRF, Host) | api (the
runtime's read models as JSON) | actions (the CLI's control functions) | live (file
events -> the run board -> server-sent events). Nothing here is imported by the hot CLI
paths: the click command imports the server when the verb runs.
"""
