"""The files a folder source has admitted, in the order it first saw them, kept on disk.

A folder source numbers rows across files: a lane's tuple ``i`` is row ``i`` of the lane's files
laid end to end in the order they were first seen. That order must survive a restart (Spark's
offset log holds lane offsets, which mean nothing without it) and be the same for the driver and
every executor, so it is written down: an append-only JSON-lines *manifest*, one line per admitted
file (its path relative to the folder, its modification time, its record count). By default it
is ``_spillway/manifest.jsonl`` inside the folder (a name starting with ``_``, which listings and
Spark's own file source skip); a ``manifest`` option puts it elsewhere.

Which files are admitted (as Spark's file source): regular files whose name does not start with
``.`` or ``_`` and does not end with ``.tmp`` or ``._COPYING_`` (files being written; write a
file under such a name, or elsewhere, then rename it into place), matching ``pathGlobFilter``
when given, in subfolders too with ``recursiveFileLookup``. A file is immutable once admitted.
Files new at a listing are appended by (modification time, name), so a file written earlier
comes first; appends take an exclusive lock on ``<manifest>.lock`` and re-read the manifest
first, so several readers of one folder (queries of a node, a restarted node) share one order.

Examples
--------
>>> import pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "b.jsonl").write_text("{}\\n{}\\n"); _ = (d / ".a.jsonl").write_text("{}\\n")
>>> m = Manifest(d, fmt="json")
>>> [(e.file, e.records) for e in m.refresh()]
[('b.jsonl', 2)]
>>> _ = (d / "a.jsonl").write_text("{}\\n")
>>> [e.file for e in m.refresh()], [e.file for e in Manifest(d, fmt="json").load()]
(['a.jsonl'], ['b.jsonl', 'a.jsonl'])
"""

from __future__ import annotations

import fcntl
import fnmatch
import json
import os
from dataclasses import dataclass
from pathlib import Path

from spillway.errors import InputDataError
from spillway.feeds.files import count_records

#: Where the manifest goes inside the folder when no ``manifest`` option is given.
DEFAULT_MANIFEST = Path("_spillway") / "manifest.jsonl"

#: Name endings of files still being written.
TEMP_SUFFIXES = (".tmp", "._COPYING_")


@dataclass(frozen=True, kw_only=True)
class FileEntry:
    """One admitted file: its path relative to the folder, modification time (Unix s) and
    number of records (:func:`spillway.feeds.files.count_records`)."""

    file: str
    mtime: float
    records: int


def admissible(name: str) -> bool:
    """Whether a file (or folder) name can be admitted.

    >>> [admissible(n) for n in ("a.csv", ".a.csv", "_SUCCESS", "a.csv.tmp")]
    [True, False, False, False]
    """
    return not name.startswith((".", "_")) and not name.endswith(TEMP_SUFFIXES)


class Manifest:
    """The admitted files of one folder (see the module docstring).

    Parameters
    ----------
    root : the folder files arrive in.
    fmt : their format (to count records): ``json``, ``csv`` or ``parquet``.
    glob : ``pathGlobFilter``: a file-name pattern (``*.csv``), or None for every file.
    recursive : ``recursiveFileLookup``: look in subfolders too.
    path : the manifest file; default :data:`DEFAULT_MANIFEST` inside ``root``.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        fmt: str,
        glob: str | None = None,
        recursive: bool = False,
        path: str | Path | None = None,
    ) -> None:
        self.root = Path(root)
        self.fmt = fmt
        self.glob = glob
        self.recursive = recursive
        self.path = Path(path) if path is not None else self.root / DEFAULT_MANIFEST
        self.entries: list[FileEntry] = []
        self._size = 0  # bytes of the manifest already read

    def load(self) -> list[FileEntry]:
        """Read entries appended since the last read; all entries so far."""
        try:
            with self.path.open("rb") as f:
                f.seek(self._size)
                data = f.read()
        except FileNotFoundError:
            return self.entries
        except OSError as e:
            raise InputDataError(
                f"cannot read the folder manifest {str(self.path)!r}: {e.strerror or e}"
            ) from None
        end = data.rfind(b"\n") + 1  # a line still being appended is read next time
        for line in data[:end].splitlines():
            try:
                d = json.loads(line)
                self.entries.append(
                    FileEntry(
                        file=str(d["file"]), mtime=float(d["mtime"]), records=int(d["records"])
                    )
                )
            except (ValueError, KeyError, TypeError):
                raise InputDataError(
                    f"the folder manifest {str(self.path)!r} has a line that is not a file entry: "
                    f"{line[:80]!r}; delete the manifest to start the folder afresh"
                ) from None
        self._size += end
        return self.entries

    def listing(self) -> list[tuple[str, float]]:
        """Admissible files now in the folder: (relative path, modification time)."""
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if admissible(d)) if self.recursive else []
            for name in filenames:
                if not admissible(name) or (
                    self.glob is not None and not fnmatch.fnmatch(name, self.glob)
                ):
                    continue
                full = Path(dirpath) / name
                try:
                    st = full.stat()
                except FileNotFoundError:  # renamed or deleted while listing
                    continue
                out.append((full.relative_to(self.root).as_posix(), st.st_mtime))
        return out

    def refresh(self) -> list[FileEntry]:
        """Admit the files new since the last listing; the entries just admitted."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self.load()
                known = {e.file for e in self.entries}
                new = sorted(
                    ((m, f) for f, m in self.listing() if f not in known),
                    key=lambda mf: (mf[0], mf[1]),
                )
                added = [
                    FileEntry(file=f, mtime=m, records=count_records(self.root / f, self.fmt))
                    for m, f in new
                ]
                if added:
                    with self.path.open("a") as out:
                        for e in added:
                            out.write(
                                json.dumps({"file": e.file, "mtime": e.mtime, "records": e.records})
                                + "\n"
                            )
                        out.flush()
                        os.fsync(out.fileno())
                    self.load()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        return added
