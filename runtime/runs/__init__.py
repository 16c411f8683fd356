"""Run operations from outside a run: spawn (claim the state directory, start the
runner), cancel and kill, ownership, retention, the reconciler, tools and keeping a
recipe.

Imports `runtime.runner` (the runner it starts, the fold of a dead runner's run),
`runtime.views` and everything below.
"""
