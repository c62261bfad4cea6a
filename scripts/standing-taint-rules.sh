#!/usr/bin/env bash
# What judging standing DeviceTaintRules costs `draguard serve` on a large
# cluster, and whether their counts leave DeviceTaintRule reviews their
# impact slot (controllers/standing_taint_rules.rs: a round every 5 s, at
# most 8 counts a round, one at a time, under the impact cap of 2).
#
#   scripts/standing-taint-rules.sh [N] [RULES ...]   # default: 100000 0 40
#
# For each RULES, the fake of examples/scale_apiserver.rs serves N
# gpu.example.com devices (8 per node), N claims allocated one per device
# and reserved for one pod each, over 1000 namespaces (the cluster of
# scripts/cluster-memory.sh), and RULES standing NoExecute DeviceTaintRules
# over every device. draguard serve (release build) runs under
# scripts/memlimit.sh MEMORY_MB (default 256) with a policy capping
# evictions at 1000 pods, so every rule passes it. From ready on:
#   - CONNECTIONS (8) clients post a DeviceTaintRule review for
#     SECONDS_LOAD (30) s: each answer is denied with the count (`denied`),
#     denied with "try again" because every impact slot stayed busy
#     (`busy`), or wrong/failed (`errors`, which fail the run);
#   - counted_s: time until every rule's draguard_taint_rule_reach
#     {kind="pods"} is N (RULES=0: 0);
#   - rss_peak_mb: the highest VmRSS sampled every 100 ms; cgroup_peak.
# Compare busy between RULES=0 and RULES>0 for what the standing counts
# take from reviews. Exit 1 when the replica dies, a gauge is wrong or never
# complete within TIMEOUT (600) s, or a review is answered wrongly.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
shift || true
rules_list=("${@:-0 40}")
read -r -a rules_list <<<"${rules_list[*]}"
memory_mb=${MEMORY_MB:-256}
connections=${CONNECTIONS:-8}
load_seconds=${SECONDS_LOAD:-30}
namespaces=1000
port=${PORT:-18447}
timeout=${TIMEOUT:-600}
memlimit=${MEMLIMIT:-scripts/memlimit.sh}

if [ -z "${DRAGUARD:-}" ] || [ -z "${FAKE:-}" ]; then
  cargo build --release --locked --quiet --bin draguard --example scale_apiserver
fi
draguard=${DRAGUARD:-target/release/draguard}
fake_bin=${FAKE:-target/release/examples/scale_apiserver}

work=$(mktemp -d)
fake="" server="" sampler=""
stop() {
  local pid
  for pid in "$@"; do
    [ -z "$pid" ] || { kill "$pid" && wait "$pid"; } 2>/dev/null || true
  done
}
cleanup() {
  stop "$sampler" "$server" "$fake"
  if [ -s "$work/cg" ]; then rmdir "$(cat "$work/cg")" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

die() {
  echo "standing-taint-rules.sh: $*" >&2
  for log in "$work"/*.log; do
    [ -s "$log" ] && { echo "--- $log (last lines)" >&2; tail -n 20 "$log" >&2; }
  done
  exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
rss_mb() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo 0; }

mkdir -p "$work/policies"
cat >"$work/policies/blast-radius.yaml" <<'YAML'
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata:
  name: blast-radius
spec:
  taintRules:
    maxEvictedPods: 1000
YAML
cat >"$work/review.json" <<'JSON'
{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
 "request": {"uid": "5c0a1e52-0000-4000-8000-000000000003",
  "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "DeviceTaintRule"},
  "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "devicetaintrules"},
  "name": "drain-more", "operation": "CREATE",
  "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
  "object": {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
   "metadata": {"name": "drain-more"},
   "spec": {"deviceSelector": {"driver": "gpu.example.com"},
    "taint": {"key": "example.com/maintenance", "effect": "NoExecute", "timeAdded": "2026-11-21T10:00:00Z"}}},
  "oldObject": null, "dryRun": false}}
JSON

url="https://127.0.0.1:$port"
curl_tls() { curl -s --max-time 10 --cacert "$work/certs/ca.crt" "$@"; }
post() { curl_tls -w '\n%{http_code}' -H 'Content-Type: application/json' --data-binary "@$work/review.json" "$url/validate?timeout=3s" || true; }
# Rules whose pods gauge reads N.
counted() { curl_tls "$url/metrics" | grep -c "^draguard_taint_rule_reach{rule=\"drain-gpus-[0-9]*\",kind=\"pods\"} $n\$" || true; }

run() {
  local rules=$1
  rm -f "$work"/*.log "$work"/client-*.out "$work/cg" "$work/peak"
  "$fake_bin" --claims "$n" --devices "$n" --namespaces "$namespaces" --taint-rules "$rules" \
    --listen 127.0.0.1:0 >"$work/fake.out" 2>"$work/fake.log" &
  fake=$!
  local start apiserver=""
  start=$(now)
  while [ -z "$apiserver" ]; do
    kill -0 "$fake" 2>/dev/null || die "the fake API server exited"
    [ "$(since "$start" | cut -d. -f1)" -lt "$timeout" ] || die "the fake API server did not start in ${timeout}s"
    apiserver=$(grep -m1 '^http://' "$work/fake.out" || true)
    [ -n "$apiserver" ] || sleep 0.2
  done
  cat >"$work/kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: $apiserver}}]
users: [{name: fake, user: {}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
YAML
  rm -rf "$work/certs"
  start=$(now)
  MEMLIMIT_CG_FILE="$work/cg" RUST_LOG=error "$memlimit" "$memory_mb" "$draguard" serve \
    --listen "127.0.0.1:$port" --certs-dir "$work/certs" --kubeconfig "$work/kubeconfig" \
    --kubernetes-version 1.37 --policies "$work/policies" >"$work/draguard.log" 2>&1 &
  server=$!
  local ready="" code
  while [ -z "$ready" ]; do
    kill -0 "$server" 2>/dev/null || die "RULES=$rules: draguard died before ready"
    [ "$(since "$start" | cut -d. -f1)" -lt "$timeout" ] || die "RULES=$rules: draguard was not ready in ${timeout}s"
    code=$(curl_tls -o /dev/null -w '%{http_code}' "$url/readyz" || true)
    if [ "$code" = 200 ]; then ready=$(since "$start"); else sleep 0.1; fi
  done
  local rss_ready
  rss_ready=$(rss_mb "$server")
  (peak=0; while kill -0 "$server" 2>/dev/null; do
    r=$(rss_mb "$server"); ((r > peak)) && { peak=$r; echo "$peak" >"$work/peak"; }; sleep 0.1; done) &
  sampler=$!
  echo "RULES=$rules: ready in ${ready}s at ${rss_ready} MB; $connections clients post a DeviceTaintRule review for ${load_seconds}s..." >&2
  local from end client clients=()
  from=$(now)
  end=$(($(date +%s) + load_seconds))
  for ((client = 0; client < connections; client++)); do
    (while (($(date +%s) < end)); do
      a=$(post)
      if [ "$(tail -n1 <<<"$a")" != 200 ]; then echo error
      elif grep -q 'try again in a moment' <<<"$a"; then echo busy
      elif grep -q "would evict $n pods, more than" <<<"$a"; then echo denied
      else echo error; fi
    done >"$work/client-$client.out") &
    clients+=($!)
  done
  # Every rule counted: when, from ready (the load runs meanwhile).
  local counted_s="" c=0
  while [ -z "$counted_s" ]; do
    kill -0 "$server" 2>/dev/null || die "RULES=$rules: draguard died"
    c=$(counted)
    if [ "$c" -ge "$rules" ]; then counted_s=$(since "$from"); break; fi
    [ "$(since "$from" | cut -d. -f1)" -lt "$timeout" ] || die "RULES=$rules: only $c rules counted in ${timeout}s"
    sleep 0.5
  done
  wait "${clients[@]}"
  kill -0 "$server" 2>/dev/null || die "RULES=$rules: draguard died under load"
  [ "$(counted)" -eq "$rules" ] || die "RULES=$rules: the gauge does not read $n pods for every rule"
  local denied busy errors rss_peak cg
  denied=$(cat "$work"/client-*.out | grep -c '^denied$' || true)
  busy=$(cat "$work"/client-*.out | grep -c '^busy$' || true)
  errors=$(cat "$work"/client-*.out | grep -c '^error$' || true)
  rss_peak=$(cat "$work/peak" 2>/dev/null || echo 0)
  stop "$sampler" "$server" "$fake"
  sampler="" server="" fake=""
  cg=$("$memlimit" --report "$(cat "$work/cg")")
  echo "RULES=$rules: $cg" >&2
  ((errors == 0)) || { echo "RULES=$rules: $errors failed or wrong answers under load" >&2; failed=1; }
  rows+=("$rules $ready $counted_s $rss_ready $rss_peak $denied $busy $errors $(sed 's/.*peak \([0-9]*\) MiB.*OOM kills \([0-9]*\).*/\1 \2/' <<<"$cg")")
}

rows=() failed=0
for rules in "${rules_list[@]}"; do
  run "$rules"
done

echo
echo "draguard serve under ${memory_mb} MiB: $n devices, $n allocated claims, $n pods, RULES standing NoExecute rules over every device; $connections clients x ${load_seconds}s of DeviceTaintRule reviews"
printf '%6s %8s %10s %13s %12s %7s %6s %7s %12s %9s\n' rules ready_s counted_s rss_ready_mb rss_peak_mb denied busy errors cgroup_peak oom_kills
for row in "${rows[@]}"; do
  # shellcheck disable=SC2086
  printf '%6s %8s %10s %13s %12s %7s %6s %7s %12s %9s\n' $row
done
exit "$failed"
