#!/usr/bin/env bash
# How `draguard serve` scales with the ResourceClaims of the cluster it
# watches: time to ready, review rate, p99 latency and memory, for each
# claim count, against the fake API server of examples/scale_apiserver.rs.
#
#   scripts/scale.sh [N ...]          # default: 0 10000 100000 claims
#
# Environment: SCALE_NAMESPACES (1000) namespaces the claims spread over,
# SCALE_SECONDS (5) and SCALE_CONNECTIONS (8) for wrk, SCALE_PORT (18444)
# for draguard, SCALE_TIMEOUT (600) seconds to wait for a server. SCALE_PIN=1
# runs wrk on CPU 0 and draguard on the others (taskset), so that on a
# small machine p99 is the server's, not the load generator's fight for a
# core.
#
# For each N: starts the fake (plain HTTP, N claims, one ResourceQuota per
# namespace), then a release draguard with a kubeconfig pointing at it, and
#   ready_s   seconds from start until /readyz answers 200 (polled every 50 ms)
#   synced_s  seconds until /metrics shows every cache listed, N claims in
#             it (later than ready_s if /readyz does not wait for all lists)
# then checks one review (a one-device claim in ns-0000: allowed) and one
# over the namespace's quota (denied, with the usage the fake implies), and
# runs wrk -t1 on POST /validate for SCALE_SECONDS:
#   rps, p99_us   from wrk's done() hook
#   rss_mb        draguard's VmRSS after the run
#   ratio         rps(N) / rps of the first N (0 by default)
# It is a measurement: exit 0 whatever the figures; non-zero only when a
# server does not start or a request fails. Everything stays on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
claim_counts=("${@:-0 10000 100000}")
read -r -a claim_counts <<<"${claim_counts[*]}"
namespaces=${SCALE_NAMESPACES:-1000}
seconds=${SCALE_SECONDS:-5}
connections=${SCALE_CONNECTIONS:-8}
port=${SCALE_PORT:-18444}
timeout=${SCALE_TIMEOUT:-600}

if ! command -v wrk >/dev/null; then
  echo "installing wrk (Debian package)..." >&2
  apt-get update -qq >/dev/null && apt-get install -y -qq wrk >/dev/null
fi
cargo build --release --locked --quiet --bin draguard --example scale_apiserver
server_cpus=() client_cpus=()
if [[ ${SCALE_PIN:-} == 1 ]]; then
  cpus=$(nproc)
  ((cpus >= 2)) || { echo "scale.sh: SCALE_PIN=1 needs 2 CPUs or more" >&2; exit 1; }
  server_cpus=(taskset -c "1-$((cpus - 1))") client_cpus=(taskset -c 0)
fi

work=$(mktemp -d)
fake="" server=""
stop() {
  local pid
  for pid in "$@"; do
    # wait reports the signal's exit status: not a failure here.
    [ -z "$pid" ] || { kill "$pid" && wait "$pid"; } 2>/dev/null || true
  done
}
cleanup() {
  stop "$server" "$fake"
  rm -rf "$work"
}
trap cleanup EXIT

die() {
  echo "scale.sh: $*" >&2
  for log in "$work"/*.log; do
    [ -s "$log" ] && { echo "--- $log (last lines)" >&2; tail -n 20 "$log" >&2; }
  done
  exit 1
}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# The fake's usage of gpu.example.com devices in ns-0000 (claims 0, M,
# 2M, ...): 1-4 exact, plus 2 from firstAvailable every third claim.
expected_usage() {
  awk -v n="$1" -v m="$namespaces" 'BEGIN {
    for (i = 0; i < n; i += m) { used += 1 + i % 4; if (i % 3 == 0) used += 2 }
    print used + 0 }'
}

review() { # COUNT: a CREATE of a claim for COUNT gpu.example.com devices in ns-0000
  cat <<JSON
{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
 "request": {"uid": "5c0a1e52-0000-4000-8000-000000000001",
  "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
  "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
  "name": "bench-claim", "namespace": "ns-0000", "operation": "CREATE",
  "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
  "object": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
   "metadata": {"name": "bench-claim", "namespace": "ns-0000"},
   "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
     "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": $1}}]}}},
  "oldObject": null, "dryRun": false,
  "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}
JSON
}
review 1 >"$work/review.json"
review 100000000 >"$work/review-over-quota.json"

cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open("$work/review.json", "r"))
wrk.body = f:read("*a")
f:close()
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("SCALE rps=%.1f p99_us=%d requests=%d errors=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(99), summary.requests,
    e.connect + e.read + e.write + e.status + e.timeout))
end
LUA

url="https://127.0.0.1:$port"
curl_tls() { curl -s --max-time 10 --cacert "$work/certs/ca.crt" "$@"; }

post() { # FILE -> "CODE BODY"
  curl_tls -w '\n%{http_code}' -H 'Content-Type: application/json' --data-binary "@$1" \
    "$url/validate?timeout=10s" || true
}

run() {
  local n=$1
  rm -f "$work"/*.log
  target/release/examples/scale_apiserver --claims "$n" --namespaces "$namespaces" \
    --listen 127.0.0.1:0 >"$work/fake.out" 2>"$work/fake.log" &
  fake=$!
  local start apiserver=""
  start=$(now)
  while [ -z "$apiserver" ]; do
    kill -0 "$fake" 2>/dev/null || die "the fake API server exited"
    [ "$(since "$start" | cut -d. -f1)" -lt "$timeout" ] || die "the fake API server did not start in ${timeout}s"
    apiserver=$(grep -m1 '^http://' "$work/fake.out" || true)
    [ -n "$apiserver" ] || sleep 0.1
  done
  cat >"$work/kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: $apiserver
users:
- name: fake
  user: {}
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
current-context: fake
YAML

  rm -rf "$work/certs"
  start=$(now)
  RUST_LOG=warn "${server_cpus[@]}" target/release/draguard serve --listen "127.0.0.1:$port" --certs-dir "$work/certs" \
    --kubeconfig "$work/kubeconfig" >"$work/draguard.log" 2>&1 &
  server=$!
  local ready="" synced="" metrics code
  while [ -z "$synced" ]; do
    kill -0 "$server" 2>/dev/null || die "draguard exited"
    [ "$(since "$start" | cut -d. -f1)" -lt "$timeout" ] || die "draguard was not ready and synced in ${timeout}s"
    if [ -z "$ready" ]; then
      code=$(curl_tls -o /dev/null -w '%{http_code}' "$url/readyz" || true)
      [ "$code" = 200 ] && ready=$(since "$start")
    else
      metrics=$(curl_tls "$url/metrics" || true)
      if [ "$(grep -c '^draguard_cache_synced{.*} 1$' <<<"$metrics")" = 4 ] &&
        grep -qx "draguard_cache_objects{cache=\"resourceclaims\"} $n" <<<"$metrics"; then
        synced=$(since "$start")
      fi
    fi
    [ -n "$synced" ] || sleep 0.05
  done

  local answer used want
  answer=$(post "$work/review.json")
  if [ "$(tail -n1 <<<"$answer")" != 200 ] || ! grep -q '"allowed":true' <<<"$answer"; then
    die "N=$n: the benchmark review is not answered 200 allowed: $answer"
  fi
  # The quota path is taken, with every claim of ns-0000 counted.
  answer=$(post "$work/review-over-quota.json")
  used=$(grep -o 'gpu.example.com.deviceclass.resource.k8s.io/devices: limit [0-9]*, used [0-9]*' <<<"$answer" |
    head -n1 | sed 's/.*used //' || true)
  want=$(expected_usage "$n")
  [ "$used" = "$want" ] || die "N=$n: over-quota review should be denied with used $want: $answer"

  echo "N=$n: ready in ${ready}s, synced in ${synced}s; wrk -t1 -c$connections -d${seconds}s..." >&2
  local result rps p99 errors rss
  result=$("${client_cpus[@]}" wrk -t1 -c"$connections" -d"${seconds}s" -s "$work/post.lua" "$url/validate?timeout=10s" | grep '^SCALE ') ||
    die "N=$n: wrk failed"
  read -r _ rps p99 _ errors <<<"$result"
  rps=${rps#rps=} p99=${p99#p99_us=} errors=${errors#errors=}
  [ "$errors" = 0 ] || die "N=$n: $errors requests failed under wrk: $result"
  rss=$(awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$server/status")
  stop "$server" "$fake"
  server="" fake=""
  rows+=("$n $ready $synced $rps $p99 $rss")
}

rows=()
for n in "${claim_counts[@]}"; do
  run "$n"
done

echo
echo "draguard serve against $namespaces namespaces; wrk -t1 -c$connections -d${seconds}s POST /validate"
printf '%8s %8s %9s %9s %8s %7s %6s\n' claims ready_s synced_s rps p99_us rss_mb ratio
base=""
for row in "${rows[@]}"; do
  read -r n ready synced rps p99 rss <<<"$row"
  [ -n "$base" ] || base=$rps
  printf '%8s %8s %9s %9s %8s %7s %6s\n' "$n" "$ready" "$synced" "$rps" "$p99" "$rss" \
    "$(awk -v a="$rps" -v b="$base" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')"
done
