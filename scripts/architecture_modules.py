"""Rewrite the module table at the end of docs/architecture.md from the code.

    python scripts/architecture_modules.py

One row per module of actors/, adapters/ and runtime/ (package `__init__` files aside),
with the first paragraph of its docstring. tests/test_architecture.py fails when a
module is missing from the table: run this after adding or moving one.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"
HEADER = "| module | job |\n|---|---|\n"


def rows() -> list[str]:
    out = []
    for package in ("actors", "adapters", "runtime"):
        for path in sorted((REPO / package).rglob("*.py")):
            if path.name in ("__init__.py", "__main__.py"):
                continue
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            first = " ".join(doc.split("\n\n")[0].split()).replace("|", "\\|")
            if len(first) > 160:
                first = first[:160].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
            out.append(f"| `{path.relative_to(REPO)}` | {first} |")
    return out


def main() -> None:
    text = DOC.read_text()
    head = text[: text.index(HEADER)] if HEADER in text else text.rstrip("\n") + "\n\n"
    DOC.write_text(head + HEADER + "\n".join(rows()) + "\n")
    print(f"wrote {DOC.relative_to(REPO)}")


if __name__ == "__main__":
    main()
