"""The pyramid: segmenters, nodes, consolidation, tiers, archive, retention, escalation.

The former module ``stratamem.pyramid`` is now ``stratamem.pyramid.consolidate``; its names are still
reachable here for one release, with a DeprecationWarning.
"""

from __future__ import annotations

from .. import _moved

__getattr__ = _moved.package_getattr(__name__)
