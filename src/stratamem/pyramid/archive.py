"""The cold archive: the record of cold segments, zstd-compressed, read on demand.

One directory per namespace holds one file per day (``YYYY-MM-DD.jsonl.zst``);
each demotion to cold appends one zstd frame (with a content checksum) holding,
per segment it archived, one record per turn. A segment keeps a reference
``<file>@<offset>+<length>`` to its frame.

No text is stored twice (issue 12). The turns table is the canonical record and
keeps every turn until a forget or a purging retention deletes it, and both
remove the turn's record from the archive in the same step. So a turn the
database holds is archived as a *reference* (``{"id": turn_id}``, format 2)
and read back from the turns table; only a full record (``turn_record``:
id, session, seq, tokens and the turn itself, the only kind format 1 wrote)
carries text, and frames of both formats are read. The frame still names the
segment's archive day, which retention expires (and with
``retention_purges_turns`` the turns with it) and forget rewrites.

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

from ..errors import ArchiveError
from ..records import check_name

__all__ = ["Archive", "is_reference", "reference_record"]

_REF = re.compile(r"^(\d{4}-\d{2}-\d{2})\.jsonl\.zst@(\d{1,15})\+(\d{1,12})$")
_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.jsonl\.zst$")
_FORMAT_VERSION = 2
_READABLE = (1, 2)
_STAGED = ".rewrite"


def reference_record(turn_id: int) -> dict[str, Any]:
    """The archive record of a turn the turns table holds: its id only, no text."""
    return {"id": int(turn_id)}


def is_reference(record: Mapping[str, Any]) -> bool:
    """Whether an archive record names a canonical turn instead of carrying it."""
    return isinstance(record, Mapping) and "turn" not in record


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
        frame = self._frame(records)
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

    def _frame(self, records: Mapping[int, Sequence[Mapping[str, Any]]]) -> bytes:
        payload = json.dumps(
            {"v": _FORMAT_VERSION, "nodes": {str(k): list(v) for k, v in records.items()}},
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode("utf-8")
        return zstandard.ZstdCompressor(level=self.level, write_checksum=True).compress(payload)

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
        if not isinstance(data, dict) or data.get("v") not in _READABLE or not isinstance(data.get("nodes"), dict):
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
        to any more is the caller's job (:mod:`stratamem.pyramid.retention`).

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

    # --- rewriting a day file (forget) ---------------------------------------------------
    # A forget rewrites every day file holding a forgotten turn: the new content is
    # staged beside the file (``<file>.rewrite``, a name files() never lists), the
    # store commits references into the staged layout, then finish_rewrite() puts
    # it in place with one atomic rename. See stratamem.forget for the journal.

    def stage_rewrite(self, name: str, frames: Sequence[Mapping[int, Sequence[Mapping[str, Any]]]]) -> list[str]:
        """Write the new content of day file ``name`` as ``name.rewrite``, one frame per mapping.

        Returns:
            The reference each frame will have once :meth:`finish_rewrite` puts the file in place.

        Raises:
            ArchiveError: Not a day file name, or the file cannot be written.
        """
        self.day_of(name)
        refs, offset = [], 0
        try:
            folder = self._checked_dir()
            staged = folder / f"{name}{_STAGED}"
            with open(staged, "wb") as f:
                for records in frames:
                    frame = self._frame(records)
                    f.write(frame)
                    refs.append(f"{name}@{offset}+{len(frame)}")
                    offset += len(frame)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise ArchiveError(f"cannot stage a rewrite of archive file {name}: {exc}") from exc
        return refs

    def finish_rewrite(self, name: str, action: str) -> None:
        """Put a staged rewrite in place (``replace``) or delete the day file (``delete``); idempotent.

        A ``replace`` whose staged file is gone was already done.

        Raises:
            ArchiveError: Bad name or action, or the file system refused.
        """
        self.day_of(name)
        if action not in ("replace", "delete"):
            raise ArchiveError(f"unknown archive action {action!r}")
        folder = self._checked_dir()
        staged, target = folder / f"{name}{_STAGED}", folder / name
        try:
            if action == "replace" and staged.exists():
                os.replace(staged, target)
            elif action == "delete":
                staged.unlink(missing_ok=True)
                if target.is_file() and not target.is_symlink():
                    target.unlink()
            if folder.is_dir():
                # The rename or unlink must survive a crash as the store's commit does.
                fd = os.open(folder, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            raise ArchiveError(f"cannot finish the rewrite of archive file {name}: {exc}") from exc

    def staged(self) -> list[str]:
        """Day files with a staged rewrite (``<file>.rewrite`` present)."""
        if not self.dir.is_dir():
            return []
        return sorted(
            p.name[: -len(_STAGED)]
            for p in self.dir.iterdir()
            if p.name.endswith(_STAGED) and _FILE.match(p.name[: -len(_STAGED)])
        )

    def discard_staged(self, name: str) -> None:
        """Delete a staged rewrite that no committed forget refers to.

        Raises:
            ArchiveError: Bad name, or the file system refused.
        """
        self.day_of(name)
        try:
            (self._checked_dir() / f"{name}{_STAGED}").unlink(missing_ok=True)
        except OSError as exc:
            raise ArchiveError(f"cannot delete staged archive file {name}{_STAGED}: {exc}") from exc
