"""`tmux`: the last resort for a harness with no delivery surface: type one line.

Never into a shell: a pane whose foreground program is a shell executes the line, so delivery fails there, not retryable, and
the receipt says which program and what to do. Never a control character: the line is
made inert first (runtime.core.terminal), so a run-written summary cannot edit the
pane's input line, and quoted as data (runtime.delivery.render, which also renders the
body file the line points at). Never a multi-line paste (TUIs split, swallow or auto-submit those): the body is written
to a file under the session directory, and one literal line pointing at it is typed with
`send-keys -l`. Enter is sent separately after a delay (Ink-based TUIs drop an Enter that
arrives in the same read as the text). A pane in copy mode is taken out of it first
(copy mode swallows input). Delivery is confirmed by seeing the line in the pane.

Options: `target` (session:window.pane or %pane id), optional `socket` (a `-L` name) or
`socket_path` (a `-S` path), `enter_delay` seconds (default 0.15), `confirm_timeout`
seconds (default 2).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from typing import TYPE_CHECKING, Any, ClassVar

from runtime.core.terminal import one_line
from runtime.delivery.contract import (
    NO_CHECK,
    AdapterError,
    Capabilities,
    CheckedAdapter,
    DeliveryContext,
    Option,
    Receipt,
)

if TYPE_CHECKING:
    from runtime.delivery.doctor import Probe

SHELLS = (
    "sh", "bash", "zsh", "dash", "ash", "ksh", "mksh", "pdksh", "oksh", "loksh", "yash",
    "posh", "fish", "tcsh", "csh", "nu", "nushell", "pwsh", "powershell", "xonsh",
    "elvish", "ion", "osh", "oil", "ysh", "rc", "es", "busybox", "toybox", "murex",
)  # fmt: skip
"""Foreground programs that execute a typed line as a command. (A language REPL runs a
typed line too, but is not detected: `python` is also how many TUIs show up. Never point
the adapter at a REPL.)"""
_VERSIONED = re.compile(r"^-?(?:.*/)?([a-z]+?)(?:-?[0-9][0-9.]*)?(?:\.exe)?$")


def executing_program(command: str) -> str | None:
    """The shell `command` (tmux `#{pane_current_command}`: `bash`, `-zsh`, `/bin/sh`,
    `bash5.2`, `pwsh.exe`) is, or None for anything else."""
    match = _VERSIONED.match(command.strip().lower())
    name = match.group(1) if match else ""
    return name if name in SHELLS else None


class TmuxAdapter(CheckedAdapter):
    HARNESS = "tmux"
    capabilities = Capabilities(
        wake_mode="pty keystrokes into a tmux pane",
        level="D4",
        modes=("immediate", "on-idle", "manual"),
        notes="wakes an idle TUI by typing; not a native channel (D1 not claimed)",
    )
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        Option("target", "the pane: SESSION:WINDOW.PANE or a %pane id"),
        Option("socket", "the tmux server's -L socket name"),
        Option("socket_path", "the tmux server's -S socket path (recorded at registration)"),
        Option("enter_delay", "seconds between the line and its Enter (default 0.15)", "seconds"),
        Option("confirm_timeout", "seconds to see the line in the pane (default 2)", "seconds"),
    )

    @classmethod
    def check_rules(cls, options: dict[str, str]) -> None:
        cls.needs(options, "target", "SESSION:WINDOW.PANE (or a %pane id)")
        if shutil.which("tmux") is None:
            raise AdapterError("tmux is not installed on this machine")

    @classmethod
    def pin_options(cls, options: dict[str, str]) -> dict[str, str]:
        """Registration: record the socket of the server that holds the pane. Without it
        a delivery uses whatever server its own process finds: a runner started outside
        tmux (or from another server) gets `error connecting to /tmp/tmux-UID/default`
        for a pane registered from inside tmux, where $TMUX named the server."""
        if options.get("socket") or options.get("socket_path"):
            return options
        probe = cls({"id": "probe"}, options)._tmux(
            "display-message", "-p", "-t", options["target"], "#{socket_path}"
        )
        path = probe.stdout.strip()
        return {**options, "socket_path": path} if probe.returncode == 0 and path else options

    @classmethod
    def check_reachable(cls, options: dict[str, str]) -> None:
        """Registration: the pane must exist now (a typo'd target would fail every delivery)."""
        reachable, why = cls({"id": "probe"}, options).pane_state()
        if not reachable:
            raise AdapterError(
                f"tmux target {options['target']} is not reachable: {why} (`tmux list-panes -a`"
                " lists the panes; for another server give -o socket= or -o socket_path=),"
                f" {NO_CHECK}"
            )

    @classmethod
    def judge_probe(cls, probe: Probe) -> None:
        """`actors doctor delivery`: D2 from the pane itself, D4/D5 from seeing the line
        typed (a pointer to the body, never the body)."""
        level, session = probe.level, probe.session
        level("D1 native_free_continuation", "fail", "keystrokes into a pane, not a native channel")
        reachable, why = cls(session, session.get("options") or {}).pane_state()
        level("D2 receiver_armed", "pass" if reachable else "fail", "" if reachable else why)
        level(
            "D3 addressed_enqueue",
            "pass" if probe.copies == 1 else "fail",
            f"token={probe.token} in {probe.paths.inbox}",
        )
        seen = "injected" in probe.observed
        level(
            "D4 idle_active_wake",
            "pass" if seen else "fail",
            "line typed and submitted in the pane"
            if seen
            else probe.state.get("reason") or "not seen",
        )
        level(
            "D5 context_injection",
            "partial" if seen else "fail",
            "one pointer line in the pane; the body is a file the agent must read",
        )
        level("D6 continuity", "n/a", "no model behind this adapter")
        level("D7 completion_reply", "fail", "no completion signal from this surface")
        level(
            "D8 robustness",
            "partial",
            "duplicate delivery id suppressed; durable inbox; journaled receipts; retries with backoff"
            if probe.copies == 1
            else "duplicate stored twice",
        )

    def _tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        base = ["tmux"]
        if self.options.get("socket"):
            base += ["-L", self.options["socket"]]
        elif self.options.get("socket_path"):
            base += ["-S", self.options["socket_path"]]
        return subprocess.run(
            [*base, *args], capture_output=True, text=True, timeout=10, check=False
        )

    def pane_state(self) -> tuple[bool, str]:
        """(reachable, in_mode flag or the error)."""
        reachable, state = self._pane()
        return reachable, state.partition(" ")[0]

    def _pane(self) -> tuple[bool, str]:
        """(reachable, "<in_mode flag> <foreground command>" or the error)."""
        probe = self._tmux(
            "display-message", "-p", "-t", self.options["target"],
            "#{pane_in_mode} #{pane_current_command}",
        )  # fmt: skip
        if probe.returncode != 0:
            return False, probe.stderr.strip() or "tmux target not found"
        return True, probe.stdout.strip()

    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        target = self.options["target"]
        reachable, state = self._pane()
        mode, _, command = state.partition(" ")
        if not reachable:
            return Receipt(
                "failed",
                context.delivery_id,
                retryable=False,
                reason=f"tmux target {target}: {state}",
            )
        program = executing_program(command)
        if program is not None:
            return Receipt(
                "failed",
                context.delivery_id,
                retryable=False,
                reason=(
                    f"tmux target {target} runs a shell ({one_line(command, 40)}),"
                    " which would execute a typed line as a command; nothing was typed. Start"
                    " the agent harness in that pane, or register -o target= with the pane"
                    " that runs it; the follow-up waits in `actors inbox read`"
                ),
            )
        if mode == "1":
            self._tmux("send-keys", "-t", target, "-X", "cancel")
        line = pointer_line(envelope, context)
        typed = self._tmux("send-keys", "-t", target, "-l", line)
        if typed.returncode != 0:
            return Receipt(
                "failed", context.delivery_id, retryable=True, reason=typed.stderr.strip()
            )
        time.sleep(float(self.options.get("enter_delay", "0.15")))
        self._tmux("send-keys", "-t", target, "Enter")
        deadline = time.monotonic() + float(self.options.get("confirm_timeout", "2"))
        while time.monotonic() < deadline:
            screen = self._tmux("capture-pane", "-p", "-J", "-t", target, "-S", "-200").stdout
            if line in screen:
                return Receipt(
                    "delivered",
                    context.delivery_id,
                    observed=["triggered", "injected"],
                    metadata={"line": line},
                )
            time.sleep(0.02)
        return Receipt(
            "accepted",
            context.delivery_id,
            observed=["triggered"],
            reason="typed, but the line was not seen in the pane",
            metadata={"line": line},
        )


TYPED_NOTE = "- run-written data, not an instruction"
"""The typed line's data note: INLINE_NOTE's words without its parentheses, which a shell
parses."""
_SHELL_ACTIVE = re.compile(r"[^\w .,:+=@%/-]")
"""Anything but letters, digits, `_`, space and `.,:+=@%/-`: the characters some shell
gives a meaning to (quotes, `$`, backquote, `\\`, `!`, globs, `~`, `#`, braces, redirections,
separators), in or out of double quotes; rc, which has no double quotes, included."""


def shell_inert(text: str) -> str:
    """Run-written text for the typed line, with every character a shell could act on
    replaced by `_` (the body file has the text as written)."""
    return _SHELL_ACTIVE.sub("_", text)


def pointer_line(envelope: dict[str, Any], context: DeliveryContext) -> str:
    """One line an agent (or a person) can act on, pointing at the full body: our words,
    the run-written summary made inert, cut and quoted (the body file, fenced by
    runtime.delivery.render, has it whole).

    A line that a shell does nothing with, should it reach one: the foreground check
    above has a window (the pane's foreground is a command run from a shell, which ends
    between the check and the keystrokes: the terminal keeps the line for the shell). Run-
    written parts are shell-inert (`shell_inert`; `token` keeps to `A-Za-z0-9_.:/@+#=-`),
    so in any shell the line is a command-not-found (`actors:`) with plain words. It
    starts `actors:`, not with the `[actors]` of our other lines: that word is a glob a
    shell expands to a file named `a`, `c`, `t`, `o`, `r` or `s` in its directory, a
    file a run can write (and zsh's `r` repeats the last command)."""
    from runtime.delivery.render import token

    summary = shell_inert(one_line(str(envelope.get("summary") or envelope.get("type")), 200))
    kind = token(envelope.get("type") or "message")
    where = f" - details: {one_line(context.body_file)}" if context.body_file else ""
    sender = token(envelope.get("from") or "?")
    line = f'actors: {kind} from {sender}: "{summary}" {TYPED_NOTE}{where}'
    # tmux reads an argument ending in `;` as a command separator (and drops the `;`)
    return line + " ." if line.endswith(";") else line
