"""Hostile input: every value is handled literally, or refused with exit 2 and one line.

Property-based (hypothesis, bounded example counts) over the pure validators, the message
path and the recipe compiler, plus fixed hostile sets through the real CLI: ids and
addresses with `..`, `/`, NUL, unicode look-alikes, leading dots, spaces, 65+ characters;
bodies that are huge, deeply nested or not UTF-8; recipes that are deep, huge, import
themselves or put placeholders everywhere; values full of shell metacharacters. None may
name a path outside the state root, and none may execute anything: every `touch` below
targets a canary directory that must stay empty.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import actors
from runtime.compiler.library import RecipeSource, compile_source
from runtime.compiler.placeholders import split_words, substitute_word, value_text
from runtime.core.errors import ActorsError, BadInput
from runtime.core.ids import is_valid_id
from runtime.messaging.addresses import parse_address
from runtime.messaging.envelope import MAX_BODY_DEPTH, MAX_ENVELOPE_BYTES
from runtime.routing.in_run import finish, recv
from runtime.routing.router import send
from runtime.runs.ownership import Principal, current_principal
from runtime.store.layout import StateRoot, session_key, session_paths
from tests.conftest import cli, finished, make_fifo, read_fifo_line, run_token, write_recipe
from tests.reliability._checks import assert_clean, fast_cli, fast_cli_all, refused, tree
from tests.reliability._report import record

SUITE = "hostile input"

# -- hostile text ----------------------------------------------------------------------------

NASTY = [
    "",
    ".",
    "..",
    "...",
    "../x",
    "x/..",
    "a/b",
    "/abs",
    "./x",
    ".hidden",
    "-dash",
    "_under",
    "a b",
    " a",
    "a\tb",
    "a\nb",
    "a\x00b",
    "\x00",
    "ａｂ",  # fullwidth letters
    "a\u2215b",  # division slash
    "a\uff0fb",  # fullwidth solidus
    "\u2024\u2024",  # one-dot leaders (look like "..")
    "a\u200bb",  # zero-width space
    "\u202eabc",  # right-to-left override
    "\u0430dmin",  # Cyrillic a
    "x" * 64,
    "x" * 65,
    "x" * 300,
    "run:x",
    "user:x",
    "user:..",
    "user:../x",
    "~",
    "$HOME",
    "$(touch X)",
    "; touch X",
    "`touch X`",
    "a*",
    "%2e%2e",
    "..\\x",
    "a.b",
    "a..b",
    "9",
]
LOOKALIKES = ["\u2215", "\uff0f", "\u2024", "\u00a0", "\u0430", "\u202e", "\u200b", "\uff0e"]
ALPHABET = list("aZ09._-/ :\\\x00\n$;`'\"*") + LOOKALIKES
hostile_text = st.one_of(
    st.sampled_from(NASTY),
    st.text(alphabet=st.sampled_from(ALPHABET), max_size=70),
    st.text(max_size=40),  # any code point, lone surrogates included
)
PREFIXES = ("run:", "room:", "session:", "tool:", "branch:", "branch:r/", "session:user:")


SOAK = 10
"""The `slow` variants run every property SOAK times as many examples, freshly random."""


def _examples(count: int, soak: bool) -> settings:
    """Bounded, reproducible examples in the normal tier (derandomized, no example
    database written); many more, random, in the soak tier."""
    return settings(
        max_examples=count * SOAK if soak else count,
        derandomize=not soak,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _one_line(err: ActorsError) -> None:
    assert len(str(err).splitlines()) == 1 and str(err).strip(), repr(str(err))


LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


# -- 1. ids and addresses: pure validators ---------------------------------------------------


ID_EXAMPLES = 400


def test_ids_and_addresses_stay_inside_their_directory() -> None:
    """Accepted ids are plain names of a direct child of runs/ or sessions/ — no
    separators, no dot names, no NUL, ASCII only; everything else is BadInput."""
    _ids_property(soak=False)


@pytest.mark.slow
def test_ids_and_addresses_soak() -> None:
    _ids_property(soak=True)


def _ids_property(soak: bool) -> None:
    count = [0]

    @_examples(ID_EXAMPLES, soak)
    @given(text=hostile_text)
    def check(text: str) -> None:
        count[0] += 1
        _check_id(text)

    check()
    record(
        SUITE,
        "ids and addresses: '..', '/', NUL, look-alikes, 65+ chars (property)",
        count[0],
        "accepted only as a direct child of runs/ or sessions/; else one-line BadInput",
    )


def _check_id(text: str) -> None:
    root = StateRoot(Path("/nonexistent/actors-state"))
    try:
        run_dir = root.run(text).dir
    except BadInput as err:
        _one_line(err)
        assert not is_valid_id(text)
    else:
        assert run_dir.parent == root.runs and run_dir.name == text
        assert text.isascii() and text.strip() == text and not text.startswith(".")
        assert "/" not in text and "\x00" not in text and len(text) <= 64
    for prefix in PREFIXES:
        try:
            address = parse_address(prefix + text)
        except BadInput as err:
            _one_line(err)
            continue
        assert str(address) == prefix + text  # accepted as written, nothing normalised
        for part in (address.target, address.branch):
            if part is not None:
                assert is_valid_id(part.removeprefix("user:").removeprefix("run:")), part
    try:
        key = session_key(text)
    except BadInput as err:
        _one_line(err)
    else:
        assert is_valid_id(key) and session_paths(root, text).dir.parent == root.sessions
    with pytest.MonkeyPatch.context() as mp:
        for name in ("ACTORS_RUN_ID", "ACTORS_RUN_TOKEN", "ACTORS_SESSION"):
            mp.delenv(name, raising=False)
        try:
            principal = current_principal(root, text or None)
        except BadInput as err:
            _one_line(err)
        else:  # a session that is accepted always has a session directory to deliver to
            assert is_valid_id(session_key(principal.id)), principal.id


CLI_IDS = [
    "..",
    "../x",
    "x/..",
    "a/b",
    ".hidden",
    "-dash",
    "a b",
    "a\nb",
    "ａｂ",
    "a\u2215b",
    "\u2024\u2024",
    "x" * 65,
    "user:../x",
    "$(touch canary/X)",
    "; touch canary/X",
    "a..b",
    "x" * 64,
    "9",
]


def _outside(tmp_path: Path) -> set[str]:
    """Everything in the test's directory that is not the state root or config dir."""
    return {p for p in tree(tmp_path) if not p.startswith(("state", "config"))}


def test_hostile_ids_through_the_cli(home: StateRoot, tmp_path: Path) -> None:
    """Every command that takes an id or address refuses the unsafe ones with exit 2 and
    one line, accepts the safe-but-odd ones literally, and writes nothing outside."""
    (tmp_path / "canary").mkdir()
    outside_before = _outside(tmp_path)
    ids = CLI_IDS  # (argv cannot carry NUL at all: that one is covered above)
    commands: list[list[str]] = []
    of: list[str] = []
    for ident in ids:
        batch = [
            ["status", ident],
            ["message", f"run:{ident}", "job.go", "x"],
            ["message", f"branch:nope/{ident}", "job.go"],
            ["inbox", "read", "--peek", "--session", ident],
            ["inspect", f"session:{ident}"],
            ["kill", ident],
        ]
        commands += batch
        of += [ident] * len(batch)
    results = fast_cli_all(commands)
    for args, proc, ident in zip(commands, results, of, strict=True):
        assert_clean(args, proc)
        if proc.returncode == 0:  # only a valid id can have been accepted (no run exists)
            assert is_valid_id(ident.removeprefix("user:")), args
    # spawning with hostile ids: refused before anything is written, or a literal name
    spawns = [["spawn", "-t", "true", "--as", f"run:{ident}"] for ident in ids]
    spawns += [["spawn", "-t", "true", "--session", ident] for ident in ids]
    for args, proc in zip(spawns, fast_cli_all(spawns), strict=True):
        assert_clean(args, proc)
        target = args[-1].removeprefix("run:")
        valid = is_valid_id(target) or (
            target.startswith("user:") and is_valid_id(target.removeprefix("user:"))
        )
        assert (proc.returncode == 0) == valid, (args, proc.stderr)
        if proc.returncode == 2:
            assert "invalid" in proc.stderr, proc.stderr
    cold = cli("message", "run:../x", "job.go")  # and once through a fresh interpreter
    refused(["message", "run:../x"], cold, "invalid address 'run:../x'")
    for summary in actors.runs():  # let every accepted run finish and follow up
        finished(summary)
    for run_dir in home.runs.iterdir():
        assert is_valid_id(run_dir.name)
    for session_dir in home.sessions.iterdir():
        assert is_valid_id(session_dir.name)
    assert _outside(tmp_path) == outside_before
    assert list((tmp_path / "canary").iterdir()) == []
    record(
        SUITE,
        "hostile run / branch / room / session ids through the CLI",
        len(commands) + len(spawns) + 1,
        "unsafe refused (exit 2, one line); safe ones literal; nothing outside the root",
    )


# -- 2. envelope bodies ----------------------------------------------------------------------

SINK = {
    "mailbox": {"accepts": ["job.go"]},
    "template": "sh -c 'echo ready > \"$1\"; exec sleep 300' sink {ready}",
}


@pytest.fixture
def sink(home: StateRoot, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A running run that accepts job.go, and the environment of its children."""
    fifo = make_fifo(tmp_path / "sink.fifo")
    record_ = actors.spawn(
        str(write_recipe(tmp_path, "sink", SINK)), as_="sink", values={"ready": str(fifo)}
    )
    assert read_fifo_line(fifo) == "ready"
    token = run_token(Path(record_["state_dir"]))
    yield {"ACTORS_RUN_ID": "sink", "ACTORS_RUN_TOKEN": token}
    if actors.status("sink")["status"] == "running":
        actors.kill("sink")


class _Big(int):
    """A body of this many bytes of "é", built only inside the test (so hypothesis never
    has to print a 300 KB example)."""

    def __repr__(self) -> str:
        return f"<{int(self)} bytes of é>"


def _materialize(body: Any) -> Any:
    return "é" * (int(body) // 2) if isinstance(body, _Big) else body


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    hostile_text,
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(hostile_text, inner, max_size=5),
    max_leaves=25,
)
bodies = st.one_of(
    json_value,
    st.integers(1, 200).map(_nested),  # deep: accepted up to the cap, refused beyond
    st.sampled_from([60_000, MAX_ENVELOPE_BYTES, 300_000]).map(_Big),
)
REFUSALS = ("the limit is", "not valid UTF-8", "nested more than")


def _refused_for_a_known_reason(err: BadInput) -> None:
    _one_line(err)
    assert any(reason in str(err) for reason in REFUSALS), str(err)


BODY_EXAMPLES = 120


def test_any_body_is_delivered_exactly_or_refused_whole(
    home: StateRoot, sink: dict[str, str]
) -> None:
    _bodies_property(home, sink, soak=False)


@pytest.mark.slow
def test_any_body_soak(home: StateRoot, sink: dict[str, str]) -> None:
    _bodies_property(home, sink, soak=True)


def _bodies_property(home: StateRoot, sink: dict[str, str], soak: bool) -> None:
    inbox = home.run("sink").inbox
    me = Principal("user:tester")
    outcomes = {"delivered": 0, "refused": 0}

    @_examples(BODY_EXAMPLES, soak)
    @given(
        body=bodies,
        summary=st.one_of(st.none(), hostile_text.filter(lambda t: len(t) <= 500)),
    )
    def check(body: Any, summary: str | None) -> None:
        body = _materialize(body)
        size_before = inbox.stat().st_size if inbox.exists() else 0
        try:
            outcome = send(home, "run:sink", "job.go", body, me, force=True, summary=summary)
        except BadInput as err:
            _refused_for_a_known_reason(err)
            assert (inbox.stat().st_size if inbox.exists() else 0) == size_before
            outcomes["refused"] += 1
            return
        assert outcome["state"] == "queued"
        with pytest.MonkeyPatch.context() as mp:
            for key, value in sink.items():
                mp.setenv(key, value)
            principal = current_principal(home)
            entry = recv(home, principal, timeout=0)
            assert entry is not None and entry["id"] == outcome["id"]
            finish(home, principal, entry["id"], ok=True)
        assert entry["envelope"]["body"] == json.loads(json.dumps(body))  # exactly as sent
        blank = summary is None or not summary.strip()  # a blank summary is the type
        assert entry["envelope"]["summary"] == ("job.go" if blank else summary)
        outcomes["delivered"] += 1

    check()
    assert actors.status("sink")["status"] == "running"  # the runner folded every line
    record(
        SUITE,
        "envelope bodies: random JSON, up to 200 deep, up to 300 KB, lone surrogates",
        sum(outcomes.values()),
        f"{outcomes['delivered']} delivered exactly (recv), {outcomes['refused']} refused "
        "whole (size, UTF-8, depth), inbox untouched",
    )


def test_body_limits_through_the_cli(home: StateRoot, sink: dict[str, str]) -> None:
    deep = json.dumps(_nested(MAX_BODY_DEPTH + 1))
    cases = {
        "over 64 KiB": (["x" * (MAX_ENVELOPE_BYTES + 1)], "the limit is 65536"),
        "nested beyond the cap": ([deep, "--body-json"], f"more than {MAX_BODY_DEPTH} levels"),
        "nested beyond the parser": (["[" * 5000 + "]" * 5000, "--body-json"], "nested too deeply"),
        "not JSON": (["{oops", "--body-json"], "body is not valid JSON"),
        "summary too long": (["x", "--summary", "s" * 501], "longer than 500"),
    }
    for extra, needle in cases.values():
        args = ["message", "run:sink", "job.go", *extra, "--force"]
        refused(args, fast_cli(*args), needle)
    # a body that is not UTF-8 arrives as surrogates in argv: refused before anything
    bad = ["message", "run:sink", "job.go", "caf\udce9", "--force"]
    refused(bad, cli(*bad), "argument 4 is not valid UTF-8 text (byte 0xe9)")
    # accepted ones arrive byte for byte, even where a shell would have acted on them
    literal = "\u202e$(touch X); `id` | cat > Y\n\t'\"\\ {run_id} {{x}} ＜％＞"
    ok = fast_cli("message", "run:sink", "job.go", literal, "--force")
    assert_clean(["message"], ok, allowed=(0,))
    got = fast_cli("recv", "--json", "--timeout", "5", env=sink)
    assert json.loads(got.stdout)["body"] == literal
    assert not Path("X").exists() and not Path("Y").exists()
    assert actors.status("sink")["status"] == "running"  # the runner read all of it
    record(SUITE, "envelope bodies and summaries (CLI limits)", len(cases) + 3, "refused or exact")


# -- 3. recipes ------------------------------------------------------------------------------

PLACEHOLDERY = st.sampled_from(
    [
        "echo {x}",
        "{x}",
        "{{x}}",
        "{x=}",
        "{x??y}",
        "{x?a:b}",
        "{items[0]}",
        "{items.length}",
        "{index}",
        "{(index+1)*2%repeat}",
        "{__(index+1)}",
        "echo '{x}'",
        'echo "{x} {y}"',
        "$(touch X)",
        "; rm -rf /",
        "'unbalanced",
        "",
        "{",
        "}",
        "{a.b}",
        "{run_id}",
        "{state_dir}/../../x",
        "sh -c {x}",
    ]
)
any_value = st.recursive(
    st.one_of(json_leaf, PLACEHOLDERY), lambda i: st.lists(i, max_size=3), max_leaves=6
)
NODE_KEYS = [
    "label",
    "parallel",
    "timeout",
    "retry",
    "recover",
    "failure",
    "concurrency",
    "min_successful",
    "when",
    "repeat",
    "delay",
    "output",
    "bogus",
]


def _node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"template": st.one_of(PLACEHOLDERY, st.lists(children, min_size=0, max_size=3))},
        optional={key: st.one_of(any_value, PLACEHOLDERY) for key in NODE_KEYS},
    )


template_node = st.recursive(st.one_of(PLACEHOLDERY, _node(PLACEHOLDERY)), _node, max_leaves=8)
names = st.one_of(
    st.sampled_from(["x", "y", "items", "run_id", "{x}", "a b", "_ok"]),
    # keys with a line break are left out here: see the xfail test right after the property
    hostile_text.filter(lambda name: not any(c in name for c in LINE_BREAKS)),
)
recipes = st.fixed_dictionaries(
    {"template": st.one_of(PLACEHOLDERY, st.lists(template_node, max_size=4))},
    optional={
        "description": st.one_of(any_value, PLACEHOLDERY),
        "values": st.dictionaries(names, any_value, max_size=3),
        "defaults": st.dictionaries(names, any_value, max_size=3),
        "artifacts": st.dictionaries(names, st.one_of(PLACEHOLDERY, any_value), max_size=2),
        "mailbox": st.fixed_dictionaries(
            {}, optional={"accepts": st.lists(names), "emits": any_value, "endpoint": any_value}
        ),
        "run_id": st.one_of(hostile_text, PLACEHOLDERY),
        "imports": st.dictionaries(names, st.one_of(PLACEHOLDERY, hostile_text), max_size=2),
        "args": st.one_of(any_value, st.dictionaries(names, any_value, max_size=2)),
        "async": any_value,
        "retire_when": any_value,
        "disabled": any_value,
        "{x}": any_value,
    },
)


RECIPE_EXAMPLES = 150


def test_any_recipe_compiles_or_is_refused_in_one_line() -> None:
    """Placeholders in every position, hostile names and wrong types: the compiler
    either produces a tree of literal argv words or refuses with one line."""
    _recipes_property(soak=False)


@pytest.mark.slow
def test_any_recipe_soak() -> None:
    _recipes_property(soak=True)


def _recipes_property(soak: bool) -> None:
    outcomes = {"compiled": 0, "refused": 0}

    @_examples(RECIPE_EXAMPLES, soak)
    @given(recipe=recipes)
    def check(recipe: dict[str, Any]) -> None:
        source = RecipeSource("hostile", Path("/nonexistent/dir/hostile.json"), recipe)
        try:
            compiled = compile_source(source, None).data
        except ActorsError as err:
            _one_line(err)
            outcomes["refused"] += 1
            return
        stack = [compiled["root"]]
        while stack:
            node = stack.pop()
            if node["kind"] == "leaf":
                assert all(isinstance(word, str) for word in node["words"])
            stack.extend(node.get("children", []))
        outcomes["compiled"] += 1

    check()
    record(
        SUITE,
        "recipes: placeholders and hostile values in every key (property)",
        sum(outcomes.values()),
        f"{outcomes['compiled']} compiled to literal argv words, "
        f"{outcomes['refused']} refused in one line",
    )


def test_a_recipe_key_with_a_line_break_is_named_on_one_line() -> None:
    for recipe in (
        {"template": "true", "bo\ngus": 1},
        {"template": "true", "args": {"a\nb": None}},
        {"template": [{"template": "true", "la\rbel": 1}]},
    ):
        source = RecipeSource("hostile", Path("/nonexistent/dir/hostile.json"), recipe)
        with pytest.raises(ActorsError) as info:
            compile_source(source, None)
        _one_line(info.value)


def _write(path: Path, data: Any) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_hostile_recipes_through_the_cli(home: StateRoot, tmp_path: Path) -> None:
    """Huge, deep, cyclic and placeholder-laden recipes: refused before anything is
    written (the state root stays as it was)."""
    d = tmp_path / "recipes"
    d.mkdir()
    big = _write(d / "big.json", {"template": "true", "description": "x" * (1 << 20)})
    _write(d / "a.json", {"imports": {"b": "b.json"}, "template": [{"name": "b"}]})
    _write(d / "b.json", {"imports": {"a": "a.json"}, "template": [{"name": "a"}]})
    _write(d / "self.json", {"imports": {"s": "self.json"}, "template": [{"name": "s"}]})
    for i in range(40):  # a chain of imports deeper than the documented 32
        _write(d / f"c{i}.json", {"imports": {"n": f"c{i + 1}.json"}, "template": [{"name": "n"}]})
    _write(d / "c40.json", {"template": "true"})
    _write(d / "runid.json", {"run_id": "{x}", "template": "true"})
    _write(d / "runid2.json", {"run_id": "../../escape", "template": "true"})
    _write(d / "art.json", {"artifacts": {"{x}": "{x}"}, "template": "true"})
    _write(d / "imp.json", {"imports": {"{x}": "../{x}.json"}, "template": [{"name": "{x}"}]})
    _write(d / "vals.json", {"values": {"../x": 1}, "template": "true"})
    _write(d / "inject.json", {"values": {"state_dir": "/"}, "template": "true"})
    _write(d / "notobj.json", "[1, 2]")
    _write(d / "notjson.json", "{'template': 'true'}")
    _write(d / "latin1.json", "")
    (d / "latin1.json").write_bytes(b'{"template": "echo caf\xe9"}')
    cases = {
        "big.json": f"{big.stat().st_size} bytes; the limit is 1048576",
        "a.json": "import cycle",
        "self.json": "import cycle",
        "c0.json": "deeper than 32",
        "runid.json": "invalid recipe run_id '{x}'",
        "runid2.json": "invalid recipe run_id '../../escape'",
        "art.json": "not a valid name",
        "imp.json": "does not exist",
        "vals.json": "not a valid name",
        "inject.json": "set by the runtime",
        "notobj.json": "a recipe is a JSON object",
        "notjson.json": "is not valid JSON",
        "latin1.json": "not UTF-8",
    }
    commands = [["spawn", str(d / name), "-v", "x=1"] for name in cases]
    before = tree(home.path)
    for args, proc, needle in zip(commands, fast_cli_all(commands), cases.values(), strict=True):
        refused(args, proc, needle)
    refused(commands[1], cli(*commands[1]), "import cycle")  # once cold
    assert {p for p in tree(home.path) - before if not p.startswith(("tmp", "cache"))} == set()
    assert not (home.runs.exists() and any(home.runs.iterdir()))
    assert not (home.tmp.exists() and any(home.tmp.iterdir()))
    record(
        SUITE,
        "hostile recipe files (huge, cyclic, 40-deep imports, placeholders)",
        len(cases) + 1,
        "refused, nothing written",
    )


def test_recipes_a_command_line_cannot_carry_are_refused_in_one_line(
    home: StateRoot, tmp_path: Path
) -> None:
    """JSON the parser cannot nest, a lone surrogate (a `\\udcff` escape) or a NUL (a
    `\\u0000` escape): refused at spawn, exit 2, nothing written — also through the API."""
    cases = {
        "deep.json": ('{"template": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        "sur.json": ('{"values": {"x": "\\udcff"}, "template": "echo {x}"}', "UTF-8"),
        "surtpl.json": ('{"template": "echo \\udcff"}', "UTF-8"),
        "nul.json": ('{"values": {"x": "a\\u0000b"}, "template": "printf %s {x}"}', "NUL"),
        "nultpl.json": ('{"template": "printf a\\u0000b"}', "NUL"),
    }
    for name, (text, _) in cases.items():
        (tmp_path / name).write_text(text)
    commands = [["spawn", str(tmp_path / name), "--wait"] for name in cases]
    for args, proc, (_, needle) in zip(
        commands, fast_cli_all(commands), cases.values(), strict=True
    ):
        refused(args, proc, needle)
    for values in ({"x": "a\x00b"}, {"x": "\udcff"}):
        with pytest.raises(BadInput):
            actors.spawn(template="printf %s {x}", values=values)
    assert not home.runs.exists() or list(home.runs.iterdir()) == []
    record(
        SUITE,
        "recipes and values with 100k-deep JSON, lone surrogates, NUL",
        len(cases) + 2,
        "refused at spawn (exit 2 / BadInput), nothing written",
    )


# -- 4. values with shell metacharacters -------------------------------------------------------


def _outputs(home: StateRoot, run_id: str) -> list[str]:
    """Each command's own stdout, in order (captures/command-NNN/stdout.log)."""
    captures = sorted(home.run(run_id).captures.glob("command-*/stdout.log"))
    return [path.read_bytes().decode() for path in captures]  # (no newline translation)


def _metachar_values(canary: Path) -> list[str]:
    c = str(canary)
    return [
        f"$(touch {c}/x1)",
        f"`touch {c}/x2`",
        f"; touch {c}/x3",
        f"| touch {c}/x4",
        f"&& touch {c}/x5",
        f"> {c}/x6",
        f"$(touch {c}/x7",
        "$HOME ${HOME} $0 $1 $@",
        "' \" \\ \\\\",
        "line one\nline two",
        "* ? [a-z] ~",
        "{run_id} {{x}} {x=1}",
        "-n",
        "--help",
        "",
        "  lead and trail  ",
        "\u202erev \u200b zero",
        "%s %n %%",
        "\t",
    ]


def test_shell_metacharacters_in_values_are_one_literal_argument(
    home: StateRoot, tmp_path: Path
) -> None:
    """Through a real run: shell-free leaves, and `sh -c` with the value as "$1"."""
    canary = tmp_path / "canary"
    canary.mkdir()
    values = _metachar_values(canary)
    leaves = [f"printf '<%s>' {{v{i}}}" for i in range(len(values))]
    leaves += [f'sh -c \'printf "[%s]" "$1"\' sh {{v{i}}}' for i in range(len(values))]
    recipe = write_recipe(tmp_path, "meta", {"description": values[0], "template": leaves})
    args = ["spawn", str(recipe), "--wait", "--json"]
    for i, value in enumerate(values):
        args += ["-v", f"v{i}={value}"]
    proc = cli(*args)  # cold: the real argv path end to end
    assert_clean(args, proc, allowed=(0,))
    run_id = json.loads(proc.stdout)["run"]
    expected = [f"<{v}>" for v in values] + [f"[{v}]" for v in values]
    assert _outputs(home, run_id) == expected
    assert list(canary.iterdir()) == []
    assert not Path("X").exists()
    record(
        SUITE,
        "shell metacharacters as -v values in a real run",
        2 * len(values),
        "one literal argv word each; nothing executed",
    )


SUBST_EXAMPLES = 300


def test_substitution_is_never_recursive() -> None:
    """A value is inserted as text once: braces, quotes or `$(...)` inside it are never
    substituted, split or evaluated again."""
    _substitution_property(soak=False)


@pytest.mark.slow
def test_substitution_soak() -> None:
    _substitution_property(soak=True)


def _substitution_property(soak: bool) -> None:
    count = [0]

    @_examples(SUBST_EXAMPLES, soak)
    @given(value=st.one_of(json_leaf, json_value), word=PLACEHOLDERY)
    def check(value: Any, word: str) -> None:
        count[0] += 1
        assert substitute_word("{v}", {"v": value}) == value_text(value)
        assert substitute_word("pre-{v}-post", {"v": value}) == f"pre-{value_text(value)}-post"
        try:
            words = split_words(word)
        except BadInput:
            return
        for w in words:
            try:
                substitute_word(w, {"x": value, "y": value, "items": [value]})
            except ActorsError as err:
                _one_line(err)

    check()
    record(
        SUITE,
        "placeholder substitution of arbitrary values (property)",
        count[0],
        "inserted once, literally",
    )


RANDOM_RUNS = 5


def test_random_values_reach_the_command_verbatim(home: StateRoot, tmp_path: Path) -> None:
    _random_values_property(home, tmp_path, soak=False)


@pytest.mark.slow
def test_random_values_soak(home: StateRoot, tmp_path: Path) -> None:
    _random_values_property(home, tmp_path, soak=True)


def _random_values_property(home: StateRoot, tmp_path: Path, soak: bool) -> None:
    recipes_made = iter(range(10_000))

    @_examples(RANDOM_RUNS, soak)
    @given(
        values=st.lists(
            st.text(
                alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
                max_size=30,
            ),
            min_size=1,
            max_size=6,
        )
    )
    def check(values: list[str]) -> None:
        leaves = [f"printf '<%s>' {{v{i}}}" for i in range(len(values))]
        recipe = write_recipe(tmp_path, f"rand{next(recipes_made)}", {"template": leaves})
        spawned = actors.spawn(str(recipe), values={f"v{i}": v for i, v in enumerate(values)})
        assert actors.wait(spawned["run"], timeout=60)["status"] == "done"
        assert _outputs(home, spawned["run"]) == [f"<{v}>" for v in values]

    check()
    record(
        SUITE,
        "random unicode values through real runs (property)",
        next(recipes_made),
        "each value one argv word, verbatim",
    )
