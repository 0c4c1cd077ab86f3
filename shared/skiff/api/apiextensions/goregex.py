"""Schema `pattern`s are Go (RE2) regular expressions (SPEC EX3): real CRDs use RE2 syntax
Python's `re` reads differently or refuses — a flag group in mid-expression
(`^((?i)sun|mon)day$`, prometheus-operator's CRDs), `\\z`, POSIX classes (`[[:alpha:]]`).
This module translates a pattern once (memoised by its text) and reports a bad one with
Go's `error parsing regexp: ...` words."""

from __future__ import annotations

import functools
import re

__all__ = ["GoRegexError", "compile_go_pattern"]

_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7F", "blank": "\\t ",
    "cntrl": "\\x00-\\x1F\\x7F", "digit": "0-9", "graph": "!-~", "lower": "a-z",
    "print": " -~", "punct": "!-/:-@[-`{-~", "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z",
    "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
_FLAG_GROUP = re.compile(r"\(\?([imsU]+)\)")
_GO_ERRORS = (
    ("missing ), unterminated subpattern", "missing closing )"),
    ("unbalanced parenthesis", "unexpected )"),
    ("unterminated character set", "missing closing ]"),
    ("nothing to repeat", "missing argument to repetition operator"),
    ("multiple repeat", "invalid nested repetition operator"),
    ("bad escape", "invalid escape sequence"),
    ("bad character range", "invalid character class range"),
)


class GoRegexError(ValueError):
    """A pattern Go's regexp package would refuse; str() is Go's message."""


@functools.lru_cache(maxsize=1024)
def compile_go_pattern(pattern: str) -> re.Pattern[str]:
    """The compiled Python equivalent of an RE2 pattern; raises GoRegexError."""
    try:
        return re.compile(_translate(pattern))
    except re.error as err:
        code = next((go for py, go in _GO_ERRORS if str(err.msg).startswith(py)),
                    str(err.msg))
        raise GoRegexError(f"error parsing regexp: {code}: `{pattern}`") from None


def _translate(pattern: str) -> str:
    out: list[str] = []
    # per open group: the scoped-flag groups opened in it, closed when it closes
    scoped: list[list[str]] = [[]]
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\" and i + 1 < n:
            out.append("\\Z" if pattern[i + 1] == "z" else pattern[i:i + 2])
            i += 2
            continue
        if char == "[":
            end = _class_end(pattern, i)
            out.append(_translate_class(pattern[i:end]))
            i = end
            continue
        flags = _FLAG_GROUP.match(pattern, i)
        if flags is not None:
            letters = flags.group(1).replace("U", "")
            if not out and letters:
                out.append(f"(?{letters})")
            elif letters:
                out.append(f"(?{letters}:")
                scoped[-1].append(letters)
            i = flags.end()
            continue
        if char == "(":
            scoped.append([])
        elif char == ")" and len(scoped) > 1:
            out.append(")" * len(scoped.pop()))
        elif char == "|" and scoped[-1]:
            # RE2's flags last to the end of the group, across alternatives
            out.append(")" * len(scoped[-1]) + "|" + "".join(f"(?{f}:" for f in scoped[-1]))
            i += 1
            continue
        out.append(char)
        i += 1
    out.append(")" * len(scoped[-1]))
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    """The index after the `]` closing the class opened at `start` (len when unclosed)."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern.startswith("[:", i):
            close = pattern.find(":]", i + 2)
            if close != -1:
                i = close + 2
                continue
        if pattern[i] == "]":
            return i + 1
        i += 1
    return len(pattern)


def _translate_class(text: str) -> str:
    def posix(match: re.Match[str]) -> str:
        negated, name = match.group(1), match.group(2)
        ranges = _POSIX_CLASSES.get(name)
        if ranges is None or negated:
            return match.group(0)
        return ranges

    body = re.sub(r"\[:(\^?)([a-z]+):\]", posix, text[1:])
    return "[" + body.replace("[", "\\[") if not body.startswith("]") else "[" + body
