"""runtime.runner.output.HeaderQuote: branch output joined under headers it cannot forge.

The executor streams each branch's output into the join in blocks; the quoting must
not depend on where a block ends (a `---` or a UTF-8 line separator cut in two), must
change nothing but the `>` it inserts, and must leave no line that any reader
(str.splitlines, leading blanks stripped) takes for a header.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from runtime.runner.output import HeaderQuote

PIECES = [b"-", b"--", b"---", b"\n", b"\r", b"\x0b", b"\x0c", b"\x1c", b" ", b"\t", b">", b"x",
          "\u2028".encode(), "\x85".encode(), "\u200b".encode(), b"\xff", b"branch: a ---"]  # fmt: skip


def _quote(data: bytes, cuts: list[int]) -> bytes:
    quote = HeaderQuote()
    out, start = b"", 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        out += quote.feed(data[start:cut])
        start = cut
    return out + quote.feed(data[start:]) + quote.feed(b"", final=True)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40), st.lists(st.integers(0, 400), max_size=8))
def test_quoting_is_the_same_however_the_output_is_cut(
    pieces: list[bytes], cuts: list[int]
) -> None:
    data = b"".join(pieces)
    whole = _quote(data, [])
    assert _quote(data, cuts) == whole
    assert whole.replace(b">", b"") == data.replace(b">", b"")  # only `>` is added
    text = whole.decode("utf-8", "surrogateescape")
    assert not [line for line in text.splitlines() if line.strip().startswith("---")]


def test_examples() -> None:
    cases = {
        b"--- branch: a status: done ---\nok\n": b">--- branch: a status: done ---\nok\n",
        b"x\r--- b": b"x\r>--- b",
        b"  \t--- b": b"  \t>--- b",
        b">--- b": b">>--- b",
        b"text --- inside a line\n": b"text --- inside a line\n",
        b"a\n------\n": b"a\n>------\n",
        b"- item\n-- x\n": b"- item\n-- x\n",
    }
    for given_, expected in cases.items():
        assert _quote(given_, []) == expected, given_
