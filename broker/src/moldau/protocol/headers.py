"""Request and response headers, and whole requests and responses inside a frame.

Header versions follow Kafka's rules: a flexible API version uses request header v2 and
response header v1; ControlledShutdown v0 uses request header v0; and ApiVersions
responses always use response header v0, because a client that sent a version the broker
does not know must still be able to read the answer.
"""

from __future__ import annotations

import struct
from typing import Any

from ._runtime import _DECODE_FAILURES, Message, decode_failure
from .errors import ProtocolError, UnsupportedVersionError
from .generated.api import APIS, ApiKey
from .generated.api_versions_response import ApiVersionsResponse
from .generated.request_header import RequestHeader
from .generated.response_header import ResponseHeader

UNSUPPORTED_VERSION = 35  # Kafka's error code

_API_KEY_AND_VERSION = struct.Struct(">hh")
_INT32 = struct.Struct(">i")


def _is_flexible(api_key: int, api_version: int) -> bool:
    spec = APIS.get(api_key)
    if spec is None:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    # A version above the known range counts as flexible when the API has flexible
    # versions at all: that is how a newer client frames an ApiVersions probe.
    return spec.flexible_min is not None and api_version >= spec.flexible_min


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if _is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if _is_flexible(api_key, api_version) else 0


def decode_request_header(buf: memoryview) -> tuple[RequestHeader, int]:
    """Decode the header at the start of a request; return it and where the body starts."""
    try:
        api_key, api_version = _API_KEY_AND_VERSION.unpack_from(buf, 0)
    except struct.error:
        raise ProtocolError(f"request of {len(buf)} bytes is too short for a header") from None
    version = request_header_version(api_key, api_version)
    return RequestHeader.decode_from(buf, 0, version)


# (api key, version) -> (request header version, its decoder, the body's class and
# decoder), for the requests of known versions decoded so far: a request's header and
# body then go straight to the generated decoders, without the version lookups.
_REQUEST_CODECS: dict[tuple[int, int], tuple[int, Any, Any, Any]] = {}


def decode_request(data: bytes | bytearray | memoryview) -> tuple[RequestHeader, Message]:
    """Decode a request (without its size prefix) into its header and body.

    Raises UnsupportedVersionError for an unknown API key or version (for an unknown
    version it carries the decoded `header`, so the caller can answer it) and
    ProtocolError for malformed bytes.
    """
    buf = data if isinstance(data, memoryview) else memoryview(data)
    try:
        key = _API_KEY_AND_VERSION.unpack_from(buf, 0)
    except struct.error:
        raise ProtocolError(f"request of {len(buf)} bytes is too short for a header") from None
    codecs = _REQUEST_CODECS.get(key)
    if codecs is None:
        return _decode_request(buf)
    header_version, header_decoder, cls, body_decoder = codecs
    try:
        header, pos = header_decoder(buf, 0)
    except (ProtocolError, *_DECODE_FAILURES) as exc:
        raise decode_failure("RequestHeader", header_version, exc) from None
    try:
        body, _end = body_decoder(buf, pos)
    except (ProtocolError, *_DECODE_FAILURES) as exc:
        raise decode_failure(cls.NAME, key[1], exc) from None
    return header, body


def _decode_request(buf: memoryview) -> tuple[RequestHeader, Message]:
    """decode_request for a request of an API key and version not seen before."""
    header, pos = decode_request_header(buf)
    spec = APIS[header.request_api_key]
    if not spec.min_version <= header.request_api_version <= spec.max_version:
        error = UnsupportedVersionError(
            f"{spec.name} v{header.request_api_version} is not supported "
            f"(valid: {spec.min_version}-{spec.max_version})"
        )
        error.header = header  # type: ignore[attr-defined]  # so the caller can answer
        raise error
    cls, version = spec.request, header.request_api_version
    body, _end = cls.decode_from(buf, pos, version)
    # Bytes after the body are ignored, as Kafka's parser does: librdkafka 2.16 sends
    # Metadata v12 with fields of other versions at the end.
    header_version = request_header_version(header.request_api_key, version)
    _REQUEST_CODECS[(header.request_api_key, version)] = (
        header_version, RequestHeader._DECODERS[RequestHeader._codec_index(header_version)],
        cls, cls._DECODERS[cls._codec_index(version)])
    return header, body


def encode_request(header: RequestHeader, body: Message) -> bytes:
    """A size-prefixed request frame."""
    out = bytearray(4)
    version = request_header_version(header.request_api_key, header.request_api_version)
    header.encode_into(out, version)
    body.encode_into(out, header.request_api_version)
    _INT32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_response(correlation_id: int, api_key: int, api_version: int, body: Message
                    ) -> bytes:
    """A size-prefixed response frame."""
    out = bytearray(4)
    header = ResponseHeader(correlation_id=correlation_id)
    header.encode_into(out, response_header_version(api_key, api_version))
    body.encode_into(out, api_version)
    _INT32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response(
    data: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> tuple[int, Message]:
    """Decode a response (without its size prefix); return (correlation id, body)."""
    buf = data if isinstance(data, memoryview) else memoryview(data)
    header, pos = ResponseHeader.decode_from(buf, 0, response_header_version(api_key, api_version))
    body, end = APIS[api_key].response.decode_from(buf, pos, api_version)
    if end != len(buf):
        raise ProtocolError(f"response has {len(buf) - end} unexpected trailing bytes")
    return header.correlation_id, body


def unsupported_api_versions_response(
    correlation_id: int, versions: dict[int, tuple[int, int]]
) -> bytes:
    """Kafka's answer to an ApiVersions request of a version the broker does not know:
    the v0 layout with UNSUPPORTED_VERSION and the full list, so the client can retry."""
    keys = [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
        for key, (low, high) in sorted(versions.items())
    ]
    body = ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=keys)
    return encode_response(correlation_id, ApiKey.API_VERSIONS, 0, body)
