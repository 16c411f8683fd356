"""What a newcomer meets first (issue 31): `actors` on PATH after the README's commands,
shell syntax in a template refused with the rewrite to use, and text written for an agent
kept away from a person at a terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.core.errors import BadInput
from tests.conftest import REPO, cli, write_recipe

# --- 1. `actors` on PATH ----------------------------------------------------------------


def test_make_setup_prints_the_line_that_puts_actors_on_path(tmp_path: Path) -> None:
    """With `actors` not on PATH, `make setup` ends with the one line to type; typed into a
    fresh shell, `actors` is then the checkout's; the README quotes the same line."""
    bin_dir = str(REPO / ".venv" / "bin")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != bin_dir)
    env = {**os.environ, "PATH": path}
    out = subprocess.run(
        ["make", "-s", "setup"], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    found = re.search(r"export PATH=\"[^\"]+\"", out.stdout)
    assert found, out.stdout
    typed = subprocess.run(
        ["bash", "--norc", "-c", f"{found.group(0)}; command -v actors; actors --version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert typed.returncode == 0, typed.stderr
    assert typed.stdout.splitlines()[0] == f"{bin_dir}/actors", typed.stdout
    readme = (REPO / "README.md").read_text()
    assert 'export PATH="$PWD/.venv/bin:$PATH"' in readme
    assert found.group(0) == f'export PATH="{bin_dir}:$PATH"'


# --- 2. shell operators in a template -----------------------------------------------------

OPERATOR_TEMPLATES = [
    ("echo hi && echo there > out.txt", "&&"),
    ("sleep 1; echo done", ";"),
    ("false || echo x", "||"),
    ("ls | wc -l", "|"),
    ("echo x > out.txt", ">"),
    ("wc -l < in.txt", "<"),
    ("echo $(id)", "$("),
    ('echo "$(id)"', "$("),
    ("echo `id`", "`"),
    ("echo a>b", ">"),
]


@pytest.mark.parametrize(("template", "operator"), OPERATOR_TEMPLATES)
def test_a_template_with_shell_operators_is_refused_with_the_rewrite(
    home: object, tmp_path: Path, template: str, operator: str
) -> None:
    out = cli("spawn", "-t", template, "--wait")
    assert out.returncode == 2, out
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert f"shell operator {operator!r}" in lines[0]
    rewrite = re.search(r"use: (sh -c .*?) \(or", lines[0])
    assert rewrite, lines[0]
    assert shlex.split(rewrite.group(1)) == ["sh", "-c", template]
    assert json.loads(cli("ls", "--json").stdout) == []  # nothing was started


def test_the_rewrite_passes_values_as_arguments_and_does_what_was_meant(
    home: object, tmp_path: Path
) -> None:
    """The suggested `sh -c` form keeps a hostile value one argument: it is never pasted
    into the script, whatever quotes the template had around it."""
    template = "printf '%s|' {a} \"{b}\" '{c}' && echo end"
    refused = cli("spawn", "-t", template)
    assert refused.returncode == 2
    rewrite = re.search(r"use: (sh -c .*?) \(or", refused.stderr)
    assert rewrite, refused.stderr
    hostile = "$(touch pwned); `touch pwned` 'x\" ;"
    values = ["-v", f"a={hostile}", "-v", "b=two words", "-v", "c=*"]
    out = cli("spawn", "-t", rewrite.group(1), *values, "--wait", "--json")
    assert out.returncode == 0, out.stderr
    run_id = json.loads(out.stdout)["run"]
    tail = cli("tail", run_id)
    assert tail.stdout == f"{hostile}|two words|*|end\n", tail.stdout
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    "template",
    [
        "echo 'a && b; c | d > e < f $(g) `h`'",
        'grep -E "a|b" {file=x}',
        "awk '{print $1 > \"x\"}'",
        "echo a\\;b a\\|b",
        "sleep {secs=5}",
    ],
)
def test_quoted_or_escaped_operators_are_plain_words(template: str) -> None:
    from runtime.compiler.placeholders import check_operators

    check_operators(template)


def test_a_recipe_that_means_operators_literally_says_so(home: object, tmp_path: Path) -> None:
    """`literal_operators: true`: each operator is one plain argument, as always."""
    refused = write_recipe(tmp_path, "sep", {"template": "echo a ; b"})
    literal = write_recipe(
        tmp_path, "lit", {"template": "echo a ; b && c", "literal_operators": True}
    )
    out = cli("spawn", "--recipe", str(refused), "--wait")
    assert out.returncode == 2 and "shell operator ';'" in out.stderr, out.stderr
    out = cli("spawn", "--recipe", str(literal), "--wait", "--json")
    assert out.returncode == 0, out.stderr
    run_id = json.loads(out.stdout)["run"]
    assert cli("tail", run_id).stdout == "a ; b && c\n"


def test_a_nested_recover_or_precheck_is_checked_too() -> None:
    from runtime.compiler.model import compile_recipe

    for raw in (
        {"template": [{"template": "true", "recover": "rm -f x; true"}]},
        {"template": "true", "precheck": "test -d x || false"},
        {"template": ["true", {"parallel": True, "template": ["true", "a | b"]}]},
    ):
        with pytest.raises(BadInput, match="shell operator"):
            compile_recipe(raw, source="r")


# --- 2. the keep offer: for agents, never a person at a terminal ---------------------------


def _spawn_with_stderr_on_a_terminal(args: list[str]) -> tuple[int, str]:
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=child,
    )
    os.close(child)
    proc.communicate(timeout=60)  # its stderr is a few lines: the terminal's buffer holds it
    code = proc.returncode
    seen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the terminal's other end is closed and drained
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    return code, seen.decode(errors="replace")


def test_the_keep_offer_reaches_an_agent_but_not_a_terminal(home: object) -> None:
    code, terminal = _spawn_with_stderr_on_a_terminal(["spawn", "-t", "echo hi", "--wait"])
    assert code == 0, terminal
    assert "Ask the operator" not in terminal and "tools register" not in terminal, terminal
    captured = cli("spawn", "-t", "echo hi", "--wait")  # an agent's tool call: a pipe
    assert captured.returncode == 0
    assert "Ask the operator" in captured.stderr
    as_json = cli("spawn", "-t", "echo hi", "--wait", "--json")
    assert "Ask the operator" not in as_json.stderr
    assert "Ask the operator" in json.loads(as_json.stdout)["keep"]
