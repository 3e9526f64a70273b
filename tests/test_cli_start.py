"""The CLI starts without what its command does not use (issue 28: a CLI that answers at once).

Each check runs a fresh interpreter, since what matters is what one ``stratamem`` call imports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from stratamem import Memory
from stratamem.testing import HashEmbedder

HEAVY = ("numpy", "asyncio", "stratamem.memory.facade", "stratamem.context.assemble", "stratamem.store.sqlite")


def _loaded_after(code: str) -> list[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_stratamem_loads_no_store_model_or_assembly() -> None:
    assert _loaded_after("import stratamem") == []


def test_the_command_tree_and_version_load_no_store_model_or_assembly() -> None:
    code = "from stratamem.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass"
    assert _loaded_after(code) == []


def test_public_names_still_resolve_to_the_documented_module() -> None:
    code = "import stratamem\nm = stratamem.Memory\nassert m.__module__ == 'stratamem', m.__module__"
    assert "stratamem.memory.facade" in _loaded_after(code)


def test_status_does_not_load_the_embedding_weights(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with Memory(db, namespace="default", embedder=HashEmbedder(dimensions=384)) as mem:
        mem.add([{"role": "user", "content": "the deploy key rotates on Fridays"}], session="s")
    code = (
        "from stratamem.cli import main\n"
        f"main(['--db', {str(db)!r}, 'status', '--json'], standalone_mode=False)\n"
        "from stratamem.embed import default\n"
        "assert not any(getattr(m, 'loaded', False) for m in default._models.values())\n"
        "assert 'onnxruntime' not in sys.modules and 'tokenizers' not in sys.modules"
    )
    assert "stratamem.store.sqlite" in _loaded_after(code)
