"""Input and output checks shared by the embedders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where it is used: opening a store (`stratamem status`) needs none
    import numpy as np


def model_name(embedder: Any) -> str:
    """The name vectors of ``embedder`` are recorded under: its ``name``, else its class name.

    One definition for every place that stores or compares it (the recall
    index, items, the pyramid's derived summary vectors), so a vector made in
    one place is recognised in another.
    """
    return str(getattr(embedder, "name", None) or type(embedder).__name__)


def check_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list, or ``TypeError`` for a bare string or a non-string item."""
    if isinstance(texts, str | bytes):
        raise TypeError("embed_batch takes a sequence of strings, not a single string; wrap it in a list")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, not str")
    return out


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (an all-zero row stays zero), as float32."""
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # Same floor as the reference Normalize module (torch's F.normalize eps).
    vectors /= np.maximum(norms, np.float32(1e-12))
    return vectors
