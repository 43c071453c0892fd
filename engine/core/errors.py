"""The one error type a user reads.

Everything a person can fix (a bad field, a busy database, a missing file) is raised as
`UserError` with a message that names the field and what is allowed. The CLI prints it
without a traceback; anything else is a bug and keeps its traceback.
"""

__all__ = ["UserError"]


class UserError(Exception):
    """A problem the user can act on; the message says what to do."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field
