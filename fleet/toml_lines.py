"""Where each key of a TOML document starts: a small line scan (tomllib keeps no
positions) so scenario errors in TOML files name a line, as they do for YAML.

`key_lines(text)` maps each key path, with array-of-tables indices, to its
1-based line: `[[models]]` / `[[models.endpoints]]` headers count entries,
`[a.b]` headers and `key = value` (dotted keys too) record their line. Keys
inside inline tables or multi-line values are not mapped; `line_of` then falls
back to the nearest enclosing key, which is the line the value starts on.
"""

from __future__ import annotations

import re

Path = tuple[int | str, ...]

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\[\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)
_PART = re.compile(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""")


def _parts(dotted: str) -> list[str]:
    return [p.strip("\"'") for p in _PART.findall(dotted)]


def key_lines(text: str) -> dict[Path, int]:
    """Key path -> 1-based line of the key (or table header) in a TOML document."""
    lines: dict[Path, int] = {}
    counts: dict[Path, int] = {}  # array-of-tables path -> entries so far
    table: Path = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            is_array = header.group(1) == "[["
            segs = _parts(header.group(2))
            path: Path = ()
            for i, seg in enumerate(segs):
                path = (*path, seg)
                if is_array and i == len(segs) - 1:
                    n = counts.get(path, 0)
                    counts[path] = n + 1
                    lines.setdefault(path, number)
                    path = (*path, n)
                elif path in counts:
                    path = (*path, counts[path] - 1)
            table = path
            lines[table] = number
            continue
        key = _KEY.match(line)
        if key:
            lines.setdefault((*table, *_parts(key.group(1))), number)
    return lines


def line_of(lines: dict[Path, int], loc: Path) -> int | None:
    """The line of the deepest mapped key along `loc` (None when nothing matches)."""
    for i in range(len(loc), 0, -1):
        if loc[:i] in lines:
            return lines[loc[:i]]
    return None
