"""Long-term memory items: records, tiers, spill/recall/promote, review, search, metrics.

The former module ``stratamem.items`` is now ``stratamem.items.api``; its names are still
reachable here for one release, with a DeprecationWarning.
"""

from __future__ import annotations

from .. import _moved

__getattr__ = _moved.package_getattr(__name__)
