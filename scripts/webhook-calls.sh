#!/usr/bin/env bash
# Webhook calls per claim, template and Pod CREATE, before and after the
# condition `serve --manage-webhook-certs` keeps on mutate.draguard.dev
# (src/controllers/mutate_conditions.rs): the manifests of deploy/base
# evaluated as the apiserver does (rules, namespaceSelector, matchConditions
# as CEL without namespaceObject) over the CREATEs a real kube-apiserver
# sent (tests/fixtures/apiserver), moved into each namespace, for the
# shipped policies and for the same policies selecting by names only.
# Needs kubectl (for `kubectl kustomize`).
#
#   scripts/webhook-calls.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
CI=1 cargo test --locked --test deploy_manifests webhook_calls_per_create -- --nocapture 2>&1 |
    grep -E '^ *[0-9]+ claim/template|^  [a-z]|^    [a-z]|test result|panicked'
