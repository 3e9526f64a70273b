"""Context assembly: sources, budgeted assembly, manifest, rendering.

The former module ``stratamem.context`` is now ``stratamem.context.render``; its names are still
reachable here for one release, with a DeprecationWarning.
"""

from __future__ import annotations

from .. import _moved

__getattr__ = _moved.package_getattr(__name__)
