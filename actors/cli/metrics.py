"""`actors metrics`: the dashboard's `/metrics` text on stdout, or written to a file.

For Prometheus without a server: node_exporter's textfile collector reads every `*.prom`
file of one directory, so a cron line `actors metrics --output DIR/actors.prom` publishes
the numbers. The file is written whole (a temporary file renamed over it), because the
collector may read at any moment and must never see half a scrape.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command("metrics")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file (replaced whole) instead of printing.",
)
def metrics_cmd(output: Path | None) -> None:
    """Print the state root's metrics in the Prometheus text format (as /metrics serves)."""
    from actors.dashboard.metrics import render_metrics
    from runtime.store.layout import StateRoot

    text = render_metrics(StateRoot.from_env())
    if output is None:
        click.echo(text, nl=False)
        return
    _replace(output, text.encode())


def _replace(path: Path, data: bytes) -> None:
    """Write `path` through a temporary file in the same directory, then rename it over
    the old one; the file keeps the umask's mode so the collector's user can read it."""
    import contextlib
    import os
    import tempfile

    from runtime.core.errors import BadInput

    target = path.absolute()
    _refuse_special(path, target)
    temp = None
    try:
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)
        os.replace(temp, target)
    except OSError as exc:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        raise BadInput(
            f"cannot write {path}: {exc.strerror}", hint="name a file in a writable directory"
        ) from None


def _refuse_special(path: Path, target: Path) -> None:
    """The rename replaces whatever has the name: `--output /dev/null` (run as root) put a
    regular file where the device was, for every program on the machine, and a FIFO a
    reader waits on would be swapped away under it. Only a regular file (or a link, which
    the rename replaces, never its target) is replaced."""
    import os
    import stat

    from runtime.core.errors import BadInput

    try:
        mode = os.lstat(target).st_mode
    except OSError:
        return  # nothing there (or the write below says what is wrong)
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise BadInput(
            f"{path} is not a regular file; it is never replaced",
            hint="name a file; to discard the text, leave out --output and redirect stdout",
        )
