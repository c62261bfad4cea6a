#!/usr/bin/env bash
# Issue 27, N3: a flood of idle connections to the plain metrics port must
# not take the descriptors the webhook, `/healthz` and policy reloads need.
#
#   scripts/metrics-flood.sh [CONNECTIONS]
#
# Starts `draguard serve --no-cluster` on loopback with `--metrics-listen`,
# one policy, and an open-file limit of FLOOD_NOFILE (default 8192, soft and
# hard: serve raises its soft limit to the hard one, so the hard one is what
# counts). Then opens CONNECTIONS (default 8192) TCP connections to the
# metrics port that never send a byte, and while holding them:
#   - asks HTTPS `/healthz` once a second for FLOOD_SECONDS (default 14,
#     longer than the 10 s first-request timeout) and prints each status;
#   - adds a second policy file, so that a reload must open files;
#   - counts the flood connections the server has closed (read gives EOF or
#     a reset): at once (beyond the cap) and after the first-request timeout.
# Prints a summary and exits non-zero when `/healthz` ever failed, the
# reload did not apply, or a flood connection was still open at the end.
# DRAGUARD_BIN names the binary (default: `cargo build --locked`, debug);
# run it with an older build to see the failure. Traffic stays on loopback;
# the server and the temporary folder are removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

connections=${1:-8192}
if [ -z "${DRAGUARD_BIN:-}" ]; then
  cargo build --locked --quiet
  DRAGUARD_BIN=target/debug/draguard
fi
export DRAGUARD_BIN FLOOD_CONNECTIONS=$connections

exec python3 - <<'PY'
import os, resource, select, shutil, socket, ssl, subprocess, sys, tempfile, time, urllib.request

binary = os.environ["DRAGUARD_BIN"]
count = int(os.environ["FLOOD_CONNECTIONS"])
nofile = int(os.environ.get("FLOOD_NOFILE", "8192"))
seconds = int(os.environ.get("FLOOD_SECONDS", "14"))

# This process holds the flood: it needs more descriptors than the server.
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
need = count + 256
if hard != resource.RLIM_INFINITY and hard < need:
    sys.exit(f"metrics-flood.sh: the hard open-file limit {hard} is below the {need} this client needs")
resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

POLICY = """apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: NAME}
spec:
  namespaces: {names: [NAME]}
  pods:
    allow: [{key: dedicated, operator: Equal, value: NAME, effect: NoSchedule}]
"""

work = tempfile.mkdtemp(prefix="draguard-flood-")
policies = os.path.join(work, "policies")
os.mkdir(policies)
with open(os.path.join(policies, "ml.yaml"), "w") as f:
    f.write(POLICY.replace("NAME", "ml"))
https_port, metrics_port = free_port(), free_port()
log = open(os.path.join(work, "serve.log"), "w+")
server = subprocess.Popen(
    [binary, "serve", "--no-cluster", "--listen", f"127.0.0.1:{https_port}",
     "--metrics-listen", f"127.0.0.1:{metrics_port}", "--certs-dir", os.path.join(work, "certs"),
     "--policies", policies],
    stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "RUST_LOG": "info"},
    preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile)))

tls = ssl.create_default_context()
tls.check_hostname = False
tls.verify_mode = ssl.CERT_NONE

def get(path, timeout=2.0):
    """HTTPS GET on the webhook port: (status or error text, body)."""
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{https_port}{path}", context=tls, timeout=timeout) as r:
            return r.status, r.read().decode()
    except Exception as e:  # a timeout, a refused or reset connection
        return type(e).__name__, ""

def metric(text, series):
    for line in text.splitlines():
        if line.startswith(series + " "):
            return line.split()[-1]
    return None

failed = []
flood = []
try:
    for _ in range(100):
        if get("/healthz", 0.5)[0] == 200:
            break
        time.sleep(0.1)
    else:
        sys.exit("metrics-flood.sh: the server did not start:\n" + open(log.name).read())
    print(f"server up: HTTPS 127.0.0.1:{https_port}, metrics 127.0.0.1:{metrics_port}, open-file limit {nofile}")

    started = time.monotonic()
    for i in range(count):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", metrics_port))
            flood.append(s)
        except OSError as e:
            s.close()
            print(f"connection {i}: {e}")
            break
    print(f"{len(flood)} idle connections opened to the metrics port in {time.monotonic() - started:.1f} s")
    started = time.monotonic()

    def closed_by_server():
        """Flood sockets the server has closed since the last look."""
        gone = []
        # poll, not select: descriptors here go far past select's 1024.
        poller = select.poll()
        by_fd = {s.fileno(): s for s in flood}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(0):
            s = by_fd[fd]
            try:
                data = s.recv(1)
            except OSError:
                data = b""
            if not data:
                gone.append(s)
        for s in gone:
            flood.remove(s)
            s.close()
        return len(gone)

    closed_at_once = closed_by_server()
    print(f"closed by the server at once (beyond the metrics cap): {closed_at_once}")
    with open(os.path.join(policies, "web.yaml"), "w") as f:
        f.write(POLICY.replace("NAME", "web"))
    statuses, closed_later = [], 0
    for second in range(1, seconds + 1):
        time.sleep(max(0.0, started + second - time.monotonic()))
        status, _ = get("/healthz")
        statuses.append(status)
        closed_later += closed_by_server()
        print(f"t={second:2d}s  /healthz: {status}  flood connections still open: {len(flood)}")
    closed_later += closed_by_server()

    _, text = get("/metrics", 5)
    loaded = metric(text, "draguard_policies_loaded")
    reload_failures = metric(text, 'draguard_policy_reloads_total{result="failure"}')
    refused = metric(text, 'draguard_metrics_connections_closed_total{reason="refused"}')
    timed_out = metric(text, 'draguard_metrics_connections_closed_total{reason="first_request"}')
    log.seek(0)
    emfile = sum("Too many open files" in line for line in log)
    ok = sum(s == 200 for s in statuses)
    print()
    print(f"/healthz 200: {ok} of {len(statuses)}")
    print(f"flood connections closed by the server: {closed_at_once} at once, {closed_later} later, {len(flood)} still open")
    print(f"policies loaded after adding one during the flood: {loaded} (reload failures: {reload_failures})")
    print(f"metrics port closes counted: refused={refused} first_request={timed_out}")
    print(f"'Too many open files' lines in the server log: {emfile}")
    if ok != len(statuses):
        failed.append("/healthz failed during the flood")
    if loaded != "2":
        failed.append("the policy added during the flood was not loaded")
    if flood:
        failed.append(f"{len(flood)} idle flood connections were never closed")
finally:
    for s in flood:
        s.close()
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    shutil.rmtree(work, ignore_errors=True)

if failed:
    print("FAILED: " + "; ".join(failed))
    sys.exit(1)
print("OK: /healthz stayed 200, the reload applied, every idle metrics connection was closed")
PY
