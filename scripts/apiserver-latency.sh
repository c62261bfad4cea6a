#!/usr/bin/env bash
# What a write pays for admission on a real kube-apiserver v1.36.2, in one
# run: sequential server-side dry-run creates of a ResourceClaim, seven
# setups interleaved (no webhook; the no-op webhook of tools/noop-webhook,
# registered through a Service as draguard is; a hand-written
# ValidatingAdmissionPolicy of gpu-device-taints' rule; the same rule
# hand-written with the limit of 16 and messages naming what is refused,
# as the webhook and the compiled policy have them; draguard from
# deploy/base with a claim its routing sends nowhere; one with a driver
# config it judges; and one judged by what `serve
# --manage-admission-policies` compiled of gpu-device-taints), each
# setup's median and p99 and the median added over no webhook, RUNS
# times (tests/e2e_cluster/latency.rs says how).
# A measurement, not a test: it exits 0 whatever the figures, and fails
# only when a build, a process or a request fails.
#
#   K8S_BIN=target/k8s-bin scripts/apiserver-latency.sh [ROUNDS [RUNS]]
#
# K8S_BIN names the folder of kube-apiserver, kube-controller-manager,
# kubectl and etcd (docs/src/contributing.md). draguard and its test run in
# a release build (target/release), the no-op webhook in
# target/noop-webhook.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-200}
runs=${2:-3}
if [[ -z ${K8S_BIN:-} ]]; then
    echo "apiserver-latency.sh: K8S_BIN must name the kube-apiserver v1.36.2 binaries" >&2
    exit 2
fi
export K8S_BIN=$(cd "$K8S_BIN" && pwd)
echo "== building the no-op webhook (tools/noop-webhook)" >&2
cargo build --release --locked --quiet --manifest-path tools/noop-webhook/Cargo.toml \
    --target-dir target/noop-webhook
echo "== building draguard and the end-to-end suite (release)" >&2
cargo build --release --locked --quiet --test e2e_cluster --bin draguard
E2E_LATENCY=1 E2E_LATENCY_ROUNDS=$rounds E2E_LATENCY_RUNS=$runs \
    E2E_NOOP_WEBHOOK="$PWD/target/noop-webhook/release/noop-webhook" \
    cargo test --release --locked --quiet --test e2e_cluster -- --nocapture
