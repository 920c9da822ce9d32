#!/usr/bin/env bash
# Runs every rolegate fuzz target for SECONDS each (default 60) and prints, per target,
# the inputs executed and the crashes found (a crash is a panic, a broken invariant, a
# sanitizer report, a timeout or running out of memory; libFuzzer stops a target at its
# first one and saves the input under fuzz/artifacts/TARGET/).
#
#   fuzz/run.sh 60             # every target, 60 s each
#   fuzz/run.sh 10 proposal    # one target
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). cargo-fuzz asks rustc for nightly-only
# flags (-Zsanitizer=address and friends); on a stable toolchain RUSTC_BOOTSTRAP=1 lets
# rustc accept them, so no nightly toolchain is needed. Set FUZZ_SANITIZER=none to build
# without AddressSanitizer (faster; Rust code is memory-safe, the sanitizer mainly
# watches the C parts of dependencies).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

seconds="${1:-60}"
shift || true
all_targets=(proposal plan scenario_row memory_write memory_load tool_arguments policypal_replies envelope checkpoint check_line fold redact)
targets=("${@:-${all_targets[@]}}")
sanitizer="${FUZZ_SANITIZER:-address}"

if ! command -v cargo-fuzz > /dev/null; then
  echo "fuzz/run.sh: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2
  exit 2
fi
if ! rustc --version | grep -q nightly; then
  export RUSTC_BOOTSTRAP=1
fi
# the fuzz build keeps its own target dir (gitignored), whatever the caller exported
export CARGO_TARGET_DIR="$here/target"

# -a: debug assertions and overflow checks on, so an arithmetic overflow is a crash
build=(cargo fuzz build -O -a --sanitizer "$sanitizer")
echo "== ${build[*]}"
if ! "${build[@]}" 2> build.log; then
  tail -30 build.log >&2
  echo "fuzz/run.sh: the build failed (full log: fuzz/build.log)" >&2
  exit 2
fi

status=0
printf '%-18s %12s %8s  %s\n' target executions crashes note
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t" logs
  dirs=("corpus/$t")
  [ -d "seeds/$t" ] && dirs+=("seeds/$t")
  dict=()
  case "$t" in proposal | plan | scenario_row | memory_load | envelope | checkpoint | check_line) dict=("-dict=json.dict") ;; esac
  before=$(find "artifacts/$t" -type f | wc -l)
  cargo fuzz run -O -a --sanitizer "$sanitizer" "$t" "${dirs[@]}" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${dict[@]}" \
    > "logs/$t.log" 2>&1
  rc=$?
  after=$(find "artifacts/$t" -type f | wc -l)
  crashes=$((after - before))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "logs/$t.log" | tail -1 | grep -o '[0-9]*$')
  if [ -z "$execs" ]; then
    execs=$(grep -o '^#[0-9]*' "logs/$t.log" | tail -1 | tr -d '#')
  fi
  note=""
  if [ "$rc" -ne 0 ] || [ "$crashes" -gt 0 ]; then
    status=1
    [ "$crashes" -eq 0 ] && crashes=1
    note="exit $rc; see fuzz/logs/$t.log and fuzz/artifacts/$t/"
  fi
  printf '%-18s %12s %8s  %s\n' "$t" "${execs:-?}" "$crashes" "$note"
done
exit "$status"
