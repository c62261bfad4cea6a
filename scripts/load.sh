#!/usr/bin/env bash
# Requests per second of `draguard serve` on loopback under wrk (HTTP/1.1
# keep-alive over TLS, as the apiserver talks to a webhook behind a Service).
#
#   scripts/load.sh [SECONDS] [CONNECTIONS] [REVIEW_JSON]
#
# Starts a release server on 127.0.0.1 with a throwaway certificate, posts
# one AdmissionReview repeatedly to /validate for SECONDS (default 10), prints
# wrk's report, and stops the server. Traffic never leaves the machine.
#
#   scripts/load.sh --compare [REVIEW_JSON]
#
# Measures draguard against the performance floor, tools/noop-webhook (TLS,
# parse the AdmissionReview, echo the uid, allow), in one run. Builds draguard
# (`cargo build --release --locked`; skipped when DRAGUARD_BIN names a binary,
# e.g. an older build to compare) and the no-op (into $NOOP_TARGET, default
# /tmp/draguard-noop-target), starts both on loopback (draguard with
# `serve --no-cluster`, no policies, at the log level it ships with), checks
# with one curl that each answers 200 and `allowed: true` for the body, then
# runs wrk against them alternately, no-op first, with the same body and the
# same settings: `wrk -t1 -c8 -d5s --latency`, 3 rounds each. The body
# defaults to a ResourceClaim CREATE review a real kube-apiserver sent
# (tests/fixtures/apiserver/resourceclaim-create-4.json, 5.5 KB, allowed).
# Settings: LOAD_THREADS, LOAD_CONNECTIONS, LOAD_SECONDS, LOAD_ROUNDS; ports
# DRAGUARD_LOAD_PORT (18443) and NOOP_LOAD_PORT (18444). LOAD_PIN=1 runs
# wrk on CPU 0 and both servers on the other CPUs (taskset), so that on a
# small machine the tail latency measured is the server's and not the
# load generator fighting it for a core (the default shares all CPUs).
#
# Prints one line per round (requests per second, p50 and p99 latency, CPU
# time the server spent per request, read from /proc/PID/stat), then a table:
# the median requests per second of each and their ratio draguard/no-op, the
# median and worst p99 of each, CPU per request over all rounds, and whether
# the targets are met: ratio of the medians >= 0.8 and draguard's median p99
# < 2 ms (the worst round is printed beside it).
# It is a measurement, not a test: it exits 0 whether or not the targets are
# met, and non-zero only when something failed (a build, a server, a request
# answered with an error, which would make the figures meaningless).
#
# Both modes install wrk from Debian (apt-get) when it is missing. The servers
# and the temporary folder are removed on exit, Ctrl-C included.
set -euo pipefail
caller_dir=$PWD
cd "$(dirname "$0")/.."

die() {
  echo "load.sh: $*" >&2
  exit 1
}

ensure_wrk() {
  if ! command -v wrk >/dev/null; then
    echo "installing wrk (Debian package)..." >&2
    apt-get update -qq >/dev/null && apt-get install -y -qq wrk >/dev/null
  fi
}

# A path given on the command line: as the caller meant it (relative to the
# folder they ran the script from), else relative to the project.
resolve() {
  case $1 in
    /*) printf '%s\n' "$1" ;;
    *) if [ -e "$caller_dir/$1" ]; then printf '%s\n' "$caller_dir/$1"; else printf '%s\n' "$PWD/$1"; fi ;;
  esac
}

work=$(mktemp -d /tmp/draguard-load.XXXXXX)
servers=()
cleanup() {
  local pid
  for pid in "${servers[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "${1:-}" != --compare ]; then
  seconds=${1:-10}
  connections=${2:-16}
  review=${3:-examples/review-claim-allowed.json}
  port=${DRAGUARD_LOAD_PORT:-18443}

  ensure_wrk
  cargo build --release --locked --quiet

  RUST_LOG=warn target/release/draguard serve --no-cluster --listen "127.0.0.1:$port" \
    --certs-dir "$work/certs" >"$work/server.log" 2>&1 &
  servers+=("$!")
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
  exit 0
fi

# --compare ------------------------------------------------------------------
shift
[ $# -le 1 ] || die "usage: scripts/load.sh --compare [REVIEW_JSON]"
body=$(resolve "${1:-tests/fixtures/apiserver/resourceclaim-create-4.json}")
[ -f "$body" ] || die "no such review: $body"
threads=${LOAD_THREADS:-1}
connections=${LOAD_CONNECTIONS:-8}
seconds=${LOAD_SECONDS:-5}
rounds=${LOAD_ROUNDS:-3}
draguard_port=${DRAGUARD_LOAD_PORT:-18443}
noop_port=${NOOP_LOAD_PORT:-18444}
noop_target=${NOOP_TARGET:-/tmp/draguard-noop-target}
path='/validate?timeout=10s'

ensure_wrk
if [ -n "${DRAGUARD_BIN:-}" ]; then
  draguard_bin=$(resolve "$DRAGUARD_BIN")
  [ -x "$draguard_bin" ] || die "DRAGUARD_BIN is not an executable: $draguard_bin"
else
  echo "building draguard (cargo build --release --locked)..." >&2
  cargo build --release --locked --quiet
  draguard_bin=$PWD/${CARGO_TARGET_DIR:-target}/release/draguard
fi
echo "building the no-op webhook (tools/noop-webhook, into $noop_target)..." >&2
cargo build --release --locked --quiet --manifest-path tools/noop-webhook/Cargo.toml \
  --target-dir "$noop_target"
noop_bin=$noop_target/release/noop-webhook

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
port_free "$draguard_port" || die "port $draguard_port is taken (set DRAGUARD_LOAD_PORT)"
port_free "$noop_port" || die "port $noop_port is taken (set NOOP_LOAD_PORT)"

server_cpus=() client_cpus=()
if [[ ${LOAD_PIN:-} == 1 ]]; then
  cpus=$(nproc)
  ((cpus >= 2)) || die "LOAD_PIN=1 needs 2 CPUs or more"
  server_cpus=(taskset -c "1-$((cpus - 1))") client_cpus=(taskset -c 0)
fi
# draguard at the level it ships with (info), as production runs it: no RUST_LOG.
"${server_cpus[@]}" env -u RUST_LOG "$draguard_bin" serve --no-cluster --listen "127.0.0.1:$draguard_port" \
  --certs-dir "$work/certs" >"$work/draguard.log" 2>&1 &
draguard_pid=$!
servers+=("$draguard_pid")
"${server_cpus[@]}" "$noop_bin" "127.0.0.1:$noop_port" >"$work/noop.log" 2>&1 &
noop_pid=$!
servers+=("$noop_pid")

# POST the body once; prints the HTTP status, the answer goes to $work/$1.answer.
post_once() { # NAME PORT [curl TLS option...]
  local name=$1 port=$2
  shift 2
  curl -s -o "$work/$name.answer" -w '%{http_code}' "$@" -H 'Content-Type: application/json' \
    --data-binary "@$body" "https://127.0.0.1:$port$path" 2>/dev/null || true
}

# Ready when it answers the body: 200 with allowed true, or the figures
# would measure an error path.
wait_ready() { # NAME PID PORT [curl TLS option...]
  local name=$1 pid=$2 port=$3 status=
  shift 3
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || { cat "$work/$name.log" >&2; die "$name exited at start"; }
    [ "$name" != draguard ] || [ -f "$work/certs/ca.crt" ] || { sleep 0.1; continue; }
    status=$(post_once "$name" "$port" "$@")
    [ "$status" = 000 ] || break
    sleep 0.1
  done
  [ "$status" = 200 ] || { cat "$work/$name.log" >&2; die "$name answered the body with HTTP ${status:-nothing}, not 200"; }
  grep -Eq '"allowed"[[:space:]]*:[[:space:]]*true' "$work/$name.answer" ||
    die "$name did not allow the body: $(head -c 600 "$work/$name.answer")"
}
wait_ready noop "$noop_pid" "$noop_port" -k
wait_ready draguard "$draguard_pid" "$draguard_port" --cacert "$work/certs/ca.crt"

# The figures come from wrk's done() hook, one machine-readable line, not
# from its report for people. Latencies are in microseconds. No response()
# hook: with one, wrk would parse every answer and slow the client down.
cat >"$work/compare.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

function init(args)
  local f = assert(io.open(args[1], "rb"))
  wrk.body = f:read("*a")
  f:close()
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "LOADRESULT requests=%d rps=%.1f p50_us=%d p99_us=%d connect=%d read=%d write=%d status=%d timeout=%d\n",
    summary.requests, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99),
    e.connect, e.read, e.write, e.status, e.timeout))
end
LUA

tck=$(getconf CLK_TCK)
# CPU time of a process and all its threads so far, in clock ticks.
cpu_ticks() {
  local stat fields
  stat=$(<"/proc/$1/stat")
  read -ra fields <<<"${stat##*) }" # fields[0] is field 3 (state)
  echo $((fields[11] + fields[12])) # utime + stime
}

field() { # LINE KEY
  sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"
}

declare -A rps p50 p99 cpu reqs
run_round() { # NAME PID PORT ROUND
  local name=$1 pid=$2 port=$3 round=$4 out before after line n errors
  out=$work/wrk-$name-$round.txt
  before=$(cpu_ticks "$pid")
  "${client_cpus[@]}" wrk -t"$threads" -c"$connections" -d"${seconds}s" --latency -s "$work/compare.lua" \
    "https://127.0.0.1:$port$path" -- "$body" >"$out" 2>&1 ||
    { cat "$out" >&2; die "wrk failed against $name"; }
  kill -0 "$pid" 2>/dev/null || { cat "$work/$name.log" >&2; die "$name died during round $round"; }
  after=$(cpu_ticks "$pid")
  line=$(grep '^LOADRESULT ' "$out") || { cat "$out" >&2; die "no result from wrk against $name"; }
  n=$(field "$line" requests)
  errors=$(($(field "$line" connect) + $(field "$line" read) + $(field "$line" write) + $(field "$line" status) + $(field "$line" timeout)))
  if [ "$n" -eq 0 ] || [ "$errors" -ne 0 ]; then
    cat "$out" >&2
    die "$name, round $round: $errors of $n requests failed ($line); the figures would be meaningless"
  fi
  rps[$name]+=" $(field "$line" rps)"
  p50[$name]+=" $(field "$line" p50_us)"
  p99[$name]+=" $(field "$line" p99_us)"
  cpu[$name]=$((${cpu[$name]:-0} + after - before))
  reqs[$name]=$((${reqs[$name]:-0} + n))
  awk -v name="$name" -v r="$round" -v rounds="$rounds" -v n="$n" -v rps="$(field "$line" rps)" \
    -v p50="$(field "$line" p50_us)" -v p99="$(field "$line" p99_us)" \
    -v ticks=$((after - before)) -v tck="$tck" 'BEGIN {
      printf "round %d/%d  %-8s  %9.0f req/s  p50 %6d µs  p99 %6d µs  cpu %6.1f µs/req  (%d requests)\n",
        r, rounds, name, rps, p50, p99, ticks * 1e6 / tck / n, n }'
}

echo "body: ${body#"$PWD"/} ($(wc -c <"$body") bytes), POST $path"
echo "wrk -t$threads -c$connections -d${seconds}s --latency, $rounds rounds, no-op and draguard alternately"
echo "draguard: $draguard_bin (serve --no-cluster, no policies, default log level)"
echo "no-op:    $noop_bin"
echo
for round in $(seq "$rounds"); do
  run_round noop "$noop_pid" "$noop_port" "$round"
  run_round draguard "$draguard_pid" "$draguard_port" "$round"
done

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
worst() { tr ' ' '\n' | sed '/^$/d' | sort -g | tail -n 1; }
echo
awk -v nr="$(median <<<"${rps[noop]}")" -v dr="$(median <<<"${rps[draguard]}")" \
  -v n50="$(median <<<"${p50[noop]}")" -v d50="$(median <<<"${p50[draguard]}")" \
  -v n99="$(median <<<"${p99[noop]}")" -v d99="$(median <<<"${p99[draguard]}")" \
  -v n99w="$(worst <<<"${p99[noop]}")" -v d99w="$(worst <<<"${p99[draguard]}")" \
  -v ncpu="${cpu[noop]}" -v dcpu="${cpu[draguard]}" -v nreq="${reqs[noop]}" -v dreq="${reqs[draguard]}" \
  -v tck="$tck" 'BEGIN {
    ratio = dr / nr
    printf "                         no-op   draguard\n"
    printf "req/s (median)      %10.0f %10.0f   ratio draguard/no-op %.2f\n", nr, dr, ratio
    printf "p50 µs (median)     %10d %10d\n", n50, d50
    printf "p99 µs (median)     %10d %10d\n", n99, d99
    printf "p99 µs (worst)      %10d %10d\n", n99w, d99w
    printf "cpu µs/req (all)    %10.1f %10.1f\n", ncpu * 1e6 / tck / nreq, dcpu * 1e6 / tck / dreq
    ok_ratio = ratio >= 0.8; ok_p99 = d99 < 2000
    printf "targets (ratio >= 0.80, draguard p99 < 2000 µs, medians of the rounds): %s\n",
      (ok_ratio && ok_p99) ? "met" : "NOT met"
    printf "  ratio %.2f: %s; p99 %d µs: %s (worst round %d µs)\n",
      ratio, ok_ratio ? "met" : "not met", d99, ok_p99 ? "met" : "not met", d99w
  }'
