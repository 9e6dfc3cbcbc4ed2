"""The one exception type a user sees as a single line (and exit code 2) instead of a traceback."""


class UserError(Exception):
    """Bad input from the user: a file, field or value, and what was expected.

    The message must name the thing (file path, tensor name, flag) and say expected vs found.
    """
