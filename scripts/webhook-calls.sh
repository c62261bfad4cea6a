#!/usr/bin/env bash
# Webhook calls per claim, template and Pod CREATE, before and after the
# condition `serve --manage-webhook-certs` keeps on mutate.draguard.dev and
# the selector entries it adds beside it (src/controllers/
# mutate_conditions.rs, mutate_selector_entries.rs): the manifests of
# deploy/base, with that plan applied, evaluated as the apiserver does
# (rules, namespaceSelector, matchConditions as CEL without
# namespaceObject) over the CREATEs a real kube-apiserver sent
# (tests/fixtures/apiserver), moved into each namespace (one labelled
# team=ml), for the shipped policies, for them without the policy that
# refuses the ML default outside ml-*, and selecting by names only.
# Needs kubectl (for `kubectl kustomize`).
#
#   scripts/webhook-calls.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
CI=1 cargo test --locked --test deploy_manifests webhook_calls_per_create -- --nocapture 2>&1 |
    grep -E '^ *[0-9]+ claim/template|^  [a-z]|^    [a-z]|test result|panicked'
