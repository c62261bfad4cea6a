#!/usr/bin/env bash
# What drivers' configs cost on `/validate`, in CPU instructions per
# request: the whole path the apiserver's call takes through `draguard
# serve` (TLS record, HTTP, the review cap and body intake, the
# AdmissionReview parse, the review, the answer's serialisation, metrics and
# the log line). Instructions, counted by valgrind's callgrind, do not
# depend on the machine's load, so figures from a shared machine compare.
#
#   scripts/validate-instructions.sh [N] [BINARY ...]   # default: 200 target/release/draguard
#
# For each binary: starts `serve --no-cluster` (no policies) under callgrind
# on loopback, then for each case posts WARM bodies (the first review
# compiles the schemas and fills the verdict memo), zeroes the counters
# (callgrind_control -z), posts one body, dumps the counters
# (callgrind_control -d), then does the same with N bodies over one
# keep-alive connection (one curl): the difference of the two dumps divided
# by N-1 is the case's cost per request, everything the server did for it
# (and nothing else: no cluster, no policy folder), without what each
# window has once (curl's TLS handshake, ~0.8M instructions).
#
# Cases, all built from the ResourceClaim CREATE review a real apiserver
# sent (tests/fixtures/apiserver/resourceclaim-create-4.json), its own
# config removed:
#   claim/0         no config
#   claim/1         one NVIDIA GpuConfig (MPS, the quickstart's), repeated
#   claim/3         three NVIDIA GpuConfigs (MPS, TimeSlicing, MPS per
#                   device), the same in every request: the memo's steady
#                   state, as every claim a template stamps is
#   claim/3-new     three NVIDIA MPS GpuConfigs never seen before: each
#                   request's limits come from a counter (memo misses)
#   class/0         a DeviceClass without config
#   class/1         the same DeviceClass with a TimeSlicing GpuConfig
# Each line prints the case, the body's size, instructions per request,
# and the ratio to the case without config of its kind.
#
# A measurement, not a test: exit 0 whatever the figures, non-zero when a
# request fails or is not allowed (the figures would be meaningless).
# Needs valgrind (apt-get install valgrind), curl and jq. Port:
# DRAGUARD_CG_PORT (18453). CG_KEEP=DIR keeps the dumps (callgrind_annotate
# DIR/BINARY_NAME.CASE reads one). CG_BODIES=DIR writes each case's body
# (DIR/claim-3.json, ...) and exits, for the wall clock under wrk:
#
#   CG_BODIES=/tmp/bodies scripts/validate-instructions.sh
#   scripts/load.sh --compare /tmp/bodies/claim-3.json
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}
shift || true
binaries=("${@:-target/release/draguard}")
warm=${CG_WARM:-5}
port=${DRAGUARD_CG_PORT:-18453}
for tool in valgrind callgrind_control curl jq; do
  command -v "$tool" >/dev/null || {
    echo "needs $tool" >&2
    exit 2
  }
done

work=$(mktemp -d /tmp/draguard-cg.XXXXXX)
server=
cleanup() {
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# --- bodies ------------------------------------------------------------------
base=tests/fixtures/apiserver/resourceclaim-create-4.json
gpu() { # PARAMETERS-JSON REQUESTS-JSON
  jq -nc --argjson p "$1" --argjson r "$2" \
    '{requests: $r, opaque: {driver: "gpu.nvidia.com", parameters: ({apiVersion: "resource.nvidia.com/v1beta1", kind: "GpuConfig"} + $p)}}'
}
mps() { gpu "{\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":50,\"defaultPinnedDeviceMemoryLimit\":\"$1Mi\"}}}" "$2"; }
mps_device() { gpu "{\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":$((1 + $1 % 100)),\"defaultPerDevicePinnedMemoryLimit\":{\"0\":\"$1Mi\"}}}}" "$2"; }
mps_threads() { gpu "{\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":$((1 + $1 % 100))}}}" "$2"; }
timeslicing='{"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Short"}}}'
claim() { # CONFIG-LIST-JSON > body
  jq -c --argjson c "$1" 'if $c == [] then del(.request.object.spec.devices.config) else .request.object.spec.devices.config = $c end' "$base"
}
class() { # CONFIG-LIST-JSON > body
  jq -nc --argjson c "$1" '{
    apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
    request: {
      uid: "5f1c2d3e-0000-4000-8000-00000000c1a5",
      kind: {group: "resource.k8s.io", version: "v1", kind: "DeviceClass"},
      resource: {group: "resource.k8s.io", version: "v1", resource: "deviceclasses"},
      name: "gpu.nvidia.com", operation: "CREATE",
      userInfo: {username: "system:serviceaccount:nvidia-dra-driver-gpu:installer", groups: ["system:serviceaccounts", "system:authenticated"]},
      object: ({apiVersion: "resource.k8s.io/v1", kind: "DeviceClass",
        metadata: {name: "gpu.nvidia.com", uid: "0d5a5a8e-7d7f-4f0b-9a55-3c1c0f6c2b11", creationTimestamp: "2026-11-21T10:00:00Z"},
        spec: ({selectors: [{cel: {expression: "device.driver == \"gpu.nvidia.com\" && device.attributes[\"gpu.nvidia.com\"].type == \"gpu\""}}]}
          + (if $c == [] then {} else {config: $c} end))}),
      oldObject: null, dryRun: false, options: {apiVersion: "meta.k8s.io/v1", kind: "CreateOptions"}
    }}'
}

# One folder of bodies per case: body-1 .. body-(WARM+1+N).
cases=(claim/0 claim/1 claim/3 claim/3-new class/0 class/1)
total=$((warm + 1 + n))
for case in "${cases[@]}"; do
  mkdir -p "$work/$case"
  for ((i = 1; i <= total; i++)); do
    f=$work/$case/body-$i
    if ((i > 1)) && [ "$case" != claim/3-new ]; then
      ln -s body-1 "$f"
      continue
    fi
    case $case in
      claim/0) claim '[]' ;;
      claim/1) claim "[$(mps 10240 '["gpu-exact"]')]" ;;
      claim/3) claim "[$(mps 10240 '["gpu-exact"]'),$(gpu "$timeslicing" '["gpu-fa/big"]'),$(mps_device 5120 '["gpu-fa/medium"]')]" ;;
      claim/3-new) claim "[$(mps "$((1000 + i))" '["gpu-exact"]'),$(mps_device "$((2000 + i))" '["gpu-fa/big"]'),$(mps_threads "$i" '["gpu-fa/medium"]')]" ;;
      class/0) class '[]' ;;
      class/1) class "[$(gpu "$timeslicing" '[]')]" ;;
    esac >"$f"
  done
done

if [ -n "${CG_BODIES:-}" ]; then
  mkdir -p "$CG_BODIES"
  for case in "${cases[@]}"; do
    cp "$work/$case/body-1" "$CG_BODIES/${case//\//-}.json"
  done
  echo "bodies written to $CG_BODIES" >&2
  exit 0
fi

# A curl config posting bodies FROM..TO of a case, each answer's status on
# its own line (`next` resets every option, so each request repeats them;
# curl keeps the connection).
curl_config() { # CASE FROM TO
  local i
  for ((i = $2; i <= $3; i++)); do
    printf 'url = "https://127.0.0.1:%s/validate?timeout=30s"\n' "$port"
    printf 'cacert = "%s"\n' "$work/certs/ca.crt"
    printf 'header = "Content-Type: application/json"\n'
    printf 'data-binary = "@%s"\n' "$work/$1/body-$i"
    printf 'output = "%s"\n' "$work/answer"
    printf 'write-out = "%%{http_code}\\n"\n'
    ((i == $3)) || printf 'next\n'
  done
}
post() { # CASE FROM TO
  local statuses
  curl_config "$@" >"$work/curl.cfg"
  statuses=$(curl -s -K "$work/curl.cfg") || {
    echo "curl failed for $1" >&2
    exit 1
  }
  if [ "$(sort -u <<<"$statuses")" != 200 ]; then
    echo "$1: answers other than HTTP 200: $(sort <<<"$statuses" | uniq -c | tr '\n' ' ')" >&2
    exit 1
  fi
  jq -e '.response.allowed == true' "$work/answer" >/dev/null || {
    echo "$1: not allowed: $(head -c 600 "$work/answer")" >&2
    exit 1
  }
}

# The total of a callgrind dump (its `summary:` or `totals:` line).
dump_total() { # FILE
  sed -n 's/^\(summary\|totals\): *\([0-9]*\).*/\2/p' "$1" | head -n 1
}

printf '%-28s %-12s %8s %14s %s\n' binary case bytes per_request vs_none
for binary in "${binaries[@]}"; do
  rm -rf "$work/certs" "$work"/cg.out*
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
    "$binary" serve --no-cluster --listen "127.0.0.1:$port" --certs-dir "$work/certs" \
    >"$work/server.log" 2>&1 &
  server=$!
  for _ in $(seq 600); do
    [ -f "$work/certs/ca.crt" ] &&
      curl -sf --cacert "$work/certs/ca.crt" "https://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || {
      cat "$work/server.log" >&2
      exit 1
    }
    sleep 0.2
  done
  declare -A none=()
  dumps=0
  # The instructions of the server while curl posts bodies FROM..TO of a
  # case (zeroed before, dumped after), into $counted (not a subshell:
  # the dumps are numbered).
  window() { # CASE FROM TO
    callgrind_control -z "$server" >/dev/null 2>&1
    post "$@"
    callgrind_control -d "$server" >/dev/null 2>&1
    dumps=$((dumps + 1))
    file=$work/cg.out.$dumps
    for _ in $(seq 100); do
      [ -s "$file" ] && [ -n "$(dump_total "$file")" ] && break
      sleep 0.1
    done
    counted=$(dump_total "$file")
  }
  for case in "${cases[@]}"; do
    post "$case" 1 "$warm"
    # One request, then N: the difference is N-1 requests, without what
    # every window has once (curl's TLS handshake, the dump itself).
    window "$case" $((warm + 1)) $((warm + 1))
    one=$counted
    window "$case" $((warm + 2)) "$total"
    many=$counted
    per=$(((many - one) / (n - 1)))
    kind=${case%%/*}
    [ "${case#*/}" != 0 ] || none[$kind]=$per
    ratio=$(awk -v a="$per" -v b="${none[$kind]}" 'BEGIN { printf "%+.1f%%", (a / b - 1) * 100 }')
    printf '%-28s %-12s %8s %14s %s\n' "$(basename "$binary")" "$case" "$(wc -c <"$(readlink -f "$work/$case/body-$((warm + 1))")")" "$per" "$ratio"
    if [ -n "${CG_KEEP:-}" ]; then
      mkdir -p "$CG_KEEP"
      cp "$file" "$CG_KEEP/$(basename "$binary").${case//\//-}"
    fi
  done
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=
done
