"""ApiVersions (API key 18): the versions of every API this broker serves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.errors import InvalidRequestError
from moldau.protocol.generated.api_versions_response import ApiVersionsResponse

if TYPE_CHECKING:
    from collections.abc import Callable

    from moldau.protocol.generated.api_versions_request import ApiVersionsRequest

    from ..finalized_features import FinalizedFeatures
    from ..requests import RequestContext

INVALID_REQUEST = InvalidRequestError.code


class ApiVersionsHandler:
    MIN_VERSION, MAX_VERSION = 0, 4

    def __init__(self, advertised_versions: Callable[[], dict[int, tuple[int, int]]],
                 features: FinalizedFeatures | None = None) -> None:
        self.advertised_versions = advertised_versions
        self.features = features  # /feature as last read; v3+ report it
        self._keys: list[ApiVersionsResponse.ApiVersion] | None = None

    def __call__(self, ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
        if ctx.api_version >= 3:
            # KIP-511: clients name themselves; Kafka validates the strings
            name = request.client_software_name or ""
            version = request.client_software_version or ""
            if not (_valid(name) and _valid(version)):
                return ApiVersionsResponse(error_code=INVALID_REQUEST, api_keys=self._api_keys())
            ctx.session.software_name = name
            ctx.session.software_version = version
        response = ApiVersionsResponse(error_code=0, api_keys=self._api_keys())
        features = self.features
        if ctx.api_version >= 3 and features is not None:
            # a ZooKeeper-mode broker supports no feature (Kafka's BrokerFeatures are empty
            # there); the finalized ones come from /feature, min level = max (KIP-778)
            response.finalized_features_epoch = features.epoch
            response.finalized_features = [
                ApiVersionsResponse.FinalizedFeatureKey(
                    name=name, max_version_level=level, min_version_level=level)
                for name, level in features.features.items()]
        return response

    def _api_keys(self) -> list[ApiVersionsResponse.ApiVersion]:
        if self._keys is None:  # the table is fixed once the handlers are registered
            self._keys = [
                ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
                for key, (low, high) in sorted(self.advertised_versions().items())
            ]
        return self._keys


def _valid(text: str) -> bool:
    # Kafka: letters, digits, '.', '-' and must start and end with a letter or digit
    if not text:
        return False
    return text[0].isalnum() and text[-1].isalnum() and all(
        c.isalnum() or c in ".-" for c in text)
