# Sourced by the scripts: create .venv and install the project with every extra, once, with the
# versions pinned in constraints.txt (so a new upstream release cannot change a clean checkout).
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=".venv/.installed-$(cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -c constraints.txt -e ".[dev]"
    touch "$stamp"
fi
