#!/usr/bin/env bash
# The release build: a static linux amd64 binary, a tarball, SHA256SUMS and
# the OCI image built from that same binary, in target/release-artifacts/:
#   draguard-VERSION-x86_64-linux          the binary (static, runs anywhere)
#   draguard-VERSION-x86_64-linux.tar.gz   it, LICENSE, README.md, CHANGELOG.md,
#                                          man/man1/*.1 (`draguard man`) and
#                                          completions/ (`draguard completions`)
#   SHA256SUMS                             `sha256sum -c SHA256SUMS` checks both
#
#   bash scripts/release.sh                 # artifacts and the image
#   bash scripts/release.sh --verify        # and build again elsewhere, compare
#   bash scripts/release.sh --no-image      # artifacts only
#   IMAGE=ghcr.io/draguard/draguard:0.1.0 bash scripts/release.sh
#
# Options:
#   --verify       build a second time from a copy of the checkout in /tmp,
#                  with its own (cold) target directory, and require the two
#                  binaries to be byte for byte the same
#   --no-image     skip the image (no container engine needed)
#   --allow-dirty  release from a checkout whose sources differ from HEAD
#                  (the binary then says `-dirty`); refused by default, since
#                  nobody could rebuild it from the commit
# Environment:
#   SOURCE_DATE_EPOCH  the tarball's file times (default: HEAD's commit time)
#   RELEASE_TARGET     the Rust target: x86_64-unknown-linux-musl (default)
#                      or x86_64-unknown-linux-gnu (linked with +crt-static)
#   IMAGE, ENGINE      as for scripts/image.sh (default IMAGE draguard:VERSION)
#
# Needs: the musl std (`rustup target add x86_64-unknown-linux-musl`; this
# script runs that when it is missing) and musl-gcc for ring's and
# mimalloc's C code (Debian: apt-get install -y musl-tools). Where rustup
# cannot download the musl std (it comes from the Rust project's own
# server, not from crates.io, PyPI, npm or Debian, whose rustc is 1.63),
# the script says so and builds x86_64-unknown-linux-gnu with +crt-static
# instead: static too, and it resolves host names without loading any
# shared library (glibc >= 2.34 has its `files` and `dns` NSS modules
# built in; the image's /etc/nsswitch.conf names only those). draguard's
# allocator is mimalloc, so musl's slower malloc costs nothing.
# arm64: not built yet. rustup installs its std (`rustup target add
# aarch64-unknown-linux-musl`), but ring and mimalloc need a C cross
# compiler for aarch64 musl, which Debian does not package (its
# gcc-aarch64-linux-gnu targets glibc; zig, on PyPI, could be one), and the
# result would need qemu to be run and checked here. Until that is done and
# tested, the script says SKIP.
#
# Reproducible: the same commit and toolchain give the same bytes wherever it
# is checked out. Absolute paths are remapped (--remap-path-prefix for rustc,
# -ffile-prefix-map for the C code), --locked pins every dependency, the
# build goes to its own target directory (target/release-build: other
# RUSTFLAGS than `cargo build --release`, so neither build evicts the other),
# and the tarball has sorted names, fixed owners and SOURCE_DATE_EPOCH times.
set -euo pipefail
cd "$(dirname "$0")/.."

verify=false
image=true
allow_dirty=false
for arg in "$@"; do
    case $arg in
        --verify) verify=true ;;
        --no-image) image=false ;;
        --allow-dirty) allow_dirty=true ;;
        *)
            printf 'usage: bash scripts/release.sh [--verify] [--no-image] [--allow-dirty]\n' >&2
            exit 2
            ;;
    esac
done

step() { printf '== release: %s\n' "$*"; }
fail() {
    printf 'release.sh: %s\n' "$*" >&2
    exit 1
}

OUT=target/release-artifacts
BUILD_DIR=target/release-build
# The paths the binary's inputs are under: an edit elsewhere (docs, tests)
# cannot change the binary. The same list as build.rs's INPUTS.
INPUTS=(src Cargo.toml Cargo.lock build.rs)

# --- what is built ------------------------------------------------------------
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
[[ -n $version ]] || fail "cannot read the package version from Cargo.toml"
revision=$(git rev-parse HEAD 2>/dev/null) || fail "not a git checkout: a release names its commit"
commit=${revision:0:12}
if [[ -n $(git status --porcelain --untracked-files=normal -- "${INPUTS[@]}") ]]; then
    $allow_dirty || fail "the sources differ from HEAD (git status -- ${INPUTS[*]}); commit them, or pass --allow-dirty"
    commit="$commit-dirty"
fi
# build.rs would find the same commit; set explicitly, the copy that
# --verify builds (no .git) names it too.
export DRAGUARD_GIT_COMMIT=$commit
# Not only the tarball's times: mimalloc's C code embeds __DATE__ and
# __TIME__, which gcc takes from SOURCE_DATE_EPOCH when it is set. The cc
# crate watches the variable, so a release of a new commit recompiles the C
# crates (ring, mimalloc, psm) and what depends on them, not only draguard.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}

musl=x86_64-unknown-linux-musl
if [[ -z ${RELEASE_TARGET:-} ]]; then
    RELEASE_TARGET=$musl
    if ! rustup target list --installed 2>/dev/null | grep -qx $musl; then
        step "rustup target add $musl"
        if ! timeout 300 rustup target add $musl; then
            RELEASE_TARGET=x86_64-unknown-linux-gnu
            step "the musl std cannot be installed here: building $RELEASE_TARGET with +crt-static instead"
        fi
    fi
fi
c_compiler=()
case $RELEASE_TARGET in
    "$musl")
        # musl-gcc, not the host's cc: C code compiled against glibc's
        # headers may call glibc-only symbols that musl's libc.a lacks.
        command -v musl-gcc >/dev/null 2>&1 ||
            fail "$musl needs musl-gcc for the C code of ring and mimalloc: apt-get install -y musl-tools"
        c_compiler=("CC_${musl//-/_}=musl-gcc")
        static_flags=() # static by default
        ;;
    x86_64-unknown-linux-gnu) static_flags=(-C target-feature=+crt-static) ;;
    *) fail "RELEASE_TARGET must be $musl or x86_64-unknown-linux-gnu, not '$RELEASE_TARGET'" ;;
esac
name=draguard-$version-x86_64-linux
step "draguard $version, commit $commit, $RELEASE_TARGET, SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH"
step "SKIP arm64: not built (see the comment at the top of scripts/release.sh)"

cargo_home=${CARGO_HOME:-$HOME/.cargo}

# build SOURCE_DIR TARGET_DIR: the release binary of the checkout at
# SOURCE_DIR, into TARGET_DIR; prints the binary's path.
build() {
    local src target cflags rustflags
    src=$(cd "$1" && pwd -P)
    mkdir -p "$2"
    target=$(cd "$2" && pwd -P)
    # rustc applies the last prefix that matches; the target directory may
    # be inside the checkout, so it comes after it.
    rustflags=(
        "--remap-path-prefix=$src=/build/draguard"
        "--remap-path-prefix=$cargo_home=/cargo"
        "--remap-path-prefix=$target=/build/target"
        "${static_flags[@]}"
    )
    cflags="-ffile-prefix-map=$src=/build/draguard -ffile-prefix-map=$cargo_home=/cargo -ffile-prefix-map=$target=/build/target"
    # With --target, RUSTFLAGS reach only what runs on the target, not build
    # scripts and proc macros (which cannot be linked statically).
    # CARGO_ENCODED_RUSTFLAGS: paths with spaces stay one argument.
    (
        cd "$src"
        env CARGO_TARGET_DIR="$target" \
            CARGO_ENCODED_RUSTFLAGS="$(IFS=$'\x1f' && printf '%s' "${rustflags[*]}")" \
            "CFLAGS_${RELEASE_TARGET//-/_}=$cflags" "${c_compiler[@]}" \
            cargo build --release --locked --bin draguard --target "$RELEASE_TARGET" >&2
    )
    printf '%s\n' "$target/$RELEASE_TARGET/release/draguard"
}

# --- the binary ---------------------------------------------------------------
step "cargo build --release --locked --target $RELEASE_TARGET (into $BUILD_DIR)"
started=$SECONDS
binary=$(build . "$BUILD_DIR")
step "built in $((SECONDS - started)) s: $(stat -c %s "$binary") bytes"

# Static, or it is not the binary this script promises.
file_out=$(file -b "$binary")
ldd_out=$(ldd "$binary" 2>&1 || true)
printf '   file: %s\n   ldd:  %s\n' "$file_out" "$ldd_out"
[[ $file_out == *"statically linked"* || $file_out == *"static-pie linked"* ]] ||
    fail "$binary is not statically linked: $file_out"
[[ $ldd_out == *"not a dynamic executable"* || $ldd_out == *"statically linked"* ]] ||
    fail "ldd finds shared libraries in $binary: $ldd_out"

# It runs, says what it is, and judges: the broken example is denied (1).
version_out=$("$binary" --version)
printf '   %s\n' "$version_out"
[[ $version_out == *"$version (commit $commit,"* ]] ||
    fail "--version says '$version_out', expected version $version and commit $commit"
set +e
"$binary" check examples/dra-workload/broken >/dev/null 2>&1
check_status=$?
set -e
[[ $check_status == 1 ]] ||
    fail "draguard check examples/dra-workload/broken exited $check_status, expected 1 (denied)"
step "static, runs, check of examples/dra-workload/broken exits 1"

# --- the artifacts ------------------------------------------------------------
# package BINARY DIR: the binary, its tarball and SHA256SUMS into DIR.
# Sorted names, numeric root owner, SOURCE_DATE_EPOCH times, no gzip header
# time or name: the same binary gives the same bytes.
package() {
    local binary=$1 dir=$2
    rm -rf "$dir"
    mkdir -p "$dir/$name"
    install -m 0755 "$binary" "$dir/$name/draguard"
    install -m 0644 LICENSE README.md CHANGELOG.md "$dir/$name/"
    # Man pages and shell completions, written by the binary itself from its
    # command-line definition (no date in them: the same binary, the same bytes).
    "$binary" man "$dir/$name/man/man1"
    mkdir -p "$dir/$name/completions"
    "$binary" completions bash >"$dir/$name/completions/draguard.bash"
    "$binary" completions zsh >"$dir/$name/completions/_draguard"
    "$binary" completions fish >"$dir/$name/completions/draguard.fish"
    tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
        --mode='u+rw,go+r,go-w' --format=gnu -C "$dir" -cf - "$name" | gzip -n -9 >"$dir/$name.tar.gz"
    rm -rf "${dir:?}/$name"
    install -m 0755 "$binary" "$dir/$name"
    (cd "$dir" && sha256sum "$name" "$name.tar.gz" >SHA256SUMS)
}
package "$binary" "$OUT"
step "artifacts in $OUT:"
sed 's/^/   /' "$OUT/SHA256SUMS"

# --- a second build, elsewhere ------------------------------------------------
if $verify; then
    copy=$(mktemp -d /tmp/draguard-release-verify.XXXXXX)
    trap 'rm -rf --one-file-system "$copy"' EXIT
    # The files git tracks, as they are in the work tree: what the first
    # build compiled, at another path, without target/ or .git (a tracked
    # file deleted in the work tree is left out).
    git ls-files -z | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$copy" -xf -
    step "verify: a second build from $copy (cold target directory)"
    started=$SECONDS
    second=$(build "$copy" "$copy/target")
    step "verify: built in $((SECONDS - started)) s"
    package "$second" "$copy/artifacts"
    printf '   first:\n' && sed 's/^/     /' "$OUT/SHA256SUMS"
    printf '   second:\n' && sed 's/^/     /' "$copy/artifacts/SHA256SUMS"
    cmp -s "$OUT/SHA256SUMS" "$copy/artifacts/SHA256SUMS" ||
        fail "verify: the two builds differ (not reproducible)"
    step "verify: the two builds are identical (binary and tarball)"
fi

# --- the image ----------------------------------------------------------------
if $image; then
    step "image from the static binary (scripts/image.sh)"
    c_library=glibc
    [[ $RELEASE_TARGET == "$musl" ]] && c_library=musl
    IMAGE=${IMAGE:-draguard:$version} DRAGUARD_BINARY=$OUT/$name DRAGUARD_C_LIBRARY=$c_library \
        bash scripts/image.sh
else
    step "SKIP image (--no-image)"
fi
step "done"
