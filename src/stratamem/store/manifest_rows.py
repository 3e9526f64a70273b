"""The stored form of a context manifest, shared by every backend's manifest store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["StoredManifest", "check_keep"]


@dataclass(frozen=True, slots=True)
class StoredManifest:
    """A recorded manifest: what one assembled context held and why."""

    id: int
    """Store-assigned id, increasing."""
    namespace: str
    """Namespace the context was built for."""
    session: str | None
    """Current session of that context, if any."""
    data: Mapping[str, Any]
    """The manifest's JSON form (:meth:`stratamem.records.manifests.Manifest.to_dict`)."""


def check_keep(keep: object) -> int:
    """Validate how many manifests to keep per namespace.

    Raises:
        ValueError: ``keep`` is not an integer of at least 1.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be an integer of at least 1, got {keep!r}")
    return keep
