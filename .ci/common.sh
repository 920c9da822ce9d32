# Shared by .ci/otel.sh and .ci/interop.sh (sourced from the repository's root, never run
# on its own): a venv with pinned PyPI packages, a scratch folder whose background servers
# are stopped when the script exits, and a free loopback port.

# ci_venv DIR PIN...: makes the venv DIR (`python3 -m venv`) unless it has a python,
# installs the PINs unless every one is installed at exactly that version, and sets VENV
# to DIR's absolute path.
ci_venv() {
  local dir=$1 pin missing=0
  shift
  mkdir -p "$(dirname "$dir")"
  if [ ! -x "$dir/bin/python" ]; then
    python3 -m venv "$dir"
  fi
  VENV=$(cd "$dir" && pwd)
  for pin in "$@"; do
    "$VENV/bin/pip" freeze 2>/dev/null | grep -qx "$pin" || missing=1
  done
  if [ "$missing" = 1 ]; then
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "$@"
  fi
}

# ci_scratch NAME: WORK is a fresh scratch folder; when the script exits, every pid added
# to PIDS is killed and waited for, and WORK is removed.
ci_scratch() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/rolegate-$1.XXXXXX")
  PIDS=()
  trap ci_cleanup EXIT
}

ci_cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}

# free_port: a loopback port nothing listens on now (asked of the venv's python).
free_port() {
  "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
