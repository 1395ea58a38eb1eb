"""JSON Schema as canon applies it: every format asserted, regular expressions with ECMA-262 meaning."""

from __future__ import annotations

import importlib.util
import re
import time
from importlib import metadata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import FormatChecker, SchemaError

from core.values.dialect import FORMAT_CHECKER, FORMATS, check_schema, ecma_regex, require_formats, schema_validator

# (format, a valid value, an invalid value): one pair per format canon promises to assert
EXAMPLES: list[tuple[str, str, str]] = [
    ("date-time", "2026-11-30T09:15:00Z", "yesterday"),
    ("date", "2026-11-30", "2026-02-30"),
    ("time", "09:15:00+01:00", "9 am"),
    ("duration", "P1DT2H", "2 days"),
    ("email", "ada@example.org", "ada.example.org"),
    ("idn-email", "ada@bücher.example", "no-at-sign"),
    ("hostname", "api.example.org", "-bad-.example.org"),
    ("idn-hostname", "bücher.example", "a..b"),
    ("ipv4", "192.0.2.1", "192.0.2.256"),
    ("ipv6", "2001:db8::1", "2001:db8:::1"),
    ("uri", "https://example.org/a?b=c", "not a uri"),
    ("uri-reference", "../a/b", "a b"),
    ("iri", "https://bücher.example/ä", "ä"),
    ("iri", "https://example.org/?q=\ue000", "https://example.org/\ue000"),  # a private-use character only in a query
    ("iri", "urn:isbn:978-3-16-148410-0", "https://example.org/\ufffe"),  # U+FFFE is no IRI character
    ("iri-reference", "/ä/b", "a b"),
    ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"),
    ("uri-template", "https://example.org/{id}", "https://example.org/{id"),
    ("json-pointer", "/a/b~1c", "a/b"),
    ("relative-json-pointer", "1/a", "/a"),
    ("regex", "^[a-z]+$", "(?P<name>a)"),
]


def test_every_promised_format_has_an_example_here_and_a_checker() -> None:
    assert list(dict.fromkeys(name for name, _, _ in EXAMPLES)) == list(FORMATS)
    assert set(FORMATS) <= set(FORMAT_CHECKER.checkers)


@pytest.mark.parametrize(("name", "valid", "invalid"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_each_format_accepts_a_valid_value_and_refuses_an_invalid_one(name: str, valid: str, invalid: str) -> None:
    validator = schema_validator({"type": "string", "format": name})
    assert validator.is_valid(valid)
    (error,) = validator.iter_errors(invalid)
    assert error.validator == "format"


def test_a_format_without_a_checker_fails_loudly_naming_it() -> None:
    with pytest.raises(RuntimeError, match="date-time"):
        require_formats(FormatChecker(formats=("email",)))


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("^a$", "a", True),
        ("^a$", "a\n", False),  # Python's $ also matches before a final newline; ECMA-262's does not
        ("^a.b$", "a\nb", False),
        ("^a.b$", "a\u2028b", False),
        (r"^\d+$", "٣", False),  # \d is ASCII in ECMA-262
        (r"^\w+$", "é", False),
        (r"^[\d.]+$", "1.5", True),
        ("^[$]$", "$", True),
        ("^(?i:a)b$", "Ab", True),  # a scoped modifier is ECMA-262 (2025) and Python alike
        (r"(?<word>ab)c", "abc", True),  # a named group
        (r"^\s$", "\u00a0", True),  # \s is ECMA-262's white space, Unicode's spaces included
        (r"^\S$", "\u2028", False),
        (r"^\u00e9[\u0041-\u005A]$", "éB", True),  # \u escapes, in and out of a class
        (r"^[\b]$", "\b", True),  # a backspace in a class
        ("b", "abc", True),  # not anchored unless the pattern says so
    ],
)
def test_patterns_match_as_ecma_262_says(pattern: str, value: str, matches: bool) -> None:
    assert (ecma_regex(pattern).search(value) is not None) is matches
    assert schema_validator({"pattern": pattern}).is_valid(value) is matches


@pytest.mark.parametrize(
    "pattern", ["(?P<x>a)", r"\Aa", r"a\Z", "(?i)a", "[a", r"(a)\1", r"(?<w>a)\k<w>", "a(?=b)", "a(?!b)", "(?<=a)b",
                "(?<!a)b", "a{1001}"],
)  # fmt: skip
def test_python_only_backtracking_or_broken_regular_expressions_are_refused(pattern: str) -> None:
    with pytest.raises(re.error):
        ecma_regex(pattern)


def test_pattern_properties_and_additional_properties_use_the_same_rule() -> None:
    schema = {"type": "object", "patternProperties": {"^x$": {"type": "integer"}}, "additionalProperties": False}
    validator = schema_validator(schema)
    assert validator.is_valid({"x": 1})
    (error,) = validator.iter_errors({"x\n": 1})
    assert error.validator == "additionalProperties"
    assert "'x\\n'" in error.message


def test_one_of_a_tagged_union_points_into_the_branch_whose_tag_matches() -> None:
    branches = [
        {"type": "object", "properties": {"op": {"const": "put"}, "id": {"pattern": "^[a-z]+$"}}, "required": ["id"]},
        {"type": "object", "properties": {"op": {"const": "delete"}, "key": {"type": "string"}}, "required": ["key"]},
    ]
    validator = schema_validator({"type": "array", "items": {"oneOf": branches}})
    assert validator.is_valid([{"op": "put", "id": "a"}, {"op": "delete", "key": "k"}])
    errors = list(validator.iter_errors([{"op": "put", "id": "a\n"}, {"op": "delete"}, {"op": "other"}]))
    assert [(list(e.absolute_path), e.validator) for e in errors] == [
        ([0, "id"], "pattern"),  # the branch its tag chose, not "not valid under any of the given schemas"
        ([1], "required"),
        ([2], "oneOf"),  # no tag matched: every branch failed as a whole
    ]


def test_a_tool_schema_with_a_python_only_pattern_is_not_a_schema() -> None:
    check_schema({"type": "string", "pattern": "^[a-z]+$"})
    with pytest.raises(SchemaError):
        check_schema({"type": "string", "pattern": "(?P<x>a)"})


# the packages of jsonschema's format checkers that FORMATS needs beyond the standard library
CHECKER_PACKAGES = {
    "date-time": "rfc3339-validator", "time": "rfc3339-validator", "duration": "isoduration", "hostname": "fqdn",
    "idn-hostname": "idna", "uri": "rfc3986-validator", "uri-reference": "rfc3986-validator",
    "iri": "rfc3986-validator", "iri-reference": "rfc3986-validator", "uri-template": "uri-template",
    "json-pointer": "jsonpointer", "relative-json-pointer": "jsonpointer",
}  # fmt: skip


def test_the_format_checkers_packages_are_dependencies_canon_declares() -> None:
    requirements = metadata.requires("canon") or []
    declared = {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for r in requirements if "extra ==" not in r}
    assert set(CHECKER_PACKAGES) <= set(FORMATS)
    assert set(CHECKER_PACKAGES.values()) <= declared


def test_the_format_checkers_cost_no_noticeable_start_up() -> None:
    # an IRI grammar compiled at import (the rfc3987-syntax package jsonschema picks up when it is installed) cost
    # every canon process 2 s; canon checks IRIs itself, so that package must not come back with a dependency
    found = importlib.util.find_spec("rfc3987_syntax")
    assert found is None, "rfc3987-syntax is installed: jsonschema imports it, and its grammar costs 2 s per process"


@pytest.mark.parametrize("pattern", ["^(a+)+$", "^([a-z]+-?)+$", "^(a|a)*$", "^(a|aa)+$", "^(.*a){12}$"])
def test_no_pattern_costs_more_than_linear_work_per_value(pattern: str) -> None:
    """Each is exponential for a backtracking engine on a value that almost matches (28 characters took 7.8 s
    under Python's re, doubling with each character); RE2 takes time linear in the value."""
    value = "a" * 5000 + "!"
    validator = schema_validator({"type": "string", "pattern": pattern})
    start = time.process_time()
    assert not validator.is_valid(value)
    assert ecma_regex(pattern).search("a" * 28 + "!") is None
    assert time.process_time() - start < 1.0  # CPU time: seconds would be hours for a backtracking engine


def test_a_backreference_is_refused_with_what_to_do() -> None:
    with pytest.raises(re.error, match="linear time"):
        ecma_regex(r"^(?<q>['\"]).*\k<q>$")


def test_unevaluated_properties_match_pattern_properties_in_linear_time_too() -> None:
    schema = {"type": "object", "patternProperties": {"^(a+)+$": {}}, "unevaluatedProperties": False}
    validator = schema_validator(schema)
    start = time.process_time()
    assert validator.is_valid({"aaaa": 1})
    assert not validator.is_valid({"a" * 5000 + "!": 1})
    assert not validator.is_valid({"a\n": 1})  # ECMA-262's $, not Python's
    assert time.process_time() - start < 1.0


FOUND_PATTERNS = ["^[a-z0-9][a-z0-9-]*$", "b$", "^ADR-[0-9]{4}$", "é", ".", "^$", "\\d+", "^(user|group):[a-z]+$"]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(FOUND_PATTERNS), st.text(alphabet=st.sampled_from("ab-09é\n\ud800Z:usergop"), max_size=12))
def test_found_in_and_starts_answer_as_search_and_match_do(pattern: str, value: str) -> None:
    regex = ecma_regex(pattern)
    assert regex.found_in(value) == (regex.search(value) is not None)
    assert regex.starts(value) == (regex.match(value) is not None)


def test_found_in_asks_the_compiled_program_directly() -> None:
    assert ecma_regex("^a$")._engine is not None  # pyright: ignore[reportPrivateUsage]  (else: re2 renamed it)
