"""runtime.core.config: one table of every ACTORS_* setting, read at call time, with bad
values refused as one line and exit 2 before anything is written."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from runtime.core import config
from runtime.core.errors import BadInput
from runtime.store.layout import StateRoot
from tests.conftest import REPO, cli, snapshot

CODE_DIRS = ("actors", "runtime", "adapters")
TABLE_NAMES = {s.name for s in config.SETTINGS}


def _sources() -> list[Path]:
    return [p for d in CODE_DIRS for p in sorted((REPO / d).rglob("*.py"))]


def test_every_actors_name_in_the_code_is_in_the_table() -> None:
    seen: dict[str, str] = {}
    for path in _sources():
        for name in re.findall(r"\bACTORS_[A-Z][A-Z0-9_]*", path.read_text()):
            seen.setdefault(name, str(path.relative_to(REPO)))
    missing = {name: where for name, where in seen.items() if name not in TABLE_NAMES}
    assert not missing, f"add these to runtime/core/config.py SETTINGS: {missing}"


def test_only_the_config_module_spells_a_setting_name_in_code() -> None:
    """A bare "ACTORS_X" string or an ACTORS_X= keyword is a read or a write of the
    variable; anywhere but the table it would be a second spelling (messages and
    docstrings that mention a name are longer strings and do not count)."""
    bare = {f'"{name}"' for name in TABLE_NAMES} | {f"'{name}'" for name in TABLE_NAMES}
    offenders = []
    for path in _sources():
        if path == REPO / "runtime" / "core" / "config.py":
            continue
        if path == REPO / "runtime" / "runner" / "entry.py":
            continue  # a parked runner imports no runtime module; held equal below
        previous = ""
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if (tok.type == tokenize.STRING and tok.string in bare) or (
                tok.type == tokenize.NAME and tok.string in TABLE_NAMES and previous != "."
            ):
                offenders.append(f"{path.relative_to(REPO)}:{tok.start[0]} {tok.string}")
            previous = tok.string
    assert not offenders, offenders


def test_the_runner_entry_spells_its_setting_as_the_table_does() -> None:
    from runtime.runner import entry

    assert config.RUNNER_STATE.name == entry.STATE
    from runtime.core import platform

    assert platform.LIVENESS_FD == entry.LIVENESS_FD
    assert config.MAX_SECONDS == entry.POLL_MAX_MS // 1000  # the parked image's poll bound


def test_the_documented_table_is_the_table_in_code() -> None:
    doc = (REPO / "docs" / "configuration.md").read_text()
    table = "".join(line + "\n" for line in doc.splitlines() if line.startswith("|"))
    assert table == config.render_markdown()
    assert "configuration.md" in (REPO / "docs" / "cli.md").read_text()


def test_accessors_read_the_environment_at_each_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ACTORS_LEASE_S", raising=False)
    assert config.seconds(config.LEASE_S) == 300.0
    monkeypatch.setenv("ACTORS_LEASE_S", "0.5")
    assert config.seconds(config.LEASE_S) == 0.5
    monkeypatch.setenv("ACTORS_LEASE_S", "")  # empty means the default
    assert config.seconds(config.LEASE_S) == 300.0
    monkeypatch.setenv("ACTORS_JOURNAL_CAP_BYTES", "4096")
    assert config.byte_count(config.JOURNAL_CAP_BYTES) == 4096
    monkeypatch.setenv("ACTORS_FAIL_AT", " a.b, ,c.d")
    assert config.names(config.FAIL_AT) == {"a.b", "c.d"}
    monkeypatch.setenv("ACTORS_DEBUG", "0")
    assert config.flag(config.DEBUG)  # any non-empty value, as always
    monkeypatch.setenv("ACTORS_BRANCH", "front")
    assert config.branch() == "front"
    monkeypatch.setenv("ACTORS_HOME", str(tmp_path / "one"))
    assert StateRoot.from_env().path == tmp_path / "one"
    monkeypatch.setenv("ACTORS_HOME", "rel")
    monkeypatch.chdir(tmp_path)
    assert StateRoot.from_env().path == tmp_path / "rel"  # made absolute, not created
    monkeypatch.delenv("ACTORS_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert StateRoot.from_env().path == tmp_path / "xdg" / "actors"
    monkeypatch.setenv("ACTORS_LEASE_S", "soon")
    with pytest.raises(BadInput, match=r"^ACTORS_LEASE_S='soon' is not a number of seconds"):
        config.seconds(config.LEASE_S)
    monkeypatch.setenv("ACTORS_RUN_TOKEN", "secret€")
    with pytest.raises(BadInput, match=r"^ACTORS_RUN_TOKEN is not a run token") as caught:
        config.run_token()
    assert "secret" not in str(caught.value)  # a token is never echoed
    monkeypatch.setenv("ACTORS_BRANCH", "../x")
    with pytest.raises(BadInput, match="invalid ACTORS_BRANCH"):
        config.branch()
    assert not (tmp_path / "one").exists() and not (tmp_path / "xdg").exists()


BAD_SETTINGS = [
    ("ACTORS_JOURNAL_CAP_BYTES", "abc"),
    ("ACTORS_JOURNAL_CAP_BYTES", "0"),
    ("ACTORS_LEASE_S", "-1"),
    ("ACTORS_KILL_GRACE", "soon"),
    ("ACTORS_DELIVERY_BUDGET", "nan"),
    ("ACTORS_RETRY_BASE", "inf"),
    ("ACTORS_PROCESSED_TIMEOUT", "3s"),
    ("ACTORS_HOOK_LOCK_WAIT", "-0.1"),
    ("ACTORS_HOME", "{file}"),
    ("ACTORS_HOME", "{file}/below"),
    ("XDG_STATE_HOME", "{file}"),
    ("ACTORS_RUN_TOKEN", "tok€n"),
    ("ACTORS_RUN_TOKEN", "two words"),
]


@pytest.mark.parametrize(("name", "value"), BAD_SETTINGS)
def test_a_bad_value_is_one_line_exit_2_and_writes_nothing(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a directory\n")
    (home.path / "runs").mkdir(parents=True)
    if name == "XDG_STATE_HOME":
        monkeypatch.delenv("ACTORS_HOME")
    env = {name: value.format(file=afile)}
    commands = [["ls"], ["spawn", "-t", "true"]]
    if name == "ACTORS_RUN_TOKEN":  # read only by a caller that claims to be a run
        env["ACTORS_RUN_ID"] = "some-run"
        commands = [["ls", "--mine"], ["spawn", "-t", "true"], ["message", "run:x", "a.b"]]
    before = snapshot(home.path)
    for args in commands:
        out = cli(*args, env=env)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert out.stderr.startswith("actors: ") and out.stderr.count("\n") == 1, out.stderr
        assert name in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert out.stdout == ""
    assert snapshot(home.path) == before
    assert afile.read_text() == "not a directory\n"
    assert not (tmp_path / "config" / "actors").exists()


def test_good_values_pass_the_check(home: StateRoot, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ACTORS_PROCESSED_TIMEOUT", "ACTORS_LEASE_S", "ACTORS_RETRY_BASE"):
        monkeypatch.setenv(name, "0")  # zero is a valid wait (bench_harness uses it)
    monkeypatch.setenv("ACTORS_JOURNAL_CAP_BYTES", "4096")
    config.check()
    out = cli("ls")
    assert out.returncode == 0, out.stderr


def test_a_hook_is_not_blocked_by_a_bad_value(home: StateRoot) -> None:
    """Harness hooks keep their rule (exit 0, no output, whatever goes wrong): exit 2
    from a boundary hook would block the user's prompt."""
    out = cli("hook", "user-prompt-submit", input="{}", env={"ACTORS_LEASE_S": "abc"})
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


def test_spawn_through_the_api_refuses_a_value_its_runner_would_choke_on(
    home: StateRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.runs.spawn import SpawnRequest, spawn

    monkeypatch.setenv("ACTORS_KILL_GRACE", "soon")
    with pytest.raises(BadInput, match=r"^ACTORS_KILL_GRACE='soon'"):
        spawn(SpawnRequest(template="true"), home)
    assert not home.runs.exists() or not any(home.runs.iterdir())
