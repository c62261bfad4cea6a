#!/usr/bin/env bash
# Requests per second of `draguard serve` on loopback under wrk (HTTP/1.1
# keep-alive over TLS, as the apiserver talks to a webhook behind a Service).
#
#   scripts/load.sh [SECONDS] [CONNECTIONS] [REVIEW_JSON]
#
# Starts a release server on 127.0.0.1 with a throwaway certificate, posts
# one AdmissionReview repeatedly to /validate for SECONDS (default 10), prints
# wrk's report, and stops the server. Traffic never leaves the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-16}
review=${3:-examples/review-claim-allowed.json}
port=${DRAGUARD_LOAD_PORT:-18443}

if ! command -v wrk >/dev/null; then
  echo "installing wrk (Debian package)..." >&2
  apt-get update -qq >/dev/null && apt-get install -y -qq wrk >/dev/null
fi
cargo build --release --locked --quiet

work=$(mktemp -d)
cleanup() {
  [ -n "${server:-}" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

RUST_LOG=warn target/release/draguard serve --no-cluster --listen "127.0.0.1:$port" \
  --certs-dir "$work/certs" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 50); do
  curl -sf --cacert "$work/certs/ca.crt" "https://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done

cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open("$review", "r"))
wrk.body = f:read("*a")
f:close()
LUA

echo "draguard serve, POST /validate with $review, $connections connections, ${seconds}s"
wrk -t2 -c"$connections" -d"${seconds}s" --latency -s "$work/post.lua" \
  "https://127.0.0.1:$port/validate?timeout=10s"
