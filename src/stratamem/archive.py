"""The cold archive: full content of cold segments, zstd-compressed, read on demand.

One directory per namespace holds one file per day (``YYYY-MM-DD.jsonl.zst``);
each demotion to cold appends one zstd frame (with a content checksum) holding
the turns of the segments it archived. A segment keeps a reference
``<file>@<offset>+<length>`` to its frame.

Reads are confined to the archive (seed 000 joined a caller-supplied reference
into a path): a reference must match the exact pattern above, name a regular
file directly inside the namespace's directory, and not be a symbolic link.
Anything else raises :class:`~stratamem.errors.ArchiveError`, as do missing
files, truncated frames and checksum failures.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import zstandard

from .errors import ArchiveError
from .records import check_name

__all__ = ["Archive"]

_REF = re.compile(r"^(\d{4}-\d{2}-\d{2})\.jsonl\.zst@(\d{1,15})\+(\d{1,12})$")
_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.jsonl\.zst$")
_FORMAT_VERSION = 1


class Archive:
    """Append-only zstd archive of one namespace.

    Args:
        root: Archive directory of the store (one subdirectory per namespace).
        namespace: Whose archive this is.
        level: zstd compression level.

    Raises:
        ValidationError: Invalid namespace name.
    """

    def __init__(self, root: str | os.PathLike[str], namespace: str, *, level: int = 9) -> None:
        self.root = Path(root)
        self.dir = self.root / check_name(namespace, "namespace")
        self.level = level

    def _checked_dir(self) -> Path:
        if self.dir.is_symlink() or self.root.is_symlink():
            raise ArchiveError(f"archive directory {self.dir} is a symbolic link; refusing to use it")
        return self.dir

    def write(self, records: Mapping[int, Sequence[Mapping[str, Any]]], *, day: date) -> str:
        """Append one frame holding ``node_id -> turn records``; returns its reference.

        The frame is flushed and fsynced before the reference is returned, so a
        reference stored afterwards always points at durable bytes.

        Raises:
            ArchiveError: The archive cannot be written.
        """
        payload = json.dumps({"v": _FORMAT_VERSION, "nodes": {str(k): list(v) for k, v in records.items()}},
                             ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        frame = zstandard.ZstdCompressor(level=self.level, write_checksum=True).compress(payload)
        name = f"{day.isoformat()}.jsonl.zst"
        try:
            folder = self._checked_dir()
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            if path.is_symlink():
                raise ArchiveError(f"archive file {name} is a symbolic link; refusing to write")
            with open(path, "ab") as f:
                offset = f.seek(0, os.SEEK_END)
                f.write(frame)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise ArchiveError(f"cannot write archive {self.dir / name}: {exc}") from exc
        return f"{name}@{offset}+{len(frame)}"

    def _resolve(self, ref: object) -> tuple[Path, int, int]:
        if not isinstance(ref, str):
            raise ArchiveError(f"archive reference must be a string, got {type(ref).__name__}")
        m = _REF.match(ref)
        if not m:
            raise ArchiveError(f"invalid archive reference {ref!r}")
        folder = self._checked_dir()
        path = folder / f"{m.group(1)}.jsonl.zst"
        if path.is_symlink():
            raise ArchiveError(f"archive reference {ref!r} names a symbolic link")
        try:
            inside = path.resolve(strict=True).parent == folder.resolve(strict=True)
        except OSError:
            raise ArchiveError(f"archived content for {ref!r} is missing (deleted by retention?)") from None
        if not inside or not path.is_file():
            raise ArchiveError(f"archive reference {ref!r} does not name a file inside the archive")
        return path, int(m.group(2)), int(m.group(3))

    def read(self, ref: str) -> dict[int, list[dict[str, Any]]]:
        """The frame a reference points to, as ``node_id -> turn records``.

        Raises:
            ArchiveError: Bad or escaping reference, missing file, truncated or corrupt frame.
        """
        path, offset, length = self._resolve(ref)
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                frame = f.read(length)
        except OSError as exc:
            raise ArchiveError(f"cannot read archive {path.name}: {exc}") from exc
        if len(frame) != length:
            raise ArchiveError(f"archive frame {ref!r} is truncated")
        try:
            data = json.loads(zstandard.ZstdDecompressor().decompress(frame))
        except (zstandard.ZstdError, ValueError) as exc:
            raise ArchiveError(f"archive frame {ref!r} is corrupt: {exc}") from exc
        if not isinstance(data, dict) or data.get("v") != _FORMAT_VERSION or not isinstance(data.get("nodes"), dict):
            raise ArchiveError(f"archive frame {ref!r} has an unknown format")
        return {int(k): v for k, v in data["nodes"].items()}

    def read_node(self, ref: str, node_id: int) -> list[dict[str, Any]]:
        """Turn records of one node from its frame.

        Raises:
            ArchiveError: As :meth:`read`, or the frame does not hold the node.
        """
        nodes = self.read(ref)
        if node_id not in nodes:
            raise ArchiveError(f"archive frame {ref!r} holds no node {node_id}")
        return nodes[node_id]

    def files(self) -> list[Path]:
        """The archive's day files, oldest first."""
        if not self.dir.is_dir():
            return []
        return sorted(p for p in self.dir.iterdir() if _FILE.match(p.name) and not p.is_symlink())

    @staticmethod
    def file_of(ref: str) -> str:
        """The day file a reference points into.

        Raises:
            ArchiveError: Not a valid archive reference.
        """
        m = _REF.match(ref) if isinstance(ref, str) else None
        if not m:
            raise ArchiveError(f"invalid archive reference {ref!r}")
        return f"{m.group(1)}.jsonl.zst"

    @staticmethod
    def day_of(name: str) -> date:
        """The day a day file's name carries.

        Raises:
            ArchiveError: Not a day file name.
        """
        m = _FILE.match(name)
        if not m:
            raise ArchiveError(f"{name!r} is not an archive day file")
        return date.fromisoformat(m.group(1))

    def delete(self, names: Sequence[str]) -> list[str]:
        """Delete the named day files that exist; returns the names deleted.

        Only plain day files directly inside the namespace's directory are
        touched (never a symbolic link); deciding which files nothing refers
        to any more is the caller's job (:mod:`stratamem.retention`).

        Raises:
            ArchiveError: A name is not a day file, or a file cannot be deleted
                (the ones before it are gone, the rest stay).
        """
        present = {p.name: p for p in self.files()}
        gone = []
        for name in names:
            self.day_of(name)
            path = present.get(name)
            if path is None:
                continue
            try:
                path.unlink()
            except OSError as exc:
                raise ArchiveError(f"cannot delete archive file {name}: {exc}") from exc
            gone.append(name)
        return gone

    def size_bytes(self) -> int:
        """Bytes of the namespace's archive files."""
        return sum(p.stat().st_size for p in self.files())
