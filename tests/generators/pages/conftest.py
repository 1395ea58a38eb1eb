"""What the pages tests read out of a page: its links, its table rows and its text, by the standard library's
HTML parser (the pages are plain HTML: no script builds anything)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit


@dataclass
class Parsed:
    links: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])  # (href, text)
    row_headers: list[str] = field(default_factory=list[str])  # the text of each <th scope="row">
    text: list[str] = field(default_factory=list[str])
    tags: list[tuple[str, dict[str, str]]] = field(default_factory=list[tuple[str, dict[str, str]]])


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parsed = Parsed()
        self._link: tuple[str, list[str]] | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        self.parsed.tags.append((tag, values))
        if tag == "a" and "href" in values:
            self._link = (values["href"], [])
        if tag == "th" and values.get("scope") == "row":
            self._row = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._link is not None:
            self.parsed.links.append((self._link[0], "".join(self._link[1]).strip()))
            self._link = None
        if tag == "th" and self._row is not None:
            self.parsed.row_headers.append("".join(self._row).strip())
            self._row = None

    def handle_data(self, data: str) -> None:
        self.parsed.text.append(data)
        if self._link is not None:
            self._link[1].append(data)
        if self._row is not None:
            self._row.append(data)


def parse(html: str) -> Parsed:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return parser.parsed


def node_ids(parsed: Parsed, prefix: str = "/browse/nodes/") -> list[str]:
    """The node ids the page links to, in page order (each node page's link, percent-decoded)."""
    found: list[str] = []
    for href, _ in parsed.links:
        path = urlsplit(href).path
        if path.startswith(prefix) and "/" not in path.removeprefix(prefix):
            found.append(unquote(path.removeprefix(prefix)))
    return found
