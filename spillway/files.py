"""Files replaced whole: written aside, flushed to disk, then renamed over the old one.

A record a restarted process must find intact (the broker's state, a node's sink lineage, the
dead letters of a batch, a federated root's last reported batch) is never written in place: a
crash mid-write would leave half a file. :func:`replace_text` writes the new content under a
hidden name in the same folder (unique per process and thread), forces it to disk and renames
it over the target (``os.replace``: atomic on one file system), so a reader finds the old
content or the new, never a mix.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / "state.json"
>>> replace_text(path, '{"batch": 3}')
>>> path.read_text(), sorted(p.name for p in path.parent.iterdir())
('{"batch": 3}', ['state.json'])
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


def replace_text(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path``'s content with ``text`` (UTF-8) atomically: written aside, then
    renamed; the aside file is removed if writing fails."""
    path = Path(path)
    aside = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with aside.open("w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(aside, path)
    except BaseException:
        aside.unlink(missing_ok=True)
        raise
