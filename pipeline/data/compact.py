"""Compact, lossless text for tool results (``data.result_style: compact``).

A tool result is JSON; a list of records repeats every key in every record, which is most of an
AML ``query_transactions`` result (2.5k-4.5k characters). The compact form writes a record list as
a table -- its keys once, then one ``|``-separated row per record -- and every other key as
``key: value``. Nothing is dropped: every id, amount, date and flag stays, and ``read_compact``
gives back the exact value (tests check the round trip on every observation of the reference
policies, and that the honest heuristic reading the decoded results grades identically).

Cells are plain when that is unambiguous; a string that would read back as something else (a
number, ``true``, empty-looking, containing ``|`` or a newline, starting with ``[``, ``{`` or
``"``) is written as a JSON string, and nested values as compact JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

_TABLE_HEAD = re.compile(r"^(?P<key>[^\s:|\[\]]+)\[(?P<n>\d+)\]: (?P<cols>.*)$")
_SCALAR_WORDS = ("true", "false", "null")


def _table_columns(value: Any) -> list[str] | None:
    """The columns of a record list written as a table, or ``None`` when it is not one.

    A table is a non-empty list of dicts whose keys, taken together, can be put in one order that
    every record follows (records may lack keys: AML transactions carry ``invoice`` only on trade
    rows). A missing key is an empty cell; a present empty string is written ``""``, so the two
    read back apart.
    """
    if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
        return None
    cols = list(max(value, key=len))
    for record in value:
        cols += [k for k in record if k not in cols]
    if not cols or not all(_plain_key(k) for k in cols):
        return None
    where = {k: i for i, k in enumerate(cols)}
    for record in value:
        places = [where[k] for k in record]
        if places != sorted(places):
            return None
    return cols


def _plain_key(key: Any) -> bool:
    return isinstance(key, str) and bool(key) and not re.search(r"[\s:|\[\]\"]", key)


def _cell(value: Any) -> str:
    if isinstance(value, str):
        if _reads_back_as_string(value):
            return value
        return json.dumps(value, ensure_ascii=False)
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _reads_back_as_string(text: str) -> bool:
    if text == "" or text != text.strip() or "|" in text or "\n" in text:
        return False
    if text[0] in '[{"' or text in _SCALAR_WORDS:
        return False
    try:
        float(text)
    except ValueError:
        return True
    return False


def _read_cell(text: str) -> Any:
    if text == "":
        return ""
    if text[0] in '[{"' or text in _SCALAR_WORDS:
        return json.loads(text)
    try:
        number = json.loads(text)
    except json.JSONDecodeError:
        return text
    return number if isinstance(number, (int, float)) else text


def compact_text(value: Any) -> str:
    """``value`` (a JSON-able tool result) in the compact form; ``read_compact`` inverts it."""
    if isinstance(value, dict) and value and all(_plain_key(k) for k in value):
        return "\n".join(_entry(key, item) for key, item in value.items())
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _entry(key: str, value: Any) -> str:
    cols = _table_columns(value)
    if cols is not None:
        rows = ["|".join(_cell(record[c]) if c in record else "" for c in cols) for record in value]
        return "\n".join([f"{key}[{len(value)}]: {'|'.join(cols)}", *rows])
    return f"{key}: {_cell(value)}"


def read_compact(text: str) -> Any:
    """The value that ``compact_text`` wrote (raises ``ValueError`` on text it did not write)."""
    if not text or text[0] in '[{"' or text in _SCALAR_WORDS or not _looks_like_entries(text):
        return json.loads(text)
    result: dict[str, Any] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        head = _TABLE_HEAD.match(line)
        if head:
            cols = head["cols"].split("|")
            n = int(head["n"])
            rows = lines[i + 1 : i + 1 + n]
            if len(rows) != n:
                raise ValueError(f"table {head['key']!r} promises {n} rows, has {len(rows)}")
            result[head["key"]] = [
                {
                    c: _read_cell(t)
                    for c, t in zip(cols, _split_row(row, len(cols)), strict=True)
                    if t
                }
                for row in rows
            ]
            i += 1 + n
            continue
        key, sep, cell = line.partition(": ")
        if not sep:
            raise ValueError(f"not a compact entry: {line[:80]!r}")
        result[key] = _read_cell(cell)
        i += 1
    return result


def _looks_like_entries(text: str) -> bool:
    first = text.split("\n", 1)[0]
    return bool(_TABLE_HEAD.match(first)) or bool(re.match(r"^[^\s:|\[\]\"]+: ", first))


def _split_row(row: str, n: int) -> list[str]:
    """Split a table row on ``|`` outside JSON strings (quoted cells may hold ``|``)."""
    cells, current, quoted, escaped = [], [], False, False
    for char in row:
        if quoted:
            current.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
            current.append(char)
        elif char == "|":
            cells.append("".join(current))
            current = []
        else:
            current.append(char)
    cells.append("".join(current))
    if len(cells) != n:
        raise ValueError(f"row has {len(cells)} cells, the table has {n} columns: {row[:80]!r}")
    return cells
