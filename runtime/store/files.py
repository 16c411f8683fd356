"""The former home of the file primitives, split into `writes`, `appends` and `reads`.

Only names: kept so code written against `runtime.store.files` (branches in flight when
the split landed) still imports; new code imports the module that owns the name. Remove
once nothing imports it.
"""

from runtime.store.appends import (
    MAX_LINE_BYTES,
    Compactor,
    append_jsonl,
    append_line,
    compact_json,
    encode_line,
    lock_current,
    locked,
    unlock,
    write_locked,
)
from runtime.store.reads import (
    JsonlChunk,
    fold,
    marker_of,
    open_nofollow,
    parse_jsonl,
    parse_lines,
    read_bytes,
    read_json,
    read_jsonl,
    read_text_tail,
    tail_jsonl,
)
from runtime.store.writes import (
    DIR_MODE,
    FILE_MODE,
    DiskWriteError,
    dump_json,
    ensure_dir,
    publish_json_once,
    write_bytes_atomic,
    write_json_atomic,
)

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "MAX_LINE_BYTES",
    "Compactor",
    "DiskWriteError",
    "JsonlChunk",
    "append_jsonl",
    "append_line",
    "compact_json",
    "dump_json",
    "encode_line",
    "ensure_dir",
    "fold",
    "lock_current",
    "locked",
    "marker_of",
    "open_nofollow",
    "parse_jsonl",
    "parse_lines",
    "publish_json_once",
    "read_bytes",
    "read_json",
    "read_jsonl",
    "read_text_tail",
    "tail_jsonl",
    "unlock",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_locked",
]
