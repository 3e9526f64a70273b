"""Working state, its prompt projection, project instruction files, session logs.

The former module ``stratamem.state`` is now ``stratamem.state.working``; its names are still
reachable here for one release, with a DeprecationWarning.
"""

from __future__ import annotations

from .. import _moved

__getattr__ = _moved.package_getattr(__name__)
