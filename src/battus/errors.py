"""Error type for bad user input.

Every problem with a user's file, option or configuration is raised as
:class:`InputError`; the command line prints it as one line and exits with
status 2.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input: names the offending file (or option) and field."""

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source = str(source)
        self.field = field
        self.message = message
        super().__init__(f"{self.source}: {field}: {message}")


def printable(text: str, keep: str = "") -> str:
    """``text`` with control characters escaped (those in ``keep`` left as they are): a hostile file
    name, token or plug-in output must not drive the terminal (escape sequences) or break a
    one-line error (newlines)."""
    return "".join(ch if ch.isprintable() or ch in keep else ascii(ch)[1:-1] for ch in text)
