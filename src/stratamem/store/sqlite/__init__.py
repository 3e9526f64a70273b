"""The SQLite backend: the turn store and its feature stores.

The former module ``stratamem.store.sqlite`` is now ``stratamem.store.sqlite.store``; its names are still
reachable here for one release, with a DeprecationWarning (``SQLiteStore`` stays here for good).
"""

from __future__ import annotations

from ... import _moved

__getattr__ = _moved.package_getattr(__name__, keep=("SQLiteStore",))
