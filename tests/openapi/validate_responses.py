#!/usr/bin/python3
"""Checks every HTTP exchange the tests recorded against the OpenAPI description.

    validate_responses.py DESCRIPTION RECORDING

RECORDING holds one JSON object a line, as tests/support/http_client.cpp writes them when
PAYLEDGER_HTTP_RECORD names the file: {"test", "method", "path" (without the query),
"status", "content_type", "headers" (names in lower case), "body_size", "body"}; a body over
1 MiB is recorded without its bytes ("body_recorded": false), and is then not checked. For
each, the operation is
found by matching the path against the description's path templates and the method, and then:
the status must be declared (an undeclared status fails), the content type declared for it,
every required header declared for it present (and valid), and the body valid against the
declared schema: JSON by JSON Schema 2020-12 with `$ref`s resolved in the whole description,
NDJSON line by line (`x-payledger-line-schema`), XML as the object of its root's children,
text where its schema constrains a string. Bodies are never checked for being empty where
there is content (a 304 and a 204 have none: a body there fails).

What the server answers before it looks for an operation is the description's
`x-payledger-unrouted`: a path that matches no template answers its `unknown-path` (404; or
under a prefix of `unknown-path-under`, that prefix's answer), a
method that the path does not list one of `unlisted-method` (by status: 405 with `Allow`
naming a method that the path lists, and the answers given before the method is looked at).

Exit status: 0 when every exchange holds, 1 listing the failures (the first 50) with the line
of the recording, 2 on a usage error, 77 (skipped) when nothing was recorded.
Needs Debian's python3-jsonschema (4.10, Draft 2020-12) and python3-yaml.
"""

import json
import re
import sys
import warnings
import xml.etree.ElementTree as ElementTree

import jsonschema
import yaml

FAILURES_SHOWN_MAX = 50
EXIT_SKIPPED = 77
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


class Description:
    """An OpenAPI 3.1 document, its path templates compiled, its references resolvable."""

    def __init__(self, document):
        self.document = document
        with warnings.catch_warnings():
            # RefResolver is deprecated in jsonschema 4.18 and later, but it is the API of
            # Debian's 4.10, and still works in the later ones.
            warnings.simplefilter("ignore", DeprecationWarning)
            self.resolver = jsonschema.RefResolver.from_schema(document)
        self.templates = []
        for template, item in (document.get("paths") or {}).items():
            pattern = "".join(
                "[^/]+" if part.startswith("{") else re.escape(part)
                for part in re.split(r"(\{[^}/]+\})", template))
            # Literal paths win over templated ones (/v1/orders over /v1/orders/{x} is moot,
            # but /console/ must not be taken as /console/{file} with an empty file).
            self.templates.append((template.count("{"), template, re.compile(pattern + r"\Z"),
                                   item))
        self.templates.sort(key=lambda entry: entry[0])

    def resolve(self, node):
        """`node` with its `$ref` (and the `$ref`s it leads to) followed."""
        seen = 0
        while isinstance(node, dict) and "$ref" in node:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                _, node = self.resolver.resolve(node["$ref"])
            seen += 1
            if seen > 32:
                raise ValueError("a $ref cycle")
        return node

    def path_item(self, path):
        for _, template, pattern, item in self.templates:
            if pattern.match(path):
                return template, self.resolve(item)
        return None, None

    def schema_errors(self, schema, instance):
        """The messages of `instance`'s violations of `schema` (a part of the document)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            validator = jsonschema.Draft202012Validator(schema, resolver=self.resolver)
            errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
        messages = []
        for error in errors[:5]:
            where = "/".join(str(part) for part in error.absolute_path)
            text = error.message
            if len(text) > 300:
                text = text[:300] + "…"
            messages.append(f"at /{where}: {text}")
        return messages


def media_type(text):
    """The media type of a Content-Type value, lower case, parameters normalised."""
    parts = [part.strip() for part in (text or "").split(";")]
    base = parts[0].lower()
    params = sorted(part.replace(" ", "").lower() for part in parts[1:] if part)
    return base, params


def find_content(content, content_type):
    """The declared media type object for `content_type`: the same type and parameters, or a
    declaration of the same type without parameters."""
    base, params = media_type(content_type)
    fallback = None
    for key, value in content.items():
        declared_base, declared_params = media_type(key)
        if declared_base != base:
            continue
        if declared_params == params:
            return key, value
        if not declared_params:
            fallback = (key, value)
    return fallback if fallback else (None, None)


def xml_object(body):
    """The root's tag and the object of its children's texts; raises on a child given twice."""
    root = ElementTree.fromstring(body)
    fields = {}
    for child in root:
        if child.tag in fields:
            raise ValueError(f"the element {child.tag} is given twice")
        fields[child.tag] = child.text or ""
    return root.tag, fields


def check_body(description, media, content_type, body):
    """The problems of `body` against the media type object `media`."""
    schema = media.get("schema")
    base, _ = media_type(content_type)
    if base == "application/x-ndjson":
        line_schema = media.get("x-payledger-line-schema")
        problems = []
        if body and not body.endswith("\n"):
            problems.append("the NDJSON body does not end in a line feed")
        for number, line in enumerate(body.split("\n")[:-1], start=1):
            try:
                value = json.loads(line)
            except ValueError as error:
                problems.append(f"NDJSON line {number} is not JSON: {error}")
                continue
            if line_schema is not None:
                problems += [f"NDJSON line {number} {message}"
                             for message in description.schema_errors(line_schema, value)]
            if len(problems) >= 5:
                break
        return problems
    if schema is None:
        return []
    if base == "application/json" or base.endswith("+json"):
        try:
            value = json.loads(body)
        except ValueError as error:
            return [f"the body is not JSON: {error}"]
        return description.schema_errors(schema, value)
    if base in ("application/xml", "text/xml"):
        resolved = description.resolve(schema)
        try:
            tag, fields = xml_object(body)
        except (ElementTree.ParseError, ValueError) as error:
            return [f"the body is not the XML declared: {error}"]
        expected = (resolved.get("xml") or {}).get("name")
        if expected and tag != expected:
            return [f"the XML root is <{tag}>, not <{expected}>"]
        return description.schema_errors(schema, fields)
    if base.startswith("text/") and description.resolve(schema).get("type") == "string":
        return description.schema_errors(schema, body)
    return []


def check_headers(description, response, headers):
    problems = []
    for name, header in (response.get("headers") or {}).items():
        header = description.resolve(header)
        value = headers.get(name.lower())
        if value is None:
            if header.get("required"):
                problems.append(f"the header {name} is missing")
            continue
        if "schema" in header:
            problems += [f"the header {name}: {message}"
                         for message in description.schema_errors(header["schema"], value)]
    return problems


def check_response(description, response, exchange):
    """The problems of `exchange` against the response object `response`."""
    response = description.resolve(response)
    headers = exchange.get("headers") or {}
    content_type = exchange.get("content_type") or headers.get("content-type", "")
    body = exchange.get("body") or ""
    problems = check_headers(description, response, headers)
    content = response.get("content")
    if not content:
        if body or exchange.get("body_size") or content_type:
            problems.append(f"a body ({content_type or 'no content type'}) where the "
                            "description declares none")
        return problems
    key, media = find_content(content, content_type)
    if media is None:
        problems.append(f"content type {content_type!r} is not declared (declared: "
                        f"{', '.join(content)})")
        return problems
    if exchange.get("body_recorded", True):
        problems += check_body(description, media, content_type, body)
    return problems


def declared_response(responses, status):
    status = str(status)
    if status in responses:
        return responses[status]
    ranged = status[0] + "XX"
    if ranged in responses:
        return responses[ranged]
    return responses.get("default")


def check_exchange(description, exchange):
    """The problems of one recorded exchange (empty when it holds)."""
    path = exchange["path"]
    method = exchange["method"].lower()
    status = int(exchange["status"])
    unrouted = description.document.get("x-payledger-unrouted") or {}
    template, item = description.path_item(path)
    if item is None:
        if status != 404:
            return [f"no path template matches {path}, and the answer is {status}, not 404"]
        answer = unrouted["unknown-path"]
        prefixes = unrouted.get("unknown-path-under") or {}
        for prefix in sorted(prefixes, key=len, reverse=True):
            if path.startswith(prefix):
                answer = prefixes[prefix]
                break
        return check_response(description, answer, exchange)
    operation = item.get(method)
    if operation is None:
        declared = sorted(m.upper() for m in METHODS if m in item)
        answers = unrouted.get("unlisted-method") or {}
        if str(status) not in answers:
            return [f"{method.upper()} is not declared for {template} (declared: "
                    f"{', '.join(declared)}), and the answer is {status}, not one of "
                    f"{', '.join(sorted(answers))}"]
        problems = check_response(description, answers[str(status)], exchange)
        allow = (exchange.get("headers") or {}).get("allow")
        if allow is not None and allow not in declared:
            problems.append(f"Allow: {allow} names a method that {template} does not declare")
        return problems
    response = declared_response(operation.get("responses") or {}, status)
    if response is None:
        declared = ", ".join(sorted(operation.get("responses") or {}))
        return [f"status {status} is not declared for {method.upper()} {template} "
                f"(declared: {declared})"]
    return [f"{status}: {problem}" for problem in check_response(description, response, exchange)]


def validate(description, lines):
    """(exchanges checked, [(line number, exchange summary, problem)], operations seen,
    bodies not recorded)."""
    failures = []
    unrecorded = 0
    seen = set()
    count = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        count += 1
        try:
            exchange = json.loads(line)
            summary = (f"{exchange.get('test') or '?'}: {exchange['method']} "
                       f"{exchange['path']} -> {exchange['status']}")
        except (ValueError, KeyError) as error:
            failures.append((number, "?", f"not a recorded exchange: {error}"))
            continue
        if not exchange.get("body_recorded", True):
            unrecorded += 1
        template, _ = description.path_item(exchange["path"])
        seen.add((exchange["method"].upper(), template or "(no such path)",
                  int(exchange["status"])))
        for problem in check_exchange(description, exchange):
            failures.append((number, summary, problem))
    return count, failures, seen, unrecorded


def load(path):
    with open(path, encoding="utf-8") as file:
        return Description(yaml.safe_load(file))


def main(argv):
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    description = load(argv[1])
    try:
        with open(argv[2], encoding="utf-8", errors="replace") as file:
            lines = file.read().split("\n")
    except FileNotFoundError:
        lines = []
    count, failures, seen, unrecorded = validate(description, lines)
    if count == 0:
        print(f"nothing recorded in {argv[2]}: no HTTP test ran with PAYLEDGER_HTTP_RECORD")
        return EXIT_SKIPPED
    operations = len({(method, template) for method, template, _ in seen})
    print(f"{count} exchanges, {operations} operations and {len(seen)} (operation, status) "
          f"pairs seen, {unrecorded} bodies over 1 MiB not recorded, {len(failures)} failures")
    for number, summary, problem in failures[:FAILURES_SHOWN_MAX]:
        print(f"{argv[2]}:{number}: {summary}: {problem}")
    if len(failures) > FAILURES_SHOWN_MAX:
        print(f"... and {len(failures) - FAILURES_SHOWN_MAX} more")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
