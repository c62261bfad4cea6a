#!/usr/bin/env bash
# What one round of serve's background audit (--audit-interval) costs: the
# peak memory it adds to the process, and its time, over N Pods of ~3 KiB
# (as a LIST returns them: managedFields, a last-applied annotation,
# status) in one namespace, read from the fake apiserver of the tests,
# which runs in a child process so that the measured one holds the round
# alone. The part budget (--audit-part-size, 16Mi) bounds N: about 10,000
# such Pods once slimmed.
#
#   scripts/audit-round-memory.sh [N ...]        # default: 500 2000 8000
#   PROFILE=dev scripts/audit-round-memory.sh    # the debug build (quicker to build)
#
# A measurement: exit 0 whatever the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
counts=("${@:-500 2000 8000}")
read -r -a counts <<<"${counts[*]}"
profile=${PROFILE:-release}
export CARGO_INCREMENTAL=0
for n in "${counts[@]}"; do
  AUDIT_PODS=$n cargo test --profile "$profile" --locked --quiet --test audit_background round_memory \
    -- --ignored --exact --nocapture 2>&1 | grep -E '^(fake apiserver|pods) ' || true
done
