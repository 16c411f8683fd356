"""`host add --install`: this very install of actors, put on a host without the internet.

The wheels are made here from what is installed (each distribution of actors's
requirement closure repacked from its installed files and metadata; actors itself from
its packages when it is an editable install), sent over the host's connection as one tar
stream, and installed there with `pip --no-index` into a venv of the host's own
(`${XDG_DATA_HOME:-~/.local/share}/actors/venv`). So the host needs a python3 of the same
version and machine (with its venv module), and nothing from any index.
"""

from __future__ import annotations

import base64
import hashlib
import io
import platform
import re
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from runtime.core.errors import BadInput, Conflict
from runtime.core.terminal import one_line
from runtime.hosts.host import Host
from runtime.hosts.ssh import HostAnswer

DIST = "detached-actors"
SKIPPED_META = frozenset({"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"})

REMOTE_SCRIPT = r"""set -e
d="${XDG_DATA_HOME:-$HOME/.local/share}/actors"
mkdir -p "$d" && chmod 700 "$d"
rm -rf "$d/wheels" && mkdir "$d/wheels"
tar -C "$d/wheels" -xf -
test -x "$d/venv/bin/python" || python3 -m venv "$d/venv" >&2
"$d/venv/bin/python" -m pip install -q --disable-pip-version-check --no-index \
    --find-links "$d/wheels" --force-reinstall "$1" >&2
echo "$d/venv/bin/actors"
"""


def _name(dist: metadata.Distribution) -> str:
    return re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()


def closure(root_name: str = DIST) -> list[metadata.Distribution]:
    """The installed distributions actors needs to run, itself first: each requirement,
    with the extras a requirement asks of it (`pyjwt[crypto]`), none of actors's own."""
    seen: dict[str, metadata.Distribution] = {}
    extras_seen: set[tuple[str, str]] = set()
    todo: list[tuple[str, frozenset[str]]] = [(root_name, frozenset())]
    while todo:
        raw, extras = todo.pop()
        name = re.sub(r"[-_.]+", "-", raw).lower()
        # installed ones (with a RECORD), not a source tree's egg-info on sys.path
        found = [d for d in metadata.distributions(name=name) if d.read_text("RECORD")]
        if not found:
            continue  # a requirement for another platform or Python: not needed here
        fresh = {(name, e) for e in extras} - extras_seen
        if name in seen and not fresh:
            continue
        extras_seen |= fresh
        dist = seen.setdefault(name, found[0])
        for requirement in dist.requires or []:
            wanted = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", requirement)
            if wanted and wanted.group(1) not in extras:
                continue
            required = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", requirement)
            if required:
                asked = frozenset(
                    e.strip() for e in (required.group(2) or "").split(",") if e.strip()
                )
                todo.append((required.group(1), asked))
    return list(seen.values())


def _files(dist: metadata.Distribution) -> Iterator[tuple[str, bytes]]:
    """(name in the wheel, content) of an installed distribution, metadata included."""
    info = None
    editable = False
    for entry in dist.files or []:
        text = str(entry)
        if text.startswith("..") or "__pycache__" in text or text.endswith(".pyc"):
            continue
        if text.startswith("__editable__") or text.endswith(".pth"):
            editable = True
            continue
        if ".dist-info/" in text:
            info = text.split("/", 1)[0]
            if text.split("/", 1)[1] in SKIPPED_META:
                continue
        yield text, Path(str(dist.locate_file(entry))).read_bytes()
    if editable:  # the packages live in the source tree: take them from there
        import importlib.util

        for top in (dist.read_text("top_level.txt") or "").split():
            spec = importlib.util.find_spec(top)
            if spec is None or not spec.submodule_search_locations:
                continue
            base = Path(next(iter(spec.submodule_search_locations)))
            for path in sorted(base.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    yield f"{top}/{path.relative_to(base).as_posix()}", path.read_bytes()
    if info is None:
        raise Conflict(f"{_name(dist)} has no dist-info here: it cannot be sent to a host")


def wheel(dist: metadata.Distribution) -> tuple[str, bytes]:
    """One installed distribution as a wheel: (file name, bytes), with a fresh RECORD."""
    tags = [
        line.split(":", 1)[1].strip()
        for line in (dist.read_text("WHEEL") or "").splitlines()
        if line.startswith("Tag:")
    ]
    # one tag in the name, one this Python takes (a py2.py3 wheel lists py2 first)
    tag = next(
        (t for t in tags if t.startswith(("py3", "cp3"))), tags[0] if tags else "py3-none-any"
    )
    version = dist.version
    stem = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    info = f"{stem}-{version}.dist-info"
    out = io.BytesIO()
    record = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in _files(dist):
            if ".dist-info/" in name:
                name = f"{info}/{name.split('/', 1)[1]}"
            zf.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{name},sha256={digest.decode()},{len(data)}")
        record.append(f"{info}/RECORD,,")
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return f"{stem}-{version}-{tag}.whl", out.getvalue()


def wheelhouse() -> bytes:
    """Every wheel actors needs, as one tar stream."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for dist in closure():
            name, data = wheel(dist)
            member = tarfile.TarInfo(name)
            member.size, member.mode = len(data), 0o600
            tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def install_remote(host: Host) -> str:
    """Install this version on the host; the path of its `actors` there."""
    import subprocess

    from runtime.hosts.ssh import SSH_FAILED, explain, posix_command

    r = host.record
    probe = "import sys, platform; print('%d.%d' % sys.version_info[:2], platform.machine())"
    here = f"{sys.version_info[0]}.{sys.version_info[1]} {platform.machine()}"
    done = host.shell(["python3", "-c", probe], timeout=60)
    found = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0 or found != here:
        there = one_line(found or done.stderr.decode(errors="replace"), 120)
        raise Conflict(
            f"host {host.name} has python3 {there!r}, this actors runs on {here}",
            hint="the wheels sent are this machine's: give the host the same Python "
            "(with its venv module), or install actors there yourself",
        )
    ver = metadata.version(DIST)
    done = subprocess.run(
        [*host.ssh(), posix_command(["sh", "-c", REMOTE_SCRIPT, "install", f"{DIST}=={ver}"])],
        input=wheelhouse(),
        capture_output=True,
        timeout=600,
        check=False,
    )
    if done.returncode == SSH_FAILED:
        raise explain(host.name, r["address"], r["port"], done.stderr.decode(errors="replace"))
    if done.returncode != 0:
        raise BadInput(
            f"installing actors on {host.name} failed: "
            f"{one_line(done.stderr.decode(errors='replace').strip()[-300:], 300)}",
            hint="see the line above; nothing was recorded",
        )
    return installed_path(host.name, done.stdout)


def installed_path(name: str, stdout: bytes) -> str:
    """The installer's last line: the absolute path of the `actors` it made, or one line
    saying the host answered something else (never kept as the host's actors)."""
    lines = stdout.decode(errors="replace").strip().splitlines()
    path = lines[-1].strip() if lines else ""
    if not path.startswith("/") or one_line(path, 4096) != path or "\ufffd" in path:
        raise HostAnswer(
            f"installing actors on {name} answered no path of an actors: "
            f"{one_line(path, 120) or 'nothing'}",
            hint=f"check {name}'s login prints nothing (a banner on stdout), then retry",
        )
    return path
