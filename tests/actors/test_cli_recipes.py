"""`actors recipes`, `actors tools` and `actors run` through the real CLI."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from recipes import SHIPPED_DIR
from runtime.store.layout import StateRoot
from tests.conftest import cli, snapshot, write_recipe

DEPLOY = {
    "description": "Pretend to deploy",
    "args": {
        "env": {"type": "enum", "values": ["dev", "prod"], "description": "where to"},
        "count": {"type": "int", "default": 2},
        "ratio": {"type": "number", "default": 0.5},
        "dry_run": {"type": "bool", "default": False},
        "tags": {"type": "array"},
        "target": {"type": "path"},
    },
    "template": "echo deploy {env} count={count} ratio={ratio} dry={dry_run} "
    "tags={tags=[]} target={target=none} by={who=me}",
}


@pytest.fixture
def project(home: StateRoot, tmp_path: Path) -> Path:
    """This test's project root (`./.actors/recipes` under the `home` fixture's cwd)."""
    path = tmp_path / ".actors" / "recipes"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def user(home: StateRoot, tmp_path: Path) -> Path:
    """This test's user root (`$XDG_CONFIG_HOME/actors/recipes`, set by `home`)."""
    path = tmp_path / "config" / "actors" / "recipes"
    path.mkdir(parents=True)
    return path


def runs_of(home: StateRoot) -> list[str]:
    return sorted(p.name for p in home.runs.iterdir()) if home.runs.exists() else []


def test_recipes_lists_every_root_in_priority_order_with_shadowing(
    project: Path, user: Path
) -> None:
    write_recipe(project, "hello", {"template": "echo project", "description": "mine"})
    write_recipe(user, "hello", {"template": "echo user"})
    write_recipe(user, "tidy", {"template": "echo tidy", "description": "user only"})

    listed = cli("recipes")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["NAME", "ROOT", "STATUS", "DESCRIPTION"]
    rows = [line.split(None, 2) for line in lines[1:]]
    assert rows[0][:2] == ["hello", "project"] and "shadows user, shipped" in rows[0][2]
    assert rows[1][:2] == ["hello", "user"] and "shadowed by project" in rows[1][2]
    assert rows[2][:2] == ["tidy", "user"]
    shipped_rows = [r for r in rows if r[1] == "shipped"]
    assert {r[0] for r in shipped_rows} >= {"hello", "fanout", "ticker", "player"}
    shipped_hello = next(r for r in shipped_rows if r[0] == "hello")
    assert shipped_hello[2].startswith("ok, shadowed by project")

    as_json = json.loads(cli("recipes", "ls", "--json").stdout)
    first = as_json[0]
    assert first["name"] == "hello" and first["root"] == "project" and first["status"] == "ok"
    assert first["shadows"] == [str(user / "hello.json"), str(SHIPPED_DIR / "hello.json")]
    assert as_json[1]["shadowed_by"] == str(project / "hello.json")


def test_recipes_check_passes_over_every_shipped_recipe(home: StateRoot) -> None:
    checked = cli("recipes", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shipped = sorted(SHIPPED_DIR.glob("*.json"))
    assert checked.stdout.splitlines() == [f"{path}: ok" for path in shipped]
    assert f"{len(shipped)} checked, 0 invalid" in checked.stderr
    assert not home.path.exists()  # nothing written, not even the compile cache


def test_recipes_check_prints_the_location_and_exits_2(home: StateRoot, project: Path) -> None:
    (project / "broken.json").write_text('{"template": "echo hi",')
    write_recipe(project, "typo", {"template": [{"template": "echo", "timeout": "soon"}]})
    write_recipe(project, "hello", {"template": "echo hi", "tiemout": 5})
    write_recipe(project, "badargs", {"args": {"n": {"type": "integer"}}, "template": "true"})
    before = snapshot(project)

    checked = cli("recipes", "check")
    assert checked.returncode == 2
    out = checked.stdout
    assert f"{project / 'broken.json'}: not valid JSON: line 1 column 24" in out
    assert f"{project / 'typo.json'}: template[0].timeout: expected milliseconds" in out
    assert (
        f"{project / 'hello.json'}: tiemout: unknown key (see docs/recipes.md for the allowed "
        f"keys) (blocks {SHIPPED_DIR / 'hello.json'})"
    ) in out
    assert f"{project / 'badargs.json'}: args.n.type" in out
    assert f"{SHIPPED_DIR / 'fanout.json'}: ok" in out
    assert "4 invalid" in checked.stderr
    assert "Traceback" not in checked.stderr
    assert snapshot(project) == before and not home.path.exists()

    one = cli("recipes", "check", str(project / "typo.json"))
    assert one.returncode == 2
    assert one.stdout.startswith(f"{project / 'typo.json'}: template[0].timeout")
    good = cli("recipes", "check", "fanout", "ticker")
    assert good.returncode == 0
    assert good.stdout.splitlines() == [
        f"{SHIPPED_DIR / 'fanout.json'}: ok",
        f"{SHIPPED_DIR / 'ticker.json'}: ok",
    ]
    unknown = cli("recipes", "check", "no-such")
    assert unknown.returncode == 2 and "no-such: no recipe by that name" in unknown.stdout


def test_an_invalid_project_recipe_blocks_the_shipped_one(home: StateRoot, project: Path) -> None:
    broken = project / "hello.json"
    broken.write_text('{"template": "echo hi",')
    shipped = SHIPPED_DIR / "hello.json"
    for args in (["spawn", "hello"], ["run", "hello"], ["message", "tool:hello", "tool.invoke"]):
        proc = cli(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert str(broken) in proc.stderr and str(shipped) in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    write_recipe(project, "hello", {"template": 5})  # valid JSON, invalid recipe
    proc = cli("run", "hello")
    assert proc.returncode == 2
    assert f"{broken} (which blocks {shipped}): template: must be a command string" in proc.stderr
    write_recipe(project, "hello", {"template": "echo x", "disabled": True})
    proc = cli("spawn", "hello")
    assert proc.returncode == 2 and "is disabled, and it blocks" in proc.stderr
    assert runs_of(home) == []
    shown = cli("recipes", "show", "hello")
    assert shown.returncode == 0
    assert f"blocks    {shipped} (shipped, ok)" in shown.stdout


def test_recipes_show_describes_where_what_and_parameters(home: StateRoot, user: Path) -> None:
    write_recipe(user, "hello", {**DEPLOY, "template": [{"label": "go", "template": "echo {x}"}]})
    shown = cli("recipes", "show", "hello")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert out.startswith("hello  (user, sync)")
    assert f"file      {user / 'hello.json'}" in out
    assert f"shadows   {SHIPPED_DIR / 'hello.json'} (shipped, ok)" in out
    assert "1 sequence of 1" in out and "1.1 go: echo {x}" in out
    assert "--env" in out and "enum dev|prod" in out and "required" in out
    data = json.loads(cli("recipes", "show", "fanout", "--json").stdout)
    assert data["root"] == "shipped" and data["compiled"]["root"]["kind"] == "parallel"
    assert [p["name"] for p in data["parameters"]] == ["target"]
    missing = cli("recipes", "show", "nope")
    assert missing.returncode == 2 and "no recipe named 'nope'" in missing.stderr


def test_tools_lists_parameters_from_placeholders_and_args(home: StateRoot, project: Path) -> None:
    write_recipe(project, "deploy", DEPLOY)
    listed = cli("tools")
    assert listed.returncode == 0, listed.stderr
    block = listed.stdout.split("\n\n")[0].splitlines()
    assert block[0].startswith("deploy  (project, sync)  Pretend to deploy")
    rows = {line.split()[0]: line for line in block[1:]}
    assert list(rows) == [
        "--env",
        "--count",
        "--ratio",
        "--dry_run",
        "--tags",
        "--target",
        "--who",
    ]
    assert "enum dev|prod" in rows["--env"] and "required" in rows["--env"]
    assert "where to" in rows["--env"]
    assert "int" in rows["--count"] and "default 2" in rows["--count"]
    assert "bool" in rows["--dry_run"] and "default false" in rows["--dry_run"]
    assert "string" in rows["--who"] and 'default "me"' in rows["--who"]
    assert "hello  (shipped, sync)" in listed.stdout
    assert "player  (shipped, async)" in listed.stdout

    tools = {t["name"]: t for t in json.loads(cli("tools", "--json").stdout)}
    env = tools["deploy"]["parameters"][0]
    assert env == {
        "name": "env",
        "type": "enum",
        "default": None,
        "has_default": False,
        "required": True,
        "choices": ["dev", "prod"],
        "description": "where to",
    }
    assert tools["hello"]["root"] == "shipped"
    assert tools["hello"]["parameters"][0]["default"] == "world"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "stage"], "--env (enum dev|prod): expected one of dev, prod; got 'stage'"),
        (["--env", "dev", "--count", "two"], "--count (int): expected an integer, got 'two'"),
        (["--env", "dev", "--ratio", "fast"], "--ratio (number): expected a number"),
        (["--env", "dev", "--dry-run", "maybe"], "unexpected argument 'maybe'"),
        (["--env", "dev", "--dry-run=maybe"], "--dry_run (bool): expected true or false"),
        (["--env", "dev", "--tags", "[1,"], "--tags (array): is not a valid JSON array"),
        (["--env", "dev", "--target="], "--target (path): expected a path"),
        (["--evn", "dev"], "has no parameter --evn; did you mean --env?"),
        (["--env", "dev", "-v", "bogus=1"], "has no parameter --bogus"),
        (["--env", "dev", "--env", "prod"], "--env is given 2 times"),
        (["--env", "dev", "--run_id", "x"], "run_id is set by the runtime"),
        ([], "tool deploy needs --env (enum dev|prod)"),
        (["--env"], "--env needs a value"),
        (["dev"], "unexpected argument 'dev'"),
    ],
)
def test_run_refuses_bad_values_before_spawning(
    home: StateRoot, project: Path, args: list[str], message: str
) -> None:
    write_recipe(project, "deploy", DEPLOY)
    proc = cli("run", "deploy", *args)
    assert proc.returncode == 2, proc.stdout
    assert message in proc.stderr, proc.stderr
    assert proc.stderr.startswith("actors: ") and "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert runs_of(home) == []


def test_run_converts_typed_values_for_a_sync_tool(home: StateRoot, project: Path) -> None:
    write_recipe(project, "deploy", DEPLOY)
    proc = cli(
        "run",
        "deploy",
        "--env=prod",
        "--count",
        "7",
        "--dry-run",
        "--tags",
        "a",
        "--tags",
        "b c",
        "--target",
        "~/x",
    )
    assert proc.returncode == 0, proc.stderr
    home_dir = str(Path.home())
    assert proc.stdout == (
        f'deploy prod count=7 ratio=0.5 dry=true tags=["a","b c"] target={home_dir}/x by=me\n'
    )
    again = cli("run", "deploy", "--env", "dev", "--no-dry-run", "--tags", '["x"]', "--json")
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert result["status"] == "done" and result["code"] == 0
    assert (
        result["output"] == 'deploy dev count=2 ratio=0.5 dry=false tags=["x"] target=none by=me\n'
    )
    assert result["output_cut"] is False


def test_a_sync_tool_prints_its_output_and_exits_with_its_code(
    home: StateRoot, project: Path
) -> None:
    write_recipe(
        project,
        "fail",
        {"template": "sh -c 'echo partial; echo boom >&2; exit {code=7}' fail"},
    )
    proc = cli("run", "fail")
    assert proc.returncode == 7
    assert proc.stdout == "partial\n"
    assert "boom" in proc.stderr and "failed (7)" in proc.stderr
    assert cli("run", "fail", "--code", "0").returncode == 0
    hello = cli("run", "hello", "--name", "ada")
    assert hello.returncode == 0 and hello.stdout == "HELLO ADA\n"


def test_a_sync_tools_output_is_bounded(home: StateRoot, project: Path) -> None:
    write_recipe(project, "count", {"template": "seq 1 {n}"})
    proc = cli("run", "count", "--n", "1000")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert len(lines) == 200 and lines[0] == "801" and lines[-1] == "1000"
    assert "output cut: showing its last 200 lines" in proc.stderr
    wide = cli("run", "count", "--n", "100000")
    assert len(wide.stdout.encode()) <= 64 * 1024
    assert wide.stdout.splitlines()[-1] == "100000" and "output cut" in wide.stderr


def test_an_async_tool_is_started_detached(home: StateRoot) -> None:
    proc = cli("run", "ticker", "--interval", "5", "--as", "run:tick")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "run:tick"
    run = json.loads(home.run("tick").run_json.read_text())
    assert run["recipe"] == "ticker" and run["values"]["interval"] == "5"
    assert cli("kill", "tick").returncode == 0


def test_register_validates_and_never_overwrites_without_update(
    home: StateRoot, tmp_path: Path
) -> None:
    user = tmp_path / "config" / "actors" / "recipes"
    made = cli("tools", "register", "greet", "-t", "echo hello {who=world}", "--description", "Hi")
    assert made.returncode == 0, made.stderr
    target = user / "greet.json"
    assert made.stdout.splitlines()[0] == f"tool greet registered: {target}"
    assert json.loads(target.read_text()) == {
        "description": "Hi",
        "template": "echo hello {who=world}",
    }
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(user.stat().st_mode) == 0o700
    assert cli("run", "greet", "--who", "you").stdout == "hello you\n"

    before = snapshot(user)
    again = cli("tools", "register", "greet", "-t", "echo other")
    assert again.returncode == 2
    assert f"tool greet already exists at {target}; pass --force" in again.stderr
    broken = cli("tools", "register", "greet", "-t", "echo 'open", "--update")
    assert broken.returncode == 2 and "cannot split template" in broken.stderr
    assert snapshot(user) == before

    recipe = tmp_path / "fetch.json"
    recipe.write_text('{\n  "async": true,\n  "template": "sleep {secs=1}"\n}\n')
    updated = cli("tools", "register", "greet", "--from", str(recipe), "--update")
    assert updated.returncode == 0, updated.stderr
    assert "tool greet updated" in updated.stdout
    assert target.read_bytes() == recipe.read_bytes()  # the file is stored as written

    local = cli("tools", "register", "hello", "-t", "echo local", "--project", "--json")
    assert local.returncode == 0, local.stderr
    info = json.loads(local.stdout)
    assert info["path"] == str(tmp_path / ".actors" / "recipes" / "hello.json")
    assert info["replaced"] is False and info["shadowed_by"] is None
    assert info["shadows"] == [str(SHIPPED_DIR / "hello.json")]
    assert cli("run", "hello").stdout == "local\n"

    both = cli("tools", "register", "x", "-t", "true", "--from", str(recipe))
    assert (
        both.returncode == 2
        and "give the recipe once: --from FILE, --template STR or --from-run RUN" in both.stderr
    )
