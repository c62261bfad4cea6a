#!/usr/bin/env bash
# draguard's YAML reading against kubectl's, on the YAML test suite: every
# case's in.yaml is read by draguard (`cargo run --example yaml_read`,
# the path `check` takes) and by go-yaml v2 as sigs.k8s.io/yaml uses it
# (scripts/yaml-suite/goyaml.go). Prints a Markdown table of the cases
# where they differ (accept/reject, or the JSON values), then the counts.
#
#   scripts/yaml-suite.sh SUITE_DATA_DIR > table.md
#
# SUITE_DATA_DIR is a checkout of the `data` branch of
# github.com/yaml/yaml-test-suite (one folder per case, some with
# numbered sub-cases); this script fetches nothing. Needs Go and Debian's
# golang-gopkg-yaml.v2-dev (built offline against /usr/share/gocode), jq.
set -euo pipefail
suite=$(realpath "${1:?usage: scripts/yaml-suite.sh SUITE_DATA_DIR}")
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
GOPATH=/usr/share/gocode GO111MODULE=off GOCACHE="$work/gocache" \
  go build -o "$work/goyaml" scripts/yaml-suite/goyaml.go
cargo build --locked --quiet --example yaml_read
mapfile -t cases < <(cd "$suite" && find . -name in.yaml -printf '%h\n' | sed 's|^\./||' | sort)
(cd "$suite" && "$OLDPWD/target/debug/examples/yaml_read" "${cases[@]/%//in.yaml}") >"$work/draguard"
agree=0 both_reject=0 differ=0
rows=()
for i in "${!cases[@]}"; do
  case=${cases[$i]}
  d=$(sed -n "$((i + 1))p" "$work/draguard")
  g=$("$work/goyaml" "$suite/$case/in.yaml")
  expected=accept
  [[ -e "$suite/$case/error" ]] && expected=reject
  title=$(head -n 1 "$suite/$case/===" 2>/dev/null || true)
  d_ok=$(jq -r 'has("ok")' <<<"$d")
  g_ok=$(jq -r 'has("ok")' <<<"$g")
  if [[ $d_ok == true && $g_ok == true ]]; then
    if [[ $(jq -n --argjson a "$d" --argjson b "$g" '$a.ok == $b.ok') == true ]]; then
      agree=$((agree + 1))
      continue
    fi
    how="both read, values differ"
  elif [[ $d_ok == false && $g_ok == false ]]; then
    both_reject=$((both_reject + 1))
    continue
  elif [[ $d_ok == true ]]; then
    how="draguard reads, go-yaml refuses: $(jq -r .error <<<"$g")"
  else
    how="draguard refuses ($(jq -r .error <<<"$d")), go-yaml reads"
  fi
  differ=$((differ + 1))
  rows+=("| $case | $title | $expected | ${how//|/\\|} |")
done
echo "| case | title | suite says | difference |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "cases: ${#cases[@]}; agreed: $((agree + both_reject)) ($agree read alike, $both_reject refused by both); differing: $differ"
