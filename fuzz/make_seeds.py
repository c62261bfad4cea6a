#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets from the repository's own
test data, so that no corpus needs committing and every new conformance
case or fixture becomes a seed:

  review_raw, review_structured  the AdmissionReview of every
                                 tests/conformance case, every review a real
                                 apiserver sent (tests/fixtures/apiserver) and
                                 the examples/review-*.json
  check_yaml                     the example manifests and policies, and the
                                 object of every review above (JSON is YAML;
                                 an UPDATE's old object follows a `#!old` line)
  policy_load                    policies/*.yaml, whole and one document each
  cel_compile                    every CEL expression found in the above

Usage: make_seeds.py REPO_ROOT OUT_DIR  (writes OUT_DIR/<target>/*)
"""

import json
import pathlib
import shutil
import sys


# Selectors in the shapes the Kubernetes DRA documentation and tests use,
# and a few that must fail, so the CEL target starts from every part of
# the grammar even where the test data has few expressions.
CEL_SEEDS = [
    'device.driver == "gpu.example.com"',
    'device.attributes["gpu.example.com"].model == "a100" && device.driver == "gpu.example.com"',
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
    'device.attributes["dra.example.com"].version.isGreaterThan(semver("1.2.3"))',
    'has(device.attributes["x.example.com"].y) ? device.attributes["x.example.com"].y : false',
    '["a", "b"].exists(x, x == device.driver)',
    '{"a": 1}["a"] == 1 && size(device.driver) < 64u',
    'device.driver.startsWith("gpu") || device.driver.matches("^nic-[0-9]+$")',
    'device.allowMultipleAllocations == true',
    'b"\\xff" != bytes("") && r"\\d" == "\\\\d" && 0x1F == 31 && 1.5e3 > 1.0',
    'cluster.name == "x"',
    'device.driver ==',
    '[[[[1]]]]',
    '((((((1))))))',
]


def reviews(root):
    """(name, AdmissionReview) of every review in the test data."""
    for path in sorted((root / "tests/conformance").glob("*.json")):
        case = json.loads(path.read_text())
        if isinstance(case.get("review"), dict):
            yield "conformance-" + path.stem, case["review"]
    for path in sorted((root / "tests/fixtures/apiserver").glob("*.json")):
        if path.name == "index.json":
            continue
        yield "apiserver-" + path.stem, json.loads(path.read_text())
    for path in sorted((root / "examples").glob("review-*.json")):
        yield "example-" + path.stem, json.loads(path.read_text())


def expressions(value):
    """Every string under a key `expression`, anywhere in `value`."""
    if isinstance(value, dict):
        for key, child in value.items():
            if key == "expression" and isinstance(child, str):
                yield child
            else:
                yield from expressions(child)
    elif isinstance(value, list):
        for child in value:
            yield from expressions(child)


def yaml_expressions(text):
    """`expression: ...` lines of a YAML file, without a YAML parser."""
    for line in text.splitlines():
        key, sep, rest = line.strip().lstrip("- ").partition("expression:")
        if sep and not key:
            rest = rest.strip()
            if len(rest) >= 2 and rest[0] == rest[-1] and rest[0] in "'\"":
                rest = rest[1:-1]
            if rest:
                yield rest


def main():
    root, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    dirs = {}
    for target in ("review_raw", "review_structured", "check_yaml", "policy_load", "cel_compile"):
        shutil.rmtree(out / target, ignore_errors=True)
        (out / target).mkdir(parents=True)
        dirs[target] = out / target

    cel = set()
    for name, review in reviews(root):
        body = json.dumps(review, indent=1).encode()
        (dirs["review_raw"] / name).write_bytes(body)
        (dirs["review_structured"] / name).write_bytes(body)
        request = review.get("request") or {}
        obj, old = request.get("object"), request.get("oldObject")
        if obj:
            text = json.dumps(obj, indent=1)
            if old:
                text += "\n#!old\n" + json.dumps(old, indent=1)
            (dirs["check_yaml"] / name).write_text(text)
        cel.update(expressions(review))

    manifests = sorted((root / "examples/dra-workload").rglob("*.yaml"))
    policies = sorted((root / "policies").glob("*.yaml"))
    for path in manifests + policies:
        name = "-".join(path.relative_to(root).with_suffix("").parts)
        (dirs["check_yaml"] / name).write_text(path.read_text())
    for path in policies:
        text = path.read_text()
        (dirs["policy_load"] / path.stem).write_text(text)
        for i, doc in enumerate(text.split("\n---\n")):
            (dirs["policy_load"] / f"{path.stem}-{i}").write_text(doc)
        cel.update(yaml_expressions(text))
    for path in manifests:
        cel.update(yaml_expressions(path.read_text()))

    cel.update(CEL_SEEDS)
    for i, expression in enumerate(sorted(cel)):
        (dirs["cel_compile"] / f"expression-{i}").write_text(expression)

    for target, path in dirs.items():
        print(f"  {target}: {sum(1 for _ in path.iterdir())} seeds")


if __name__ == "__main__":
    main()
