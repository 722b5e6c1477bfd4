#!/usr/bin/python3
"""The router's operations equal the description's, and so do who may call them.

Usage: routes_match.py <openapi.yaml> <print_routes executable>

Reads the operations (method, path, security) of api/openapi.yaml with a YAML parser and the
router's table (api/routes/route_table.hpp: method, path, access) from the executable that prints
it, and fails naming every operation that one has and the other lacks (a route the description
does not know, or a path the description promises that the server does not route) and every
operation whose row's access is not what its `security` says: none for `open` and `platform`
(a platform's callback, tagged `callbacks`, is authenticated by its signature, which the
description may name as a scheme of its own), `merchant`,
`auditor` (or admin), `admin`. Needs Debian's python3-yaml.
"""
import subprocess
import sys

import yaml

METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def access_of(operation):
    """The router's access word that the operation's `security` and tags call for."""
    schemes = {name for requirement in operation.get("security", []) for name in requirement}
    if "callbacks" in operation.get("tags", []):
        # None, or the platform's signature header (genericSignature, wechatV3Signature).
        if all(name.endswith("Signature") for name in schemes):
            return "platform"
        return "unknown callback security " + ", ".join(sorted(schemes))
    if not schemes:
        return "open"
    if schemes == {"auditor", "admin"}:
        return "auditor"
    if len(schemes) == 1:
        return next(iter(schemes))
    return "unknown security " + ", ".join(sorted(schemes))


def described(path):
    """{(METHOD, path): access}"""
    with open(path, encoding="utf-8") as file:
        description = yaml.safe_load(file)
    return {(method.upper(), template): access_of(operation)
            for template, item in description.get("paths", {}).items()
            for method, operation in item.items() if method in METHODS}


def routed(executable):
    """{(METHOD, path): access}"""
    out = subprocess.run([executable], check=True, capture_output=True, text=True).stdout
    operations = {}
    for line in out.splitlines():
        method, path, access = line.split(" ")
        operations[(method, path)] = access
    return operations


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    in_description = described(argv[1])
    in_router = routed(argv[2])
    problems = [f"routed but not described: {m} {p}"
                for m, p in sorted(in_router.keys() - in_description.keys())]
    problems += [f"described but not routed: {m} {p}"
                 for m, p in sorted(in_description.keys() - in_router.keys())]
    problems += [f"{m} {p}: the router's access is {in_router[(m, p)]}, "
                 f"the description's {in_description[(m, p)]}"
                 for m, p in sorted(in_router.keys() & in_description.keys())
                 if in_router[(m, p)] != in_description[(m, p)]]
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"{len(in_router)} operations, the same in the router and in the description, "
          "each with the same access")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
