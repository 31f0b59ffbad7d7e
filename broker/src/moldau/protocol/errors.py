"""The error types of the protocol layer.

Every failure to decode bytes received from the network surfaces as ProtocolError, so
the server has exactly one exception to catch per request; encoding a message that the
requested version cannot carry raises UnsupportedVersionError.
"""


class ProtocolError(ValueError):
    """Bytes that do not form a valid message, header, record batch or frame."""


class UnsupportedVersionError(ProtocolError):
    """An API key or version this codec does not know, or a value a version cannot carry."""
