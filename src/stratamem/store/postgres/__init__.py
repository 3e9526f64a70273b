"""The PostgreSQL + pgvector backend: the turn store and its feature stores (needs the ``postgres`` extra).

The former module ``stratamem.store.postgres`` is now ``stratamem.store.postgres.store``; its names are still
reachable here for one release, with a DeprecationWarning (``PostgresStore`` stays here for good).
"""

from __future__ import annotations

from ... import _moved

__getattr__ = _moved.package_getattr(__name__, keep=("PostgresStore",))
