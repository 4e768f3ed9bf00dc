"""The kit's own exception types, below every other module."""


class UsageError(Exception):
    """A user mistake: printed as one line, exit status 2."""
