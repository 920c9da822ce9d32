#!/usr/bin/env bash
# Opens the HTML report in headless Chromium (Debian's `chromium`, installed here when it is
# missing), takes a screenshot and dumps the DOM, and fails unless Chromium succeeded and the
# rendered page holds the defense matrix and at least one sequence diagram.
set -euo pipefail
cd "$(dirname "$0")/.."

out="${REPORT_CHECK_DIR:-target/report-check}"
mkdir -p "$out"

if ! command -v chromium >/dev/null 2>&1; then
  echo "-- installing chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi

echo "-- rolegate report --out $out/report.html"
cargo run --release --quiet -- report --out "$out/report.html"

page="file://$(realpath "$out/report.html")"
chrome() {
  local profile
  profile="$(mktemp -d)"
  timeout 180 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" "$@"
  rm -rf "$profile"
}

echo "-- chromium --screenshot"
rm -f "$out/report.png"
chrome --screenshot="$out/report.png" --window-size=1280,2000 "$page" 2>"$out/chromium-screenshot.log" \
  || { cat "$out/chromium-screenshot.log"; echo "chromium failed to take the screenshot"; exit 1; }
if [ ! -s "$out/report.png" ] || [ "$(head -c 8 "$out/report.png" | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ]; then
  echo "no PNG screenshot at $out/report.png"; exit 1
fi

echo "-- chromium --dump-dom"
chrome --dump-dom "$page" >"$out/dom.html" 2>"$out/chromium-dom.log" \
  || { cat "$out/chromium-dom.log"; echo "chromium failed to dump the DOM"; exit 1; }
grep -q '<table id="matrix-table"' "$out/dom.html" || { echo "the rendered page has no matrix table"; exit 1; }
configs=$(grep -o '<tr class="\(single\|multi\)"><td class="design">' "$out/dom.html" | wc -l)
diagrams=$(grep -o '<svg class="seq"' "$out/dom.html" | wc -l)
arrows=$(grep -o '<line class="msg"' "$out/dom.html" | wc -l)
[ "$configs" -ge 24 ] || { echo "the rendered matrix has $configs configuration rows"; exit 1; }
[ "$diagrams" -ge 1 ] && [ "$arrows" -ge 1 ] || { echo "the rendered page has no sequence diagram"; exit 1; }
echo "report check passed: $configs table rows, $diagrams diagrams, $arrows envelope arrows; screenshot $out/report.png"
