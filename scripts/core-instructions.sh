#!/usr/bin/env bash
# The judgement's cost per object in CPU instructions, which do not depend
# on the machine's load (valgrind's callgrind counts them): `draguard check`
# of N generated objects (Pods with tolerations and ResourceClaims with a
# CEL selector, one JSON object per line) minus the same run on one object,
# divided by N-1. Compares binaries, e.g. a release build from before a
# change with the current one:
#
#   scripts/core-instructions.sh [N] [BINARY ...]   # default: 2000 target/release/draguard
#
# A measurement: exit 0 whatever the figures (the objects are all allowed).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000}
shift || true
binaries=("${@:-target/release/draguard}")
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
objects() { # COUNT
  for ((i = 0; i < $1; i++)); do
    if ((i % 2 == 0)); then
      printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod-%d","namespace":"ns-%d"},"spec":{"containers":[{"image":"registry.example.com/web:1","name":"web"}],"tolerations":[{"effect":"NoSchedule","key":"example.com/dedicated","operator":"Equal","value":"web"}]}}\n' "$i" $((i % 50))
    else
      printf '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"claim-%d","namespace":"ns-%d"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com","count":1,"selectors":[{"cel":{"expression":"device.attributes[\\"gpu.example.com\\"].model == \\"a%d\\""}}],"tolerations":[{"key":"example.com/maintenance","operator":"Exists","effect":"NoSchedule"}]}}]}}}\n' "$i" $((i % 50)) $((i % 20))
    fi
  done
}
objects "$n" >"$work/many.jsonl"
objects 1 >"$work/one.jsonl"
instructions() { # BINARY FILE
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" check --no-config "$2" >/dev/null 2>"$work/log" || true
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/log" | tail -n 1
}
printf '%-40s %-14s %s\n' binary instructions per_object
for binary in "${binaries[@]}"; do
  many=$(instructions "$binary" "$work/many.jsonl")
  one=$(instructions "$binary" "$work/one.jsonl")
  printf '%-40s %-14s %s\n' "$binary" "$many" $(((many - one) / (n - 1)))
done
