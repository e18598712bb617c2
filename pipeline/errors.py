"""Errors that end a command with a message for the user instead of a traceback."""


class UserError(Exception):
    """Bad input from the user (missing file, malformed YAML, bad flag value).

    The message must say what was expected, what was found, and where.
    The CLI prints it and exits with status 2.
    """
