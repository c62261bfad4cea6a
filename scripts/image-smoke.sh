#!/usr/bin/env bash
# Smoke test of the image scripts/image.sh built: runs its entrypoint the way
# a Kubernetes pod with deploy/base's security context would, without a
# container runtime:
#   - the image's root file system (buildah mount, or docker export), bind
#     mounted read-only as the process's root (readOnlyRootFilesystem);
#   - a throwaway self-signed certificate pair bind mounted read-only at
#     /etc/draguard/tls, where the Deployment mounts the draguard-tls Secret;
#   - uid and gid 65532, no supplementary groups (runAsUser: 65532);
# then requires: `/draguard --version` names the image's version and
# revision, HTTPS GET /healthz answers 200, and POST /validate denies the
# README's example claim. Everything is undone on exit, failed or not.
#
#   bash scripts/image-smoke.sh                 # IMAGE=draguard:dev
#   IMAGE=ghcr.io/draguard/draguard:0.1.0 ENGINE=buildah bash scripts/image-smoke.sh
#
# Needs root (mount namespaces, chroot), util-linux (unshare), openssl, curl.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-draguard:dev}
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
RUN_AS=65532:65532

step() { printf '== smoke: %s\n' "$*"; }
fail() {
    printf 'image-smoke.sh: FAIL: %s\n' "$*" >&2
    exit 1
}

[[ $(id -u) == 0 ]] || fail "needs root: it mounts the image read-only in a private mount namespace and chroots into it"
for tool in unshare openssl curl; do
    command -v "$tool" >/dev/null 2>&1 || fail "needs $tool (apt-get install -y util-linux openssl curl)"
done

# shellcheck source=scripts/container-engine.sh
source scripts/container-engine.sh

work=$(mktemp -d /tmp/draguard-smoke.XXXXXX)
container=
server_pid=
cleanup() {
    local status=$?
    if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    if [[ -n $container ]]; then
        case $engine in
            buildah)
                buildah umount "$container" >/dev/null 2>&1 || true
                buildah rm "$container" >/dev/null 2>&1 || true
                ;;
            docker) docker rm "$container" >/dev/null 2>&1 || true ;;
        esac
    fi
    # The bind mounts lived in the server's own mount namespace and are gone
    # with it; nothing under $work is mounted here.
    rm -rf --one-file-system "$work"
    if [[ $status != 0 ]]; then
        printf 'image-smoke.sh: FAILED (exit %s)\n' "$status" >&2
    fi
}
trap cleanup EXIT

# --- the image's configuration and root file system -------------------------
step "$IMAGE ($engine)"
case $engine in
    buildah)
        buildah inspect --type image "$IMAGE" >/dev/null 2>&1 ||
            fail "no image $IMAGE in buildah's $STORAGE_DRIVER storage: run bash scripts/image.sh first"
        inspect() { buildah inspect --type image --format "{{$1}}" "$IMAGE"; }
        entrypoint=$(inspect '.OCIv1.Config.Entrypoint')
        user=$(inspect '.OCIv1.Config.User')
        label_version=$(inspect 'index .OCIv1.Config.Labels "org.opencontainers.image.version"')
        label_revision=$(inspect 'index .OCIv1.Config.Labels "org.opencontainers.image.revision"')
        container=$(buildah from --pull=never "$IMAGE")
        rootfs=$(buildah mount "$container")
        ;;
    docker)
        docker image inspect "$IMAGE" >/dev/null 2>&1 ||
            fail "no image $IMAGE in the Docker engine: run bash scripts/image.sh first"
        inspect() { docker image inspect --format "{{$1}}" "$IMAGE"; }
        entrypoint=$(inspect '.Config.Entrypoint')
        user=$(inspect '.Config.User')
        label_version=$(inspect 'index .Config.Labels "org.opencontainers.image.version"')
        label_revision=$(inspect 'index .Config.Labels "org.opencontainers.image.revision"')
        container=$(docker create "$IMAGE")
        rootfs=$work/exported
        mkdir "$rootfs"
        docker export "$container" | tar -x -C "$rootfs"
        ;;
    *) fail "ENGINE must be docker or buildah, not '$engine'" ;;
esac
[[ $entrypoint == '[/draguard]' ]] || fail "entrypoint is $entrypoint, expected [/draguard]"
[[ $user == "$RUN_AS" ]] || fail "user is '$user', expected $RUN_AS"
[[ -n $label_version && -n $label_revision ]] || fail "the image lacks its version or revision label"
step "entrypoint $entrypoint, user $user, version $label_version, revision $label_revision"

[[ ! -e $rootfs/bin/sh && ! -e $rootfs/usr/bin/sh ]] || fail "the image has a shell"
not_root_owned=$(find "$rootfs" -mindepth 1 \( ! -user 0 -o ! -group 0 \) -print | head -n 5)
[[ -z $not_root_owned ]] || fail "files not owned by root:root in the image: $not_root_owned"
step "no shell; every file owned by root; $(find "$rootfs" -type f | wc -l) files, $(du -sh "$rootfs" | cut -f1)"

# --- a certificate for the server -----------------------------------------------
mkdir -p "$work/tls" "$work/root"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj /CN=localhost -addext 'subjectAltName=DNS:localhost,IP:127.0.0.1' \
    -keyout "$work/tls/tls.key" -out "$work/tls/tls.crt" 2>"$work/openssl.log" ||
    fail "openssl could not make a certificate: $(cat "$work/openssl.log")"
# As a Secret volume with fsGroup would: readable by the server's user only.
chown "$RUN_AS" "$work/tls/tls.key" "$work/tls/tls.crt"
chmod 0400 "$work/tls/tls.key"

# "${in_image[@]}" ARGS...: runs /draguard ARGS in a private mount namespace
# whose root is the image's root file system, read-only, with the
# certificate at /etc/draguard/tls and the repository's example policies at
# /etc/draguard/policies (as the Deployment mounts its ConfigMap), as 65532:65532 without supplementary
# groups. The mounts vanish with the process. A command, not a function, and
# `exec` all the way down, so that `... &` makes $! the server's own pid.
# shellcheck disable=SC2016 # expanded by the inner sh, on purpose
in_image=(
    unshare --mount --propagation private -- /bin/sh -euc '
        rootfs=$1 root=$2 tls=$3 policies=$4 uid=$5 gid=$6
        shift 6
        mount --bind "$rootfs" "$root"
        mount -o remount,bind,ro "$root"
        mount --bind "$tls" "$root/etc/draguard/tls"
        mount -o remount,bind,ro "$root/etc/draguard/tls"
        mount --bind "$policies" "$root/etc/draguard/policies"
        mount -o remount,bind,ro "$root/etc/draguard/policies"
        exec unshare --root="$root" --wd=/ --setgid="$gid" --setuid="$uid" -- /draguard "$@"
    ' in_image "$rootfs" "$work/root" "$work/tls" "$PWD/policies" "${RUN_AS%%:*}" "${RUN_AS##*:}"
)

# --- draguard --version -----------------------------------------------------------
version_out=$("${in_image[@]}" --version 2>&1) || fail "/draguard --version failed in the image: $version_out"
step "/draguard --version: $version_out"
[[ $version_out == "draguard $label_version (commit ${label_revision:0:12}"* ]] ||
    fail "--version says '$version_out'; the labels say version $label_version, revision $label_revision"

# --- draguard serve -----------------------------------------------------------------
# Port 0: the kernel picks a free port, read back from the log, so parallel
# runs on one machine never collide.
"${in_image[@]}" serve --tls-cert=/etc/draguard/tls/tls.crt --tls-key=/etc/draguard/tls/tls.key \
    --policies=/etc/draguard/policies --no-cluster --listen=127.0.0.1:0 --log-format=json \
    >"$work/serve.log" 2>&1 &
server_pid=$!
show_log() { sed 's/^/   | /' "$work/serve.log" >&2; }

addr=
for _ in $(seq 1 100); do
    kill -0 "$server_pid" 2>/dev/null || {
        show_log
        fail "draguard serve exited during start"
    }
    addr=$(grep -o '"listen":"[^"]*"' "$work/serve.log" | head -n 1 | cut -d'"' -f4 || true)
    [[ -n $addr ]] && break
    sleep 0.1
done
[[ -n $addr ]] || {
    show_log
    fail "draguard serve did not report its address within 10 s"
}
step "serving on https://$addr (pid $server_pid)"

# The process as the kernel sees it: the user, the groups, a read-only root.
status=$(cat "/proc/$server_pid/status")
grep -Eq '^Uid:[[:space:]]+65532[[:space:]]+65532[[:space:]]+65532[[:space:]]+65532$' <<<"$status" ||
    fail "server not running as uid 65532: $(grep ^Uid: <<<"$status")"
grep -Eq '^Gid:[[:space:]]+65532[[:space:]]+65532[[:space:]]+65532[[:space:]]+65532$' <<<"$status" ||
    fail "server not running as gid 65532: $(grep ^Gid: <<<"$status")"
grep -Eq '^Groups:[[:space:]]*$' <<<"$status" || fail "server has supplementary groups: $(grep ^Groups: <<<"$status")"
root_options=$(awk '$5 == "/" { print $6 }' "/proc/$server_pid/mountinfo")
[[ ,$root_options, == *,ro,* ]] || fail "the server's root is not read-only: $root_options"
step "uid 65532, gid 65532, no supplementary groups, root mounted $root_options"

curl_tls=(--silent --show-error --cacert "$work/tls/tls.crt" --resolve "localhost:${addr##*:}:127.0.0.1")
base=https://localhost:${addr##*:}
code=
for _ in $(seq 1 50); do
    code=$(curl "${curl_tls[@]}" --max-time 2 --output "$work/healthz" --write-out '%{http_code}' "$base/healthz" 2>"$work/curl.log" || true)
    [[ $code == 200 ]] && break
    sleep 0.2
done
[[ $code == 200 ]] || {
    show_log
    fail "GET /healthz answered '$code', not 200: $(cat "$work/curl.log")"
}
step "GET /healthz: HTTP $code $(head -c 80 "$work/healthz")"

verdict=$(curl "${curl_tls[@]}" --max-time 10 -H 'Content-Type: application/json' \
    --data-binary @examples/review-claim-denied.json "$base/validate?timeout=10s") ||
    fail "POST /validate failed"
[[ $verdict == *'"allowed":false'* && $verdict == *'"code":422'* ]] || {
    show_log
    fail "POST /validate did not deny examples/review-claim-denied.json with 422: $verdict"
}
step "POST /validate: denied with 422, as the README says"

kill -0 "$server_pid" 2>/dev/null || {
    show_log
    fail "draguard serve died during the test"
}
kill -TERM "$server_pid"
wait "$server_pid" || fail "draguard serve exited with status $? on SIGTERM"
server_pid=
if grep -q '"level":"\(ERROR\|WARN\)"' "$work/serve.log"; then
    show_log
    fail "draguard serve logged warnings or errors"
fi
step "stopped cleanly on SIGTERM; no warnings or errors logged"
step "PASS: $IMAGE"
