#!/usr/bin/env bash
# How `draguard check` scales with its input: wall time, CPU and peak
# memory (GNU time's maximum RSS) for N generated Pods in one file, every
# thousandth with an invalid toleration effect, in each shape kubectl
# reads: YAML documents (yaml); the one JSON List `kubectl get pods -A -o
# json` writes (json); that List on one line (json1: `jq -c .`); a
# top-level array on one line (array); one object per line (jsonl: `jq -c
# '.items[]'`). Every shape should take about the time of the YAML. Then the
# 100,000 objects of `cargo bench --bench check` (claims, claim templates,
# Deployments, DeviceTaintRules), whose time the bench measures: here, the
# command's peak memory on them.
#
#   scripts/check-scale.sh [N ...]        # default: 10000 100000
#
# A measurement: exit 0 whatever the figures; the draguard exit code 1 (the
# invalid Pods are denied) is expected.
set -euo pipefail
cd "$(dirname "$0")/.."
counts=("${@:-10000 100000}")
read -r -a counts <<<"${counts[*]}"
cargo build --release --locked --quiet --bin draguard
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-8s %-6s %-10s %-8s %-8s %-8s\n' pods format input_mb wall_s user_s rss_mb
measure() { # N FORMAT FILE
  /usr/bin/time -f '%e %U %M' -o "$work/time" target/release/draguard check --no-config "$3" >/dev/null || true
  # GNU time writes "Command exited with non-zero status 1" first.
  read -r wall user rss < <(tail -n 1 "$work/time")
  printf '%-8s %-6s %-10s %-8s %-8s %-8s\n' "$1" "$2" "$(($(stat -c %s "$3") / 1048576))" "$wall" "$user" "$((rss / 1024))"
}
for n in "${counts[@]}"; do
  yaml="$work/pods-$n.yaml"
  json="$work/pods-$n.json"
  for ((i = 0; i < n; i++)); do
    effect=NoSchedule
    ((i % 1000 == 0)) && effect=Bogus
    printf -- '---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-%d\n  namespace: ns-%d\nspec:\n  tolerations:\n  - {key: example.com/dedicated, operator: Equal, value: web, effect: %s}\n  containers:\n  - name: web\n    image: registry.example.com/web:1\n' "$i" $((i % 100)) "$effect" >&3
    ((i > 0)) && printf ',\n' >&4
    printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod-%d","namespace":"ns-%d"},"spec":{"containers":[{"image":"registry.example.com/web:1","name":"web"}],"tolerations":[{"effect":"%s","key":"example.com/dedicated","operator":"Equal","value":"web"}]}}\n' "$i" $((i % 100)) "$effect" >&5
    printf '        {\n            "apiVersion": "v1",\n            "kind": "Pod",\n            "metadata": {\n                "name": "pod-%d",\n                "namespace": "ns-%d"\n            },\n            "spec": {\n                "containers": [\n                    {\n                        "image": "registry.example.com/web:1",\n                        "name": "web"\n                    }\n                ],\n                "tolerations": [\n                    {\n                        "effect": "%s",\n                        "key": "example.com/dedicated",\n                        "operator": "Equal",\n                        "value": "web"\n                    }\n                ]\n            }\n        }' "$i" $((i % 100)) "$effect" >&4
  done 3>"$yaml" 4>"$work/items" 5>"$work/pods-$n-lines.json"
  {
    printf '{\n    "apiVersion": "v1",\n    "items": [\n'
    cat "$work/items"
    printf '\n    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n'
  } >"$json"
  { printf '{"apiVersion":"v1","kind":"List","items":['; paste -sd, "$work/pods-$n-lines.json" | tr -d '\n'; printf ']}\n'; } >"$work/pods-$n-list1.json"
  { printf '['; paste -sd, "$work/pods-$n-lines.json" | tr -d '\n'; printf ']\n'; } >"$work/pods-$n-array.json"
  measure "$n" yaml "$yaml"
  measure "$n" json "$json"
  measure "$n" json1 "$work/pods-$n-list1.json"
  measure "$n" array "$work/pods-$n-array.json"
  measure "$n" jsonl "$work/pods-$n-lines.json"
done
DRAGUARD_CHECK_MIX="$work/mix.yaml" cargo bench --locked --quiet --bench check >/dev/null
measure 100000 mix "$work/mix.yaml"
