#!/usr/bin/env bash
# Whether `draguard serve` holds a large DRA cluster inside the
# deployment's memory limit (deploy/base: 256Mi), and what
# `draguard impact --snapshot` takes on the same cluster.
#
#   scripts/cluster-memory.sh [N ...]     # default: 40000 100000
#
# For each N, the fake API server of examples/scale_apiserver.rs serves N
# gpu.example.com devices (8 per node, N/8 ResourceSlices), N claims, each
# allocated on its own device and reserved for its own pod (N pods), over
# 1000 namespaces. Then:
#   1. draguard serve runs under scripts/memlimit.sh (a fresh
#      memory cgroup of MEMORY_MB, default 256, as the kubelet enforces
#      limits.memory), with a policy capping evictions at 1000 pods;
#      ready_s and rss_ready_mb are taken when /readyz first answers 200;
#   2. one DeviceTaintRule review (NoExecute on every gpu.example.com
#      device) must be denied, naming the N pods it would evict, with the
#      impact warning counting N pods, 1000 namespaces, N devices, N/8 nodes;
#   3. 8 concurrent clients (CONNECTIONS) post that review for 20 s
#      (SECONDS_LOAD); the replica must survive, with every answer 200:
#      denied by the cap (counted as `denied`), or, when every impact slot
#      stayed busy, denied with "try again" (`busy`);
#      rss_peak_mb is the highest VmRSS sampled every 100 ms, cgroup_peak
#      the cgroup's own peak;
#   4. the same cluster written as one JSON List (the shape of `kubectl get
#      resourceslices,resourceclaims,pods -A -o json`), and the peak RSS of
#      `draguard impact --snapshot` on it (GNU time), output to /dev/null.
#
# DRAGUARD=path measures another build of draguard (e.g. an older one, for
# before/after figures), FAKE=path another build of the fake; by default
# the release builds of this tree (built first unless both are given).
# Exit 1 when the replica dies, never becomes ready, or answers wrongly.
set -euo pipefail
cd "$(dirname "$0")/.."
counts=("${@:-40000 100000}")
read -r -a counts <<<"${counts[*]}"
memory_mb=${MEMORY_MB:-256}
connections=${CONNECTIONS:-8}
load_seconds=${SECONDS_LOAD:-20}
namespaces=1000
port=${PORT:-18445}
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
  # A cgroup left by a run cut short (memlimit.sh --report removes it).
  if [ -s "$work/cg" ]; then rmdir "$(cat "$work/cg")" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

die() {
  echo "cluster-memory.sh: $*" >&2
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
  mode: Enforce
  taintRules:
    maxEvictedPods: 1000
YAML
cat >"$work/rule.yaml" <<'YAML'
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata:
  name: drain-gpus
spec:
  deviceSelector: {driver: gpu.example.com}
  taint: {key: example.com/maintenance, effect: NoExecute, timeAdded: "2026-11-21T10:00:00Z"}
YAML
cat >"$work/review.json" <<'JSON'
{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
 "request": {"uid": "5c0a1e52-0000-4000-8000-000000000002",
  "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "DeviceTaintRule"},
  "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "devicetaintrules"},
  "name": "drain-gpus", "operation": "CREATE",
  "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
  "object": {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
   "metadata": {"name": "drain-gpus"},
   "spec": {"deviceSelector": {"driver": "gpu.example.com"},
    "taint": {"key": "example.com/maintenance", "effect": "NoExecute", "timeAdded": "2026-11-21T10:00:00Z"}}},
  "oldObject": null, "dryRun": false}}
JSON

url="https://127.0.0.1:$port"
curl_tls() { curl -s --max-time 10 --cacert "$work/certs/ca.crt" "$@"; }
post() { curl_tls -w '\n%{http_code}' -H 'Content-Type: application/json' --data-binary "@$work/review.json" "$url/validate?timeout=3s" || true; }

run() {
  local n=$1 nodes=$(($1 / 8))
  rm -f "$work"/*.log "$work/cg"
  "$fake_bin" --claims "$n" --devices "$n" --namespaces "$namespaces" --listen 127.0.0.1:0 \
    >"$work/fake.out" 2>"$work/fake.log" &
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
  MEMLIMIT_CG_FILE="$work/cg" RUST_LOG=warn "$memlimit" "$memory_mb" "$draguard" serve \
    --listen "127.0.0.1:$port" --certs-dir "$work/certs" --kubeconfig "$work/kubeconfig" \
    --policies "$work/policies" >"$work/draguard.log" 2>&1 &
  server=$!
  local ready="" code rss_ready
  while [ -z "$ready" ]; do
    if ! kill -0 "$server" 2>/dev/null; then
      wait "$server" 2>/dev/null || true
      server=""
      rows+=("$n died - - - - - $("$memlimit" --report "$(cat "$work/cg")" | sed 's/.*peak \([0-9]*\) MiB.*OOM kills \([0-9]*\).*/\1 \2/')")
      stop "$fake"; fake=""
      echo "N=$n: draguard died before ready (see the row)" >&2
      failed=1
      return
    fi
    if [ "$(since "$start" | cut -d. -f1)" -ge "$timeout" ]; then
      rss_ready=$(rss_mb "$server")
      stop "$server" "$fake"
      server="" fake=""
      rows+=("$n never ${rss_ready}(${timeout}s) - - - - $("$memlimit" --report "$(cat "$work/cg")" | sed 's/.*peak \([0-9]*\) MiB.*OOM kills \([0-9]*\).*/\1 \2/')")
      echo "N=$n: draguard was not ready in ${timeout}s" >&2
      failed=1
      return
    fi
    code=$(curl_tls -o /dev/null -w '%{http_code}' "$url/readyz" || true)
    if [ "$code" = 200 ]; then ready=$(since "$start"); else sleep 0.1; fi
  done
  rss_ready=$(rss_mb "$server")

  local answer
  answer=$(post)
  [ "$(tail -n1 <<<"$answer")" = 200 ] || die "N=$n: the DeviceTaintRule review is not answered 200: $answer"
  grep -q '"allowed":false' <<<"$answer" && grep -q "the rule would evict $n pods, more than taintRules.maxEvictedPods (1000)" <<<"$answer" ||
    die "N=$n: the rule should be denied for evicting $n pods: $answer"
  grep -q "impact: would evict $n pods in $namespaces namespaces (.*); matches $n devices on $nodes nodes" <<<"$answer" ||
    die "N=$n: the impact warning should count $n pods, $n devices, $nodes nodes: $answer"

  # Peak RSS, sampled while the load runs.
  (peak=0; while kill -0 "$server" 2>/dev/null; do
    r=$(rss_mb "$server"); ((r > peak)) && { peak=$r; echo "$peak" >"$work/peak"; }; sleep 0.1; done) &
  sampler=$!
  echo "N=$n: ready in ${ready}s at ${rss_ready} MB; $connections clients post the DeviceTaintRule review for ${load_seconds}s..." >&2
  local end client clients=()
  end=$(($(date +%s) + load_seconds))
  for ((client = 0; client < connections; client++)); do
    (while (($(date +%s) < end)); do
      a=$(post)
      if [ "$(tail -n1 <<<"$a")" != 200 ]; then echo error
      elif grep -q 'try again in a moment' <<<"$a"; then echo busy
      elif grep -q "would evict $n pods, more than" <<<"$a"; then echo denied
      else echo wrong; fi
    done >"$work/client-$client.out") &
    clients+=($!)
  done
  wait "${clients[@]}"
  kill -0 "$server" 2>/dev/null || { echo "N=$n: draguard died under the DeviceTaintRule load" >&2; failed=1; }
  local denied busy errors wrong rss_peak cg
  denied=$(cat "$work"/client-*.out | grep -c '^denied$' || true)
  busy=$(cat "$work"/client-*.out | grep -c '^busy$' || true)
  errors=$(cat "$work"/client-*.out | grep -c '^error$' || true)
  wrong=$(cat "$work"/client-*.out | grep -c '^wrong$' || true)
  rss_peak=$(cat "$work/peak" 2>/dev/null || echo 0)
  stop "$sampler" "$server" "$fake"
  sampler="" server="" fake=""
  cg=$("$memlimit" --report "$(cat "$work/cg")")
  echo "N=$n: $cg" >&2
  ((errors == 0 && wrong == 0)) || { echo "N=$n: $errors failed and $wrong wrong answers under load" >&2; failed=1; }
  rows+=("$n $ready $rss_ready $rss_peak $denied $busy $errors $(sed 's/.*peak \([0-9]*\) MiB.*OOM kills \([0-9]*\).*/\1 \2/' <<<"$cg")")
}

impact_run() { # draguard impact --snapshot on the same cluster
  local n=$1 wall kb
  "$fake_bin" --claims "$n" --devices "$n" --namespaces "$namespaces" --snapshot "$work/snapshot.json"
  /usr/bin/time -f '%e %M' -o "$work/time" "$draguard" impact --snapshot "$work/snapshot.json" "$work/rule.yaml" -o json \
    >"$work/impact.json" 2>"$work/impact.log" || die "N=$n: draguard impact failed"
  read -r wall kb < <(tail -n 1 "$work/time")
  grep -q "\"summary\": \"would evict $n pods in $namespaces namespaces" "$work/impact.json" ||
    die "N=$n: draguard impact should evict $n pods: $(head -c 600 "$work/impact.json")"
  impact_rows+=("$n $(($(stat -c %s "$work/snapshot.json") / 1048576)) $wall $((kb / 1024))")
  rm -f "$work/snapshot.json" "$work/impact.json"
}

rows=() impact_rows=() failed=0
for n in "${counts[@]}"; do
  run "$n"
  impact_run "$n"
done

echo
echo "draguard serve under ${memory_mb} MiB: N devices, N allocated claims, N pods; $connections clients x ${load_seconds}s of DeviceTaintRule reviews"
printf '%8s %8s %13s %12s %7s %6s %7s %12s %9s\n' n ready_s rss_ready_mb rss_peak_mb denied busy errors cgroup_peak oom_kills
for row in "${rows[@]}"; do
  # shellcheck disable=SC2086
  printf '%8s %8s %13s %12s %7s %6s %7s %12s %9s\n' $row
done
echo
echo "draguard impact --snapshot (one JSON List of N slices' devices, N claims, N pods)"
printf '%8s %9s %7s %12s\n' n input_mb wall_s peak_rss_mb
for row in "${impact_rows[@]}"; do
  # shellcheck disable=SC2086
  printf '%8s %9s %7s %12s\n' $row
done
exit "$failed"
