# Sourced by scripts/image.sh and scripts/image-smoke.sh: sets $engine to
# docker or buildah, or calls the caller's `fail`. ENGINE=docker|buildah
# chooses. A docker client without a running engine is common (CI machines,
# remote contexts that are down): ask the engine, not the client.
# shellcheck shell=bash
engine=${ENGINE:-}
if [[ -z $engine ]]; then
    if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
        engine=docker
    elif command -v buildah >/dev/null 2>&1; then
        engine=buildah
    else
        fail "no container engine: \`docker info\` fails (or docker is not installed) and buildah is not installed.
Install buildah (Debian/Ubuntu, as root: apt-get install -y buildah) or start a Docker engine."
    fi
fi
case $engine in
    docker) docker info >/dev/null 2>&1 || fail "ENGINE=docker, but \`docker info\` fails: is the Docker engine running?" ;;
    buildah) command -v buildah >/dev/null 2>&1 || fail "ENGINE=buildah, but buildah is not installed (apt-get install -y buildah)" ;;
    *) fail "ENGINE must be docker or buildah, not '$engine'" ;;
esac
