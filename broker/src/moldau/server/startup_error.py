"""The error that stops a broker's startup."""


class StartupError(RuntimeError):
    """The broker cannot start; the message says why (logged, then exit non-zero)."""
