"""One host as the code uses it: its record, its files and its ssh command line."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Any

from runtime.core.terminal import one_line
from runtime.hosts.records import HostRecord, host_paths, load_host
from runtime.hosts.ssh import HostAnswer, posix_command, remote_command, run_remote, ssh_argv
from runtime.store.layout import HostPaths, StateRoot


class Host:
    __slots__ = ("paths", "record", "root")

    def __init__(self, root: StateRoot, record: HostRecord) -> None:
        self.root = root
        self.record = record
        self.paths: HostPaths = host_paths(root, record["name"])

    @classmethod
    def load(cls, root: StateRoot, name: str) -> Host:
        return cls(root, load_host(root, name))

    @property
    def name(self) -> str:
        return self.record["name"]

    def ssh(self) -> list[str]:
        """ssh up to the remote command, over the host's one master connection."""
        r = self.record
        return ssh_argv(self.paths, r["user"], r["address"], r["port"])

    def command(self, args: Sequence[str]) -> list[str]:
        """The full argv that runs `actors ARGS` on the host."""
        return [*self.ssh(), remote_command(self.record["actors"], args)]

    def run(
        self, args: Sequence[str], *, input: str | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """`actors ARGS` on the host, output captured (HostUnreachable when ssh fails)."""
        r = self.record
        return run_remote(
            self.command(args),
            name=r["name"],
            address=r["address"],
            port=r["port"],
            input=input,
            timeout=timeout,
        )

    def reach(self, *, timeout: float = 30.0) -> None:
        """The host's connection up now (its master made if there is none), or
        HostUnreachable: what runs over it next fails only by a cut connection."""
        r = self.record
        run_remote(
            [*self.ssh(), "true"],
            name=r["name"],
            address=r["address"],
            port=r["port"],
            timeout=timeout,
        )

    def said(self, stderr: str) -> str:
        """What a failed verb there prints here: the last lines of the host's stderr,
        each said to come from the host (error_lines)."""
        lines = error_lines(stderr)[-3:]
        return "".join(f"actors: on host {self.name}: {line}\n" for line in lines)

    def answer(
        self,
        verb: str,
        stdout: str,
        *,
        max_bytes: int,
        hint: str = "check the actors there (`actors host ls`)",
    ) -> dict[str, Any]:
        """The host's `actors VERB --json` answer: one bounded JSON object ({} for no
        output), or HostAnswer's one line saying the host's actors answered something
        else (a different or hostile actors there; never a traceback)."""
        from runtime.core.bounded_json import decode

        if not stdout.strip():
            return {}
        try:
            found = decode(stdout, max_bytes=max_bytes)
        except ValueError as err:
            found = err
        if isinstance(found, dict):
            return found
        why = f"{found}" if isinstance(found, ValueError) else f"a JSON {type(found).__name__}"
        raise HostAnswer(
            f"host {self.name}'s actors answered {verb} with what is not its JSON object: "
            f"{one_line(why, 120)}",
            hint=hint,
        )

    def log(self, text: str) -> None:
        """One event in `hosts/<name>/link.log` (what the link and the outbox did that no
        one waits to hear), best effort."""
        import contextlib

        from runtime.core.errors import ActorsError
        from runtime.core.ids import now_iso
        from runtime.store.appends import append_jsonl

        if not self.paths.record.exists():
            return  # the host was removed (`host rm --force`): nothing to write it into
        with contextlib.suppress(OSError, ActorsError):
            append_jsonl(self.paths.link_log, {"ts": now_iso(), "event": text})

    def shell(
        self, argv: Sequence[str], *, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[bytes]:
        """A plain command on the host (not actors), each argument quoted; bytes out."""
        return subprocess.run(
            [*self.ssh(), posix_command(argv)],
            capture_output=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )


def error_lines(stderr: str) -> list[str]:
    """What a host's actors said on stderr, a line each: control characters escaped,
    bounded, its own `actors: ` prefix off (the caller says where it came from)."""
    return [
        one_line(line, 400).removeprefix("actors: ") for line in stderr.splitlines() if line.strip()
    ]
