"""``python -m stratamem``: the same as the ``stratamem`` command."""

from stratamem.cli import main

main()
