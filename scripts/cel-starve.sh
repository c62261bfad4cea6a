#!/usr/bin/env bash
# Can invalid CEL starve the compile pool? (issue 27, N5)
#
#   scripts/cel-starve.sh [ATTACK]
#
# Starts `draguard serve --no-cluster` on loopback with its embedded
# defaults and a throwaway certificate (as scripts/load.sh does), then,
# for the whole run, ATTACKERS connections (default 6) post ResourceClaim
# reviews to /validate that each carry four slow, invalid 10 KiB CEL
# selectors, one review after another. Meanwhile LEGIT legitimate claims
# (default 26), one at a time, each with a selector never seen before (so
# the verdict memo cannot help), are posted to /validate, and every answer
# is counted: allowed, "try again" (the compiler could not take the
# selector), or anything else.
#
# ATTACK:
#   issue  the issue's reproducer: the same four selectors of 10 KiB of
#          unclosed `[` in every review (0.4-0.9 s each to parse, before
#          the fix; and never remembered).
#   slow   (default) worse: every review carries four selectors never seen
#          before, each 249 unclosed `[` and padding to 10 KiB, within
#          cel-go's nesting limit of 250 and so parsed, about half a second
#          each: the memo cannot help and the nesting scan lets them by.
#
# Settings: DRAGUARD_BIN (a binary to measure, e.g. an older build; default
# `cargo build --release --locked` and target/release/draguard),
# ATTACKERS, LEGIT, CEL_STARVE_PORT (18453), REVIEW_TIMEOUT (the
# `?timeout=` of each review, default 3s: the shipped webhooks' timeout).
#
# Prints one line per legitimate claim, a summary and the server's peak
# RSS (VmHWM); exits 0 when every
# legitimate claim was allowed, 1 when any was not, 2 when something else
# failed. Traffic never leaves the machine; the server and the temporary
# folder are removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

attack=${1:-slow}
case $attack in issue | slow) ;; *)
  echo "usage: scripts/cel-starve.sh [issue|slow]" >&2
  exit 2
  ;;
esac
attackers=${ATTACKERS:-6}
legit=${LEGIT:-26}
port=${CEL_STARVE_PORT:-18453}
timeout=${REVIEW_TIMEOUT:-3s}

work=$(mktemp -d /tmp/draguard-cel-starve.XXXXXX)
server=
cleanup() {
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -n "${DRAGUARD_BIN:-}" ]; then
  bin=$DRAGUARD_BIN
else
  echo "building draguard (cargo build --release --locked)..." >&2
  cargo build --release --locked --quiet
  bin=${CARGO_TARGET_DIR:-target}/release/draguard
fi
[ -x "$bin" ] || {
  echo "cel-starve.sh: not an executable: $bin" >&2
  exit 2
}

RUST_LOG=warn "$bin" serve --no-cluster --listen "127.0.0.1:$port" --certs-dir "$work/certs" \
  >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  curl -sf --cacert "$work/certs/ca.crt" "https://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || {
    cat "$work/server.log" >&2
    exit 2
  }
  sleep 0.1
done

echo "draguard: $bin"
echo "attack: $attack, $attackers connections; $legit legitimate claims, one at a time; ?timeout=$timeout"
status=0
python3 - "$port" "$work/certs/ca.crt" "$attack" "$attackers" "$legit" "$timeout" <<'PY' || status=$?
import http.client, json, ssl, sys, threading, time

port, ca, attack, attackers, legit, timeout = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
context = ssl.create_default_context(cafile=ca)
path = f"/validate?timeout={timeout}"

def review(uid, expressions):
    claim = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": uid, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.example.com",
            "selectors": [{"cel": {"expression": e}} for e in expressions]}}]}},
    }
    kind = {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"}
    resource = {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": kind, "resource": resource, "requestKind": kind, "requestResource": resource,
        "name": uid, "namespace": "ml", "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": claim, "dryRun": False}}).encode()

def connect():
    return http.client.HTTPSConnection("127.0.0.1", int(port), context=context, timeout=60)

def post(conn, body):
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read()

def slow_selector(tag):
    head = "[" * 249 + f'"{tag}",'
    return head + "1," * ((10 * 1024 - len(head)) // 2)

stop = threading.Event()
sent = [0] * attackers

def attacker(n):
    conn = connect()
    i = 0
    while not stop.is_set():
        if attack == "issue":
            expressions = ["[" * (10 * 1024 - 1) + str(k) for k in range(4)]
        else:
            expressions = [slow_selector(f"a{n}-{i}-{k}") for k in range(4)]
        try:
            post(conn, review(f"attack-{n}-{i}", expressions))
        except Exception:
            conn.close()
            conn = connect()
        sent[n] += 1
        i += 1

threads = [threading.Thread(target=attacker, args=(n,), daemon=True) for n in range(attackers)]
for t in threads:
    t.start()
time.sleep(2)  # let the attack fill the compiler first

allowed = try_again = other = 0
latencies = []
conn = connect()
run = int(time.time())
for i in range(legit):
    expression = f'device.driver == "gpu-{run}-{i}.example.com"'
    began = time.monotonic()
    status, body = post(conn, review(f"legit-{i}", [expression]))
    took = time.monotonic() - began
    latencies.append(took)
    try:
        response = json.loads(body)["response"]
        verdict = "allowed" if response.get("allowed") else response.get("status", {}).get("message", "")
    except Exception:
        verdict = f"HTTP {status}: {body[:200]!r}"
    if verdict == "allowed":
        allowed += 1
    elif "try again" in verdict:
        try_again += 1
    else:
        other += 1
    print(f"claim {i:2}: {took * 1000:7.1f} ms  {verdict[:160]}", flush=True)
    time.sleep(0.2)
stop.set()
latencies.sort()
print(f"attack reviews sent: {sum(sent)}")
print(f"legitimate claims: {legit}: allowed {allowed}, 'try again' {try_again}, other {other}; "
      f"latency median {latencies[len(latencies) // 2] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms")
sys.exit(0 if allowed == legit else 1)
PY
echo "server peak RSS: $(awk '/VmHWM/ {print $2, $3}' "/proc/$server/status")"
exit "$status"
