#!/usr/bin/env bash
# Failed calls across a rolling restart under load, with and without the
# shutdown delay.
#
#   scripts/rolling-restart.sh
#
# Runs tests/rolling_restart.rs with the release build (`cargo test
# --release --locked`): two `draguard serve` processes on 127.0.0.1 and
# 127.0.0.2 behind one name, a pooled HTTPS client whose resolver stands
# for the Service (new connections go to the endpoint in force, open ones
# stay on their pod, as with kube-proxy), the old pod deleted under load,
# its endpoint moved after a propagation lag, SIGTERM after the preStop
# sleep if any. No retries: every failed call counts. Scenarios:
#
#   default-delay  the new behaviour (--shutdown-delay 5 s), HTTP/1.1 and h2
#   no-delay       --shutdown-delay=0s: the listener closes at SIGTERM
#   old-manifest   the old deploy/: a 10 s preStop sleep, then no delay
#
# Prints one ROLLING-RESTART line per scenario (requests, failed, calls the
# old pod answered after SIGTERM, timings) and the first failures of each.
# Settings: ROLLING_RESTART_WORKERS (concurrent callers, default 32 here),
# ROLLING_RESTART_LOAD_SECONDS (load before the deletion, default 5 here),
# ROLLING_RESTART_PROPAGATION_MS (endpoint lag, default 1000),
# ROLLING_RESTART_PRESTOP_SECONDS (old manifest, default 10).
# The default-delay and no-delay scenarios are also tests in `cargo test`
# (debug build, 8 callers): 0 failed with the delay, some without.
set -euo pipefail
cd "$(dirname "$0")/.."

export ROLLING_RESTART_WORKERS=${ROLLING_RESTART_WORKERS:-32}
export ROLLING_RESTART_LOAD_SECONDS=${ROLLING_RESTART_LOAD_SECONDS:-5}
export ROLLING_RESTART_PROPAGATION_MS=${ROLLING_RESTART_PROPAGATION_MS:-1000}
export ROLLING_RESTART_PRESTOP_SECONDS=${ROLLING_RESTART_PRESTOP_SECONDS:-10}

echo "building (cargo test --release --locked --test rolling_restart)..." >&2
cargo test --release --locked --quiet --test rolling_restart --no-run
# One scenario at a time: they would share the CPUs otherwise.
# The harness's own progress shares the lines: keep what the scenarios print.
cargo test --release --locked --quiet --test rolling_restart -- \
  --include-ignored --test-threads=1 --nocapture 2>&1 |
  grep -oE '(ROLLING-RESTART.*|^  first failures.*|^    ".*|^test result.*|.*panicked.*)' || true
