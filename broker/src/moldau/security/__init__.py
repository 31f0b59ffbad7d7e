"""Security: TLS contexts for the SSL listeners and the inter-broker client, the principal of
a connection (Kafka's `ssl.principal.mapping.rules`), and later SASL, the authorizer and
quotas.

`moldau.security.tls` turns Kafka's `ssl.*` keys (and their `listener.name.<l>.ssl.*`
overrides) into `ssl.SSLContext` objects and maps client certificates to principals.
"""
