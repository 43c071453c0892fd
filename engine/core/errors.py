"""The one error type a user reads.

Everything a person can fix (a bad field, a busy database, a missing file) is raised as
`UserError` with a message that names the field and what is allowed. The CLI prints it
without a traceback; anything else is a bug and keeps its traceback.
"""

import re

__all__ = ["UserError", "plain_text", "refuse_read_only"]

# A terminal's escape sequences: CSI (colours, bold: ESC [ 1 m), OSC (titles, links: ESC ] ...
# BEL or ESC \), and two-character escapes; then any other control character but tab/newline.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
                      r"|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain_text(text: str) -> str:
    """text without a terminal's escape codes or other control characters: a stored reason
    is read on a page, in a table and in a file, never only on a terminal (Keras writes its
    errors with bold-text codes)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


class UserError(Exception):
    """A problem the user can act on; the message says what to do."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


def refuse_read_only(access, action: str) -> None:
    """The one rule for anything that changes what everyone sees (a launch, a cancel, a mark
    on a benchmark's state): a session whose access (dashboard.access.Access, or anything
    with its why_read_only()) gives a reason it is read-only is refused with that reason,
    the action named as the field."""
    why = access.why_read_only()
    if why:
        raise UserError(f"{action}: refused, {why}", field=action)
