#!/usr/bin/env bash
# Proves that a build after `git status` compiles nothing (issue 25: build.rs
# watched .git/index, which `git status` rewrites, so every second build
# recompiled draguard). It builds once (that build may compile), runs
# `git status` and touches the index the way git does when it refreshes it,
# builds again and fails if cargo compiles anything. Then it requires
# `draguard --version` to name HEAD's commit, with `-dirty` exactly when
# src/, crates/, Cargo.toml, Cargo.lock or build.rs differ from it (what
# build.rs reports).
#
#   bash scripts/check-no-rebuild.sh            # cargo build --release (the README's)
#   bash scripts/check-no-rebuild.sh --tests    # cargo test --workspace --no-run: free after the tests
#
# The build scripts/image.sh runs is the first one (the same command and
# environment), so after it this check costs seconds; .ci/run runs both.
set -euo pipefail
cd "$(dirname "$0")/.."

case ${1:-} in
    "")
        build=(cargo build --release --locked --bin draguard)
        binary=${CARGO_TARGET_DIR:-target}/release/draguard
        ;;
    --tests)
        # The binary the integration tests run (CARGO_BIN_EXE_draguard) is
        # built in the dev profile.
        build=(cargo test --workspace --locked --no-run)
        binary=${CARGO_TARGET_DIR:-target}/debug/draguard
        ;;
    *)
        printf 'usage: bash scripts/check-no-rebuild.sh [--tests]\n' >&2
        exit 2
        ;;
esac

fail() {
    printf 'check-no-rebuild.sh: FAIL: %s\n' "$*" >&2
    exit 1
}
# build.rs's own answer is under test, not an override.
unset DRAGUARD_GIT_COMMIT
export CARGO_TERM_COLOR=never

git rev-parse --git-dir >/dev/null 2>&1 || fail "not a git checkout: nothing to prove"
log=$(mktemp /tmp/draguard-no-rebuild.XXXXXX)
trap 'rm -f "$log"' EXIT

printf '== no-rebuild: %s (may compile)\n' "${build[*]}"
"${build[@]}" >"$log" 2>&1 || {
    tail -n 20 "$log" >&2
    fail "${build[*]} failed"
}

printf '== no-rebuild: git status, touch the index\n'
git status >/dev/null
# In a fresh clone `git status` may find nothing to refresh and leave the
# index as it was; an editor or a shell prompt would still rewrite it.
touch "$(git rev-parse --git-path index)"

printf '== no-rebuild: %s again (must compile nothing)\n' "${build[*]}"
started=$SECONDS
"${build[@]}" >"$log" 2>&1 || {
    tail -n 20 "$log" >&2
    fail "${build[*]} failed the second time"
}
if grep -E '^ *(Compiling|Dirty) ' "$log" >&2; then
    fail "the second build compiled again after git status (above)"
fi
printf '   nothing compiled (%s s)\n' "$((SECONDS - started))"

commit=$(git rev-parse --short=12 HEAD)
if [[ -n $(git status --porcelain --untracked-files=normal -- src crates Cargo.toml Cargo.lock build.rs) ]]; then
    commit="$commit-dirty"
fi
version_out=$("$binary" --version) || fail "$binary --version failed"
[[ $version_out == *"(commit $commit,"* ]] ||
    fail "$binary --version says '$version_out', expected commit $commit"
printf '   %s\n' "$version_out"
printf '== no-rebuild: ok\n'
