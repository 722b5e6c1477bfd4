#!/usr/bin/python3
"""The router's operations equal the description's.

Usage: routes_match.py <openapi.yaml> <print_routes executable>

Reads the operations (method, path) of api/openapi.yaml with a YAML parser and the router's
table (api/routes/route_table.hpp) from the executable that prints it, and fails naming every
operation that one has and the other lacks: a route the description does not know, or a path
the description promises that the server does not route. Needs Debian's python3-yaml.
"""
import subprocess
import sys

import yaml

METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def described(path):
    with open(path, encoding="utf-8") as file:
        description = yaml.safe_load(file)
    return {(method.upper(), template)
            for template, item in description.get("paths", {}).items()
            for method in item if method in METHODS}


def routed(executable):
    out = subprocess.run([executable], check=True, capture_output=True, text=True).stdout
    operations = set()
    for line in out.splitlines():
        method, _, path = line.partition(" ")
        operations.add((method, path))
    return operations


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    in_description = described(argv[1])
    in_router = routed(argv[2])
    problems = [f"routed but not described: {m} {p}" for m, p in sorted(in_router - in_description)]
    problems += [f"described but not routed: {m} {p}" for m, p in sorted(in_description - in_router)]
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"{len(in_router)} operations, the same in the router and in the description")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
