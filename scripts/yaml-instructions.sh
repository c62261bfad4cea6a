#!/usr/bin/env bash
# `draguard check` of plain multi-document YAML against libyaml's parse
# alone, in CPU instructions, which do not depend on the machine's load
# (valgrind's callgrind counts them): N generated Pods (one in a thousand
# with an unsupported toleration effect), each run minus the same on an
# empty file. The target (issue 41): check at most 0.2x of what Python's
# yaml.CSafeLoader takes merely to parse the file.
#
#   scripts/yaml-instructions.sh [N] [BINARY ...]   # default: 10000 target/release/draguard
#
# A measurement: exit 0 whatever the figures. Needs valgrind, and python3
# with PyYAML built on libyaml for the baseline (skipped without).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
shift || true
binaries=("${@:-target/release/draguard}")
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for ((i = 0; i < n; i++)); do
  effect=NoSchedule
  ((i % 1000 == 0)) && effect=Bogus
  printf -- '---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-%d\n  namespace: ns-%d\nspec:\n  tolerations:\n  - {key: example.com/dedicated, operator: Equal, value: web, effect: %s}\n  containers:\n  - name: web\n    image: registry.example.com/web:1\n' "$i" $((i % 100)) "$effect"
done >"$work/pods.yaml"
: >"$work/empty.yaml"
instructions() { # COMMAND... (the file last)
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" >/dev/null 2>"$work/log" || true
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/log" | tail -n 1
}
net() { # COMMAND... (without the file)
  echo $(($(instructions "$@" "$work/pods.yaml") - $(instructions "$@" "$work/empty.yaml")))
}
libyaml=
if python3 -c 'import yaml; yaml.CSafeLoader' 2>/dev/null; then
  cat >"$work/load.py" <<'PY'
import sys, yaml
with open(sys.argv[1], 'rb') as f:
    print(len(list(yaml.load_all(f, Loader=yaml.CSafeLoader))))
PY
  # The interpreter itself, not a wrapper (pyenv's shim is a script).
  python=$(python3 -c 'import sys; print(sys.executable)')
  libyaml=$(net "$python" "$work/load.py")
  printf '%-40s %14s\n' "python3 yaml.CSafeLoader" "$libyaml"
fi
for binary in "${binaries[@]}"; do
  own=$(net "$binary" check --no-config)
  if [[ -n $libyaml ]]; then
    printf '%-40s %14s  %s of libyaml\n' "$binary" "$own" "$(awk -v a="$own" -v b="$libyaml" 'BEGIN { printf "%.3fx", a / b }')"
  else
    printf '%-40s %14s\n' "$binary" "$own"
  fi
done
