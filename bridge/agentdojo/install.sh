#!/usr/bin/env bash
# Create (or reuse) the Python venv for bridge.py and install requirements-lock.txt into it.
# Idempotent: does nothing when the venv already holds this lock. Progress goes to stderr;
# the last line on stdout is the venv's python, e.g.  py="$(bridge/agentdojo/install.sh | tail -n1)"
#
#   ROLEGATE_AGENTDOJO_VENV    venv folder (default ~/.cache/rolegate/agentdojo-venv)
#   ROLEGATE_AGENTDOJO_PYTHON  interpreter to build it with (default python3; 3.10 or newer)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${ROLEGATE_AGENTDOJO_VENV:-$HOME/.cache/rolegate/agentdojo-venv}"
base_python="${ROLEGATE_AGENTDOJO_PYTHON:-python3}"
lock="$here/requirements-lock.txt"
stamp="$venv/.rolegate-lock.sha256"
want="$(sha256sum "$lock" | cut -d' ' -f1)"

if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "install.sh: $venv already holds requirements-lock.txt" >&2
else
  if ! "$base_python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    echo "install.sh: error: $base_python is missing or older than Python 3.10 (set ROLEGATE_AGENTDOJO_PYTHON)" >&2
    exit 1
  fi
  echo "install.sh: creating $venv with $("$base_python" --version 2>&1)" >&2
  mkdir -p "$(dirname "$venv")"
  "$base_python" -m venv --clear "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$lock" 1>&2
  "$venv/bin/python" -m pip check 1>&2
  "$venv/bin/python" -c 'import agentdojo.task_suite, mcp.client.stdio' 1>&2
  echo "$want" > "$stamp"
  echo "install.sh: installed requirements-lock.txt into $venv" >&2
fi
echo "$venv/bin/python"
