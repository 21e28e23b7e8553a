"""Offline checks of the Kubernetes manifests (deploy/kubernetes, docs/kubernetes.md).

    kube_manifests.py to-json FILE
        the objects of a multi-document YAML (or JSON) file, as one JSON list
    kube_manifests.py validate FILE --version V [--version V ...]
        validates every object against the OpenAPI schemas of each Kubernetes version V
        (kubernetes-validate, strict: unknown fields are errors); prints one JSON object
        {"results": [{"kind", "name", "version", "error": null | {"kind", "message", "path"}}]}

    kube_manifests.py compare A B
        whether two renders hold the same objects, whatever their order and the name
        suffixes of generated ConfigMaps and Secrets (each kustomize generation hashes them
        its own way); prints {"same": bool, "only_a": [...], "only_b": [...]}

Exit 0 when it could judge (refusals are data for the caller), 3 when kubernetes-validate
is not installed, 2 on bad usage or unreadable input.
"""

import argparse
import json
import re
import sys

import yaml


def load(path):
    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    # A JSON list (what to-json prints, perhaps edited) is one document holding the objects.
    if len(docs) == 1 and isinstance(docs[0], list):
        docs = docs[0]
    return docs


GENERATED = re.compile(r"^(.+)-[a-z0-9]{10}$")


def canonical(objects):
    """Each object as sorted-key JSON, generated names' suffixes replaced by `-GENERATED`."""
    text = json.dumps(objects)
    for obj in objects:
        name = (obj.get("metadata") or {}).get("name", "")
        match = GENERATED.match(name)
        if obj.get("kind") in ("ConfigMap", "Secret") and match:
            text = text.replace(json.dumps(name), json.dumps(match.group(1) + "-GENERATED"))
    return sorted(json.dumps(o, sort_keys=True) for o in json.loads(text))


def compare(a, b):
    ca, cb = canonical(a), canonical(b)
    return {"same": ca == cb,
            "only_a": [x for x in ca if x not in cb],
            "only_b": [x for x in cb if x not in ca]}


def validate(objects, versions):
    try:
        import kubernetes_validate
        from kubernetes_validate.utils import SchemaNotFoundError
    except ImportError as e:
        print(f"MISSING kubernetes-validate ({e}): pip install -r integration-tests/python/requirements.txt",
              file=sys.stderr)
        sys.exit(3)
    results = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        for version in versions:
            error = None
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                error = {"kind": "invalid", "message": e.message,
                         "path": "/".join(str(p) for p in e.path)}
            except SchemaNotFoundError as e:
                error = {"kind": "no-schema", "message": e.message, "path": ""}
            results.append({"kind": obj.get("kind"), "name": meta.get("name"),
                            "version": version, "error": error})
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    to_json = sub.add_parser("to-json")
    to_json.add_argument("file")
    check = sub.add_parser("validate")
    check.add_argument("file")
    check.add_argument("--version", action="append", required=True)
    same = sub.add_parser("compare")
    same.add_argument("file")
    same.add_argument("other")
    args = parser.parse_args()
    try:
        objects = load(args.file)
        other = load(args.other) if args.command == "compare" else None
    except (OSError, yaml.YAMLError) as e:
        print(f"cannot read the input: {e}", file=sys.stderr)
        sys.exit(2)
    if args.command == "compare":
        print(json.dumps(compare(objects, other)))
    elif args.command == "to-json":
        print(json.dumps(objects))
    else:
        print(json.dumps({"results": validate(objects, args.version)}))


if __name__ == "__main__":
    main()
