"""`If-None-Match` as every HTTP surface reads it (core/web/conditional.py): weak comparison, lists, `*`."""

from __future__ import annotations

import pytest

from core.web import none_match


@pytest.mark.parametrize(
    ("header", "etag"),
    [
        ('"team-payments@3"', '"team-payments@3"'),
        ('W/"r12-abc"', '"r12-abc"'),
        ('"r12-abc"', 'W/"r12-abc"'),
        ('"other", W/"r12-abc"', '"r12-abc"'),
        ('  "other" ,"r12-abc"  ', '"r12-abc"'),
        ('"other",,"r12-abc"', '"r12-abc"'),
        ("*", '"anything"'),
        (" * ", '"anything"'),
        ('"a,b@3"', '"a,b@3"'),
    ],
    ids=["strong", "weak-header", "weak-etag", "list", "spaces", "empty-element", "star", "star-spaced", "comma"],
)
def test_a_header_that_names_the_etag_or_star_means_not_modified(header: str, etag: str) -> None:
    assert none_match(header, etag)


@pytest.mark.parametrize(
    ("header", "etag"),
    [
        (None, '"r12-abc"'),
        ("", '"r12-abc"'),
        ('"r12-abd"', '"r12-abc"'),
        ("r12-abc", '"r12-abc"'),
        ('"r12-abc', '"r12-abc"'),
        ('"a", "b@3"', '"a,b@3"'),
        ('"a,b@3"', '"a"'),
        ("x*", '"r12-abc"'),
    ],
    ids=["absent", "empty", "another-tag", "unquoted", "unclosed", "split-tag", "tag-within-a-tag", "star-in-a-word"],
)
def test_a_header_that_does_not_name_the_etag_means_the_full_answer(header: str | None, etag: str) -> None:
    assert not none_match(header, etag)
