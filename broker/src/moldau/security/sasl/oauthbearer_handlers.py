"""The Kafka callback handler classes that Moldau runs for OAUTHBEARER, by Kafka 3.9's
names (the `...oauthbearer.secured` ones are 3.9's deprecated aliases, gone in 4.0). A
module of names only, so that the broker's key table can list them cheaply."""

from __future__ import annotations

_PACKAGE = "org.apache.kafka.common.security.oauthbearer"

# server side: listener.name.<l>.oauthbearer.sasl.server.callback.handler.class
JWKS_VALIDATOR_HANDLER = f"{_PACKAGE}.OAuthBearerValidatorCallbackHandler"
JWKS_VALIDATOR_HANDLER_DEPRECATED = f"{_PACKAGE}.secured.OAuthBearerValidatorCallbackHandler"
UNSECURED_VALIDATOR_HANDLER = (f"{_PACKAGE}.internals.unsecured."
                               "OAuthBearerUnsecuredValidatorCallbackHandler")
JWKS_VALIDATOR_HANDLERS = (JWKS_VALIDATOR_HANDLER, JWKS_VALIDATOR_HANDLER_DEPRECATED)
SERVER_CALLBACK_HANDLERS = (*JWKS_VALIDATOR_HANDLERS, UNSECURED_VALIDATOR_HANDLER)

# client side: sasl.login.callback.handler.class
LOGIN_HANDLER = f"{_PACKAGE}.OAuthBearerLoginCallbackHandler"
LOGIN_HANDLER_DEPRECATED = f"{_PACKAGE}.secured.OAuthBearerLoginCallbackHandler"
LOGIN_HANDLERS = (LOGIN_HANDLER, LOGIN_HANDLER_DEPRECATED)
