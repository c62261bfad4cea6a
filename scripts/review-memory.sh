#!/usr/bin/env bash
# Peak memory of `draguard serve` under concurrent large reviews, inside the
# Deployment's memory limit (issue 27, N1).
#
#   scripts/review-memory.sh [LIMIT_MIB]
#
# Builds the issue's two reproducers: a ResourceClaim CREATE with 10,000
# requests (1.44 MB) and a Pod CREATE with 10,000 tolerations (0.87 MB).
# Starts `draguard serve --no-cluster` (no policies, every other flag at its
# default) on loopback inside a fresh memory cgroup of LIMIT_MIB (default
# 256, deploy/base's limits.memory) through scripts/memlimit.sh
# (MEMLIMIT overrides its path), then for each body, endpoint (/mutate,
# /validate) and concurrency (8, then 24) fires that many reviews at once,
# ROUNDS times (default 5), one curl each. It prints how each round was
# answered (200 reviewed, 503 refused by the review memory budget with
# Retry-After, 000 no answer), the server's peak RSS (VmHWM) and whether it
# is still alive after each load, and at the end the cgroup's peak and OOM
# kills.
#
# BODIES picks the bodies (default "claim pod"), ENDPOINTS the endpoints
# (default "mutate validate"). DRAGUARD_BIN runs another build (e.g. an older one, to compare) instead of
# `cargo build --release --locked`. It is a measurement, not a test: it
# exits 0 when the server survived every load and 1 when it was killed.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=${1:-256}
rounds=${ROUNDS:-5}
port=${REVIEW_MEMORY_PORT:-18453}
memlimit=${MEMLIMIT:-scripts/memlimit.sh}
[ -x "$memlimit" ] || { echo "review-memory.sh: no memlimit tool at $memlimit (set MEMLIMIT)" >&2; exit 2; }

if [ -n "${DRAGUARD_BIN:-}" ]; then
  bin=$DRAGUARD_BIN
else
  cargo build --release --locked --quiet
  bin=${CARGO_TARGET_DIR:-target}/release/draguard
fi

work=$(mktemp -d /tmp/draguard-review-memory.XXXXXX)
server=
cleanup() {
  [ -z "$server" ] || kill "$server" 2>/dev/null || true
  [ -z "$server" ] || wait "$server" 2>/dev/null || true
  [ ! -f "$work/cg" ] || "$memlimit" --report "$(cat "$work/cg")" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def review(kind, resource, group, version, obj):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": group, "version": version, "kind": kind},
                        "resource": {"group": group, "version": version, "resource": resource},
                        "name": "big", "namespace": "ns", "operation": "CREATE",
                        "userInfo": {"username": "alice"}, "object": obj, "oldObject": None, "dryRun": False}}
requests = [{"name": f"gpu-{i:05}", "exactly": {"deviceClassName": "gpu.example.com",
             "allocationMode": "ExactCount", "count": 1, "tolerations": [{"operator": "Exists"}]}}
            for i in range(10_000)]
claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "big", "namespace": "ns"}, "spec": {"devices": {"requests": requests}}}
tolerations = [{"key": f"example.com/taint-{i:05}", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
               for i in range(10_000)]
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big", "namespace": "ns"},
       "spec": {"containers": [{"name": "c", "image": "busybox"}], "tolerations": tolerations}}
for name, body in [("claim", review("ResourceClaim", "resourceclaims", "resource.k8s.io", "v1", claim)),
                   ("pod", review("Pod", "pods", "", "v1", pod))]:
    with open(f"{work}/{name}.json", "w") as f:
        json.dump(body, f, separators=(",", ":"))
PY

MEMLIMIT_CG_FILE=$work/cg "$memlimit" "$limit" env RUST_LOG=warn "$bin" serve --no-cluster \
  --listen "127.0.0.1:$port" --certs-dir "$work/certs" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  curl -sf --cacert "$work/certs/ca.crt" "https://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; echo "review-memory.sh: the server did not start" >&2; exit 2; }

rss() { awk '/^VmRSS/{print int($2/1024)}' "/proc/$server/status" 2>/dev/null || echo -; }
hwm() { awk '/^VmHWM/{print int($2/1024)}' "/proc/$server/status" 2>/dev/null || echo -; }

echo "draguard: $bin"
echo "limit ${limit} MiB; claim $(wc -c <"$work/claim.json") B, pod $(wc -c <"$work/pod.json") B; $rounds rounds each; RSS at start $(rss) MiB"
survived=1
for body in ${BODIES:-claim pod}; do
  for endpoint in ${ENDPOINTS:-mutate validate}; do
    for n in 8 24; do
      codes=
      for _ in $(seq "$rounds"); do
        for i in $(seq "$n"); do
          curl -s -o /dev/null -w '%{http_code}\n' --max-time 30 --cacert "$work/certs/ca.crt" \
            -H 'Content-Type: application/json' --data-binary "@$work/$body.json" \
            "https://127.0.0.1:$port/$endpoint?timeout=10s" >"$work/code.$i" 2>/dev/null &
        done
        wait $(jobs -p | grep -v "^$server\$") 2>/dev/null || true
        codes+=$(cat "$work"/code.* | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}')"| "
        rm -f "$work"/code.*
      done
      if kill -0 "$server" 2>/dev/null; then alive=alive; else alive=KILLED; survived=0; fi
      printf '%-5s /%-8s %2d at once: peak RSS %4s MiB, RSS now %4s MiB, %s; answers per round: %s\n' \
        "$body" "$endpoint" "$n" "$(hwm)" "$(rss)" "$alive" "$codes"
      [ "$alive" = alive ] || break 3
    done
  done
done
kill "$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true
server=
"$memlimit" --report "$(cat "$work/cg")"
rm -f "$work/cg"
[ "$survived" = 1 ] && echo "survived every load" || { echo "the server was killed"; exit 1; }
