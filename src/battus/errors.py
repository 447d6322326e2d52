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
