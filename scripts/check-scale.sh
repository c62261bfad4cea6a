#!/usr/bin/env bash
# How `draguard check` scales with its input: wall time, CPU and peak
# memory (GNU time's maximum RSS) for N generated Pods in one file, every
# thousandth with an invalid toleration effect.
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
printf '%-8s %-10s %-8s %-8s %-8s\n' pods input_mb wall_s user_s rss_mb
for n in "${counts[@]}"; do
  file="$work/pods-$n.yaml"
  for ((i = 0; i < n; i++)); do
    effect=NoSchedule
    ((i % 1000 == 0)) && effect=Bogus
    printf -- '---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-%d\n  namespace: ns-%d\nspec:\n  tolerations:\n  - {key: example.com/dedicated, operator: Equal, value: web, effect: %s}\n  containers:\n  - name: web\n    image: registry.example.com/web:1\n' "$i" $((i % 100)) "$effect"
  done >"$file"
  /usr/bin/time -f '%e %U %M' -o "$work/time" target/release/draguard check "$file" >/dev/null || true
  # GNU time writes "Command exited with non-zero status 1" first.
  read -r wall user rss < <(tail -n 1 "$work/time")
  printf '%-8s %-10s %-8s %-8s %-8s\n' "$n" "$(($(stat -c %s "$file") / 1048576))" "$wall" "$user" "$((rss / 1024))"
done
