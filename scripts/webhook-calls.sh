#!/usr/bin/env bash
# Webhook calls per write, before and after what `serve
# --manage-webhook-certs` keeps in draguard's webhook configurations:
# - the defaulting entry's condition and the selector entries beside it
#   (src/controllers/mutate_conditions.rs, mutate_selector_entries.rs): the
#   claim, template and Pod CREATEs a real kube-apiserver sent
#   (tests/fixtures/apiserver), moved into each namespace (one labelled
#   team=ml), for the shipped policies, for them without the policy that
#   refuses the ML default outside ml-*, and selecting by names only;
# - the validating entries' condition (src/controllers/validate_conditions.rs):
#   every recorded write of the kinds it judges, with added tolerations and
#   without any (the DefaultTolerationSeconds pair kept), across nine
#   namespaces, for the shipped policies and more; each write left unsent
#   is one draguard's own answer would admit unchanged.
# The manifests of deploy/base with those plans applied, evaluated as the
# apiserver does (rules, namespaceSelector, matchConditions as CEL without
# namespaceObject). Needs kubectl (for `kubectl kustomize`).
#
#   scripts/webhook-calls.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
CI=1 cargo test --locked --test deploy_manifests -- --nocapture \
    webhook_calls_per_create validate_is_called_only_when recorded_creates_cost_fewer_calls 2>&1 |
    grep -E '^ *[0-9]+ (recorded )?claim/template|^  [a-z]|^    [a-z]|test result|panicked'
