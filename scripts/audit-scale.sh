#!/usr/bin/env bash
# What `draguard audit` costs on a cluster snapshot, against `check` on the
# same file: wall time, CPU and peak memory (GNU time's maximum RSS). The
# snapshot is one `kubectl get -A -o json` List of N Deployments, each with
# its ReplicaSet and two Pods (owner references and uids as the apiserver
# writes them), every hundredth tolerating a taint the policy does not
# allow. `check` judges every object on its own; `audit` reads each
# object's uid and controller too, and judges the ReplicaSets and Pods
# through their Deployment.
#
#   scripts/audit-scale.sh [N ...]        # default: 10000 50000
#
# A measurement: exit 0 whatever the figures; draguard's exit code 1 (the
# violating Deployments are denied) is expected.
set -euo pipefail
cd "$(dirname "$0")/.."
counts=("${@:-10000 50000}")
read -r -a counts <<<"${counts[*]}"
cargo build --release --locked --quiet --bin draguard
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/policies"
cat >"$work/policies/dedicated.yaml" <<'EOF'
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: dedicated}
spec:
  pods:
    allow: [{key: example.com/dedicated, operator: Exists}]
EOF
printf '%-8s %-8s %-7s %-9s %-7s %-7s %-7s %s\n' deploys objects command input_mb wall_s user_s rss_mb denied
measure() { # N COMMAND FILE
  # `check` ends its text report with the summary, `audit` writes it to
  # standard error: the count is read from both.
  /usr/bin/time -f '%e %U %M' -o "$work/time" target/release/draguard "$2" --policies "$work/policies" \
    $([[ $2 == check ]] && echo --no-config) $([[ $2 == audit ]] && echo --snapshot) "$3" \
    >"$work/out" 2>"$work/err" || true
  read -r wall user rss < <(tail -n 1 "$work/time")
  denied=$(cat "$work/out" "$work/err" | grep -o '[0-9]* denied' | tail -n 1 || true)
  printf '%-8s %-8s %-7s %-9s %-7s %-7s %-7s %s\n' "$1" $(($1 * 4)) "$2" \
    "$(($(stat -c %s "$3") / 1048576))" "$wall" "$user" "$((rss / 1024))" "$denied"
}
for n in "${counts[@]}"; do
  file="$work/cluster-$n.json"
  python3 - "$n" >"$file" <<'PY'
import json, sys
n = int(sys.argv[1])
out = sys.stdout
out.write('{"apiVersion":"v1","kind":"List","items":[\n')
first = True
def emit(o):
    global first
    if not first:
        out.write(',\n')
    first = False
    out.write(json.dumps(o))
for i in range(n):
    ns, name = f"ns-{i % 100}", f"app-{i}"
    key = "example.com/spot" if i % 100 == 0 else "example.com/dedicated"
    template = {"metadata": {"labels": {"app": name}}, "spec": {
        "tolerations": [{"key": key, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "main", "image": "registry.example.com/app:1"}]}}
    def owner(kind, owner_name, uid):
        return [{"apiVersion": "apps/v1", "kind": kind, "name": owner_name, "uid": uid, "controller": True, "blockOwnerDeletion": True}]
    emit({"apiVersion": "apps/v1", "kind": "Deployment",
          "metadata": {"name": name, "namespace": ns, "uid": f"d-{i}", "resourceVersion": "1"},
          "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}}, "template": template},
          "status": {"replicas": 2, "readyReplicas": 2}})
    emit({"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": f"{name}-5d9", "namespace": ns, "uid": f"rs-{i}", "ownerReferences": owner("Deployment", name, f"d-{i}")},
          "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}}, "template": template}})
    for p in range(2):
        emit({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": f"{name}-5d9-{p}", "namespace": ns, "uid": f"p-{i}-{p}", "ownerReferences": owner("ReplicaSet", f"{name}-5d9", f"rs-{i}")},
              "spec": dict(template["spec"], nodeName=f"node-{i % 50}"), "status": {"phase": "Running"}})
out.write('\n]}\n')
PY
  measure "$n" check "$file"
  measure "$n" audit "$file"
done
