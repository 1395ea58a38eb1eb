"""What a model change does to llms.txt readers: the pages it links to.

A page no longer linked (a tool, type or resource gone) is breaking for whoever followed it; a new page, or the
same pages with other text, is compatible.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from core.lang.schema_diff import BREAKING, COMPATIBLE, Finding

__all__ = ["LLMS_TXT", "compare"]

LLMS_TXT = "llms.txt"
_LINK = re.compile(r"\]\((/[^)\s]*)\)")


def compare(old: Mapping[str, str], new: Mapping[str, str]) -> list[Finding]:
    """Every classified difference between the two llms.txt texts."""
    if old[LLMS_TXT] == new[LLMS_TXT]:
        return []
    before, after = set(_LINK.findall(old[LLMS_TXT])), set(_LINK.findall(new[LLMS_TXT]))
    findings = [Finding("llms", page, "page removed", BREAKING) for page in sorted(before - after)]
    findings += [Finding("llms", page, "page added", COMPATIBLE) for page in sorted(after - before)]
    return findings or [Finding("llms", "/llms.txt", "text changed", COMPATIBLE)]
