"""The runner: the one process that owns a run from its start to its end.

Its entry point (`entry`), the poll loop that supervises the run (`loop`), the template
graph as a state machine (`graph`), one command's bookkeeping and process (`command`,
`output`), parking by exec() when idle (`park`), the run's first steps and its end
(`lifecycle`), step follow-ups (`steps`), and the guardians that fold a run whose runner
died (`guardian`, `fold`, `bells`).

Imports `runtime.views` (a guardian reads the runs it watches), `runtime.delivery` (a
run's end becomes a follow-up), `runtime.messaging`, `runtime.compiler`, `runtime.store`
and `runtime.core`; never `runtime.runs`, which starts runners from outside.
"""

import os

ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "entry.py")
"""The runner's entry point, as spawn starts it (runtime.runs.launch): a runner is known
by it in its argv (runtime.runner.lifecycle)."""
