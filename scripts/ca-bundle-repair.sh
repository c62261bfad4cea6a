#!/usr/bin/env bash
# Time for `serve --manage-webhook-certs` to put a removed or wrong caBundle
# back, against the fake apiserver of the tests: the watch of the webhook
# configurations sees the change, and one JSON patch restores the CA.
# Before the watch (a check every 60 s) this took 50-60 s on a real cluster.
#
#   scripts/ca-bundle-repair.sh            # 20 rounds
#   DRAGUARD_REPAIR_ROUNDS=50 scripts/ca-bundle-repair.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked --test webhook_certs measure_ca_bundle_repair_time -- --ignored --nocapture 2>&1 |
    grep -E '^caBundle repair|test result|panicked'
