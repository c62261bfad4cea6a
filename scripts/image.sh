#!/usr/bin/env bash
# Builds draguard's container image from the Containerfile at the repository
# root: first the release binary, then a root file system holding it and the
# shared libraries it loads (target/image/rootfs), then the image FROM
# scratch with docker (when a Docker engine answers) or buildah.
#
#   bash scripts/image.sh                                   # draguard:dev
#   IMAGE=ghcr.io/draguard/draguard:0.1.0 bash scripts/image.sh
#   ENGINE=buildah bash scripts/image.sh                    # force an engine
#   DRAGUARD_BINARY=path bash scripts/image.sh              # a binary built before
#
# Environment:
#   IMAGE           image name and tag (default draguard:dev)
#   ENGINE          docker | buildah (default: docker if `docker info` works,
#                   else buildah)
#   IMAGE_SOURCE    the org.opencontainers.image.source label
#   STORAGE_DRIVER  buildah's storage driver (default vfs: works as root
#                   anywhere, no overlay or fuse needed)
#   DRAGUARD_BINARY the binary to ship instead of building one; a static one
#                   (scripts/release.sh) goes in without any shared library
#   DRAGUARD_C_LIBRARY  glibc (default) or musl: whose license files to ship
# Then: bash scripts/image-smoke.sh runs the image's entrypoint and asks it
# for /healthz.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-draguard:dev}
IMAGE_SOURCE=${IMAGE_SOURCE:-https://github.com/draguard/draguard}
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
CONTEXT=target/image
ROOTFS=$CONTEXT/rootfs

step() { printf '== image: %s\n' "$*"; }
fail() {
    printf 'image.sh: %s\n' "$*" >&2
    exit 1
}

# --- which engine -----------------------------------------------------------
# shellcheck source=scripts/container-engine.sh
source scripts/container-engine.sh

# --- what is built ------------------------------------------------------------
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
[[ -n $version ]] || fail "cannot read the package version from Cargo.toml"

# --- the binary ---------------------------------------------------------------
if [[ -n ${DRAGUARD_BINARY:-} ]]; then
    binary=$DRAGUARD_BINARY
    [[ -x $binary ]] || fail "DRAGUARD_BINARY=$binary is not an executable file"
    step "binary $binary"
else
    # The environment of a plain `cargo build --release` (no
    # DRAGUARD_GIT_COMMIT: build.rs finds the commit itself), so that this
    # build and the developer's share target/release instead of each
    # rebuilding draguard after the other.
    step "cargo build --release --locked"
    started=$SECONDS
    cargo build --release --locked --bin draguard
    binary=target/release/draguard
    step "release binary built in $((SECONDS - started)) s"
fi

# The commit the binary itself reports, so that the image's revision label
# and `draguard --version` cannot disagree.
version_out=$("$binary" --version 2>&1) || fail "$binary --version failed: $version_out"
commit=$(sed -n 's/^draguard [^ ]* (commit \([^,]*\),.*/\1/p' <<<"$version_out")
[[ -n $commit ]] || fail "cannot read the commit from '$version_out'"
revision=$commit
if full=$(git rev-parse --verify -q "${commit%-dirty}^{commit}" 2>/dev/null); then
    revision=$full${commit#"${commit%-dirty}"}
fi
step "building $IMAGE (draguard $version, revision $revision) with $engine"

# --- the root file system -----------------------------------------------------
step "preparing $ROOTFS"
rm -rf "$CONTEXT"
mkdir -p "$ROOTFS"
install -m 0755 "$binary" "$ROOTFS/draguard"

file_out=$(file -b "$binary")
if [[ $file_out == *"statically linked"* || $file_out == *"static-pie linked"* ]]; then
    # scripts/release.sh's binary: nothing to load, nothing to copy.
    step "static binary: no shared libraries"
else
    # Every shared object the binary loads, at the path the loader looks
    # for it: `ldd` prints `name => /path (addr)` for libraries and
    # `/path (addr)` for the loader itself; linux-vdso is the kernel's and
    # has no file. Symbolic links are followed: the image holds plain files.
    if ! ldd_out=$(ldd "$binary" 2>&1); then
        fail "ldd $binary failed: $ldd_out"
    fi
    if grep -q 'not found' <<<"$ldd_out"; then
        fail "$binary needs libraries this machine lacks:
$ldd_out"
    fi
    libs=$(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$ldd_out" | sort -u)
    [[ -n $libs ]] || fail "ldd names no libraries for $binary, which file(1) calls dynamic ($file_out):
$ldd_out"
    for lib in $libs; do
        mkdir -p "$ROOTFS$(dirname "$lib")"
        install -m 0755 "$(readlink -f "$lib")" "$ROOTFS$lib"
        printf '   %s\n' "$lib"
    done

fi

install -d -m 0755 "$ROOTFS/etc" "$ROOTFS/etc/draguard" "$ROOTFS/etc/draguard/tls" "$ROOTFS/etc/draguard/policies"
install -d -m 1777 "$ROOTFS/tmp"
printf '%s\n' \
    'root:x:0:0:root:/root:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$ROOTFS/etc/passwd"
printf '%s\n' 'root:x:0:' 'nonroot:x:65532:' >"$ROOTFS/etc/group"
# glibc reads this for getaddrinfo and getpwuid; /etc/hosts and
# /etc/resolv.conf are the container runtime's to provide.
printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$ROOTFS/etc/nsswitch.conf"
chmod 0644 "$ROOTFS/etc/passwd" "$ROOTFS/etc/group" "$ROOTFS/etc/nsswitch.conf"
# Trust roots for a kubeconfig whose cluster names no certificate-authority
# (kube-rs then verifies with the system roots). In-cluster, the service
# account's ca.crt is used and this file is not read.
ca_bundle=/etc/ssl/certs/ca-certificates.crt
if [[ -r $ca_bundle ]]; then
    install -D -m 0644 "$ca_bundle" "$ROOTFS$ca_bundle"
else
    printf 'image.sh: warning: %s not found (apt-get install ca-certificates); the image will trust no public CA\n' "$ca_bundle" >&2
fi
# Licenses of what the image distributes: draguard's, and Debian's copyright
# files for the C library and libgcc it carries (or has linked in: a static
# musl binary carries musl instead; scripts/release.sh says which).
install -D -m 0644 LICENSE "$ROOTFS/usr/share/doc/draguard/LICENSE"
case ${DRAGUARD_C_LIBRARY:-glibc} in
    musl) c_packages=(musl) ;;
    glibc) c_packages=(libc6 libgcc-s1) ;;
    *) fail "DRAGUARD_C_LIBRARY must be glibc or musl, not '$DRAGUARD_C_LIBRARY'" ;;
esac
for pkg in "${c_packages[@]}"; do
    if [[ -r /usr/share/doc/$pkg/copyright ]]; then
        install -D -m 0644 "/usr/share/doc/$pkg/copyright" "$ROOTFS/usr/share/doc/$pkg/copyright"
    fi
done
step "root file system: $(du -sh "$ROOTFS" | cut -f1)"

# --- the image ----------------------------------------------------------------
build_args=(
    --file Containerfile
    --build-arg "VERSION=$version"
    --build-arg "REVISION=$revision"
    --build-arg "SOURCE=$IMAGE_SOURCE"
    --tag "$IMAGE"
)
started=$SECONDS
case $engine in
    docker)
        step "docker build"
        docker build "${build_args[@]}" "$CONTEXT"
        size="$(docker image inspect --format '{{.Size}}' "$IMAGE") bytes"
        push="docker push $IMAGE  (after docker login)"
        ;;
    buildah)
        step "buildah bud (storage driver $STORAGE_DRIVER)"
        previous=$(buildah images --noheading --format '{{.ID}}' "$IMAGE" 2>/dev/null || true)
        buildah bud --isolation chroot --pull=never "${build_args[@]}" "$CONTEXT"
        # The image this one replaces keeps its layers in storage, untagged;
        # remove it unless something else still names or uses it.
        current=$(buildah images --noheading --format '{{.ID}}' "$IMAGE")
        if [[ -n $previous && $previous != "$current" ]]; then
            buildah rmi "$previous" >/dev/null 2>&1 || true
        fi
        size=$(buildah images --noheading --format '{{.Size}}' "$IMAGE")
        push="STORAGE_DRIVER=$STORAGE_DRIVER buildah push $IMAGE  (after buildah login)"
        ;;
esac
step "image built in $((SECONDS - started)) s"
step "done: $IMAGE ($engine, $size; draguard $version, revision $revision)"
printf '   smoke test: IMAGE=%q ENGINE=%s bash scripts/image-smoke.sh\n' "$IMAGE" "$engine"
printf '   push:       %s\n' "$push"
