#!/usr/bin/env bash
# The suite against the newest releases that pyproject.toml admits (no constraints file), in a
# throwaway virtual environment; run it before bumping constraints.txt. On success it prints
# the resolved versions in constraints.txt's format, ready to replace the pins.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(mktemp -d)/venv
python3 -m venv "$venv"
# shellcheck disable=SC1091
source "$venv/bin/activate"
python -m pip install --quiet --upgrade pip
pip install --quiet --upgrade ".[test]"
python -m pytest -n auto -q tests
ruff check .
echo "== green with these versions (pip freeze) =="
pip freeze | grep -v -i -E "^(tc.graph|-e |#)"
