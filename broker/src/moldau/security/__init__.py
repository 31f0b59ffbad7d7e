"""Security: TLS contexts for the SSL listeners and the inter-broker client, the principal of
a connection (Kafka's `ssl.principal.mapping.rules`), and later SASL, the authorizer and
quotas.

The modules, each depending only on those listed before it:

* `ssl_settings`: Kafka's `ssl.*` key names, reading their values (with the
  `listener.name.<l>.ssl.*` overrides), and TlsConfigError.
* `x500`: DER distinguished names written as Java writes them (RFC 2253); no I/O.
* `principal`: KafkaPrincipal and the `ssl.principal.mapping.rules` mapping of a client
  certificate to a principal; needs no TLS context.
* `jks`: Java KeyStore (JKS) files.
* `stores`: key stores and trust stores (JKS, PKCS12, PEM), read and checked.
* `tls`: `ssl.SSLContext` objects from the `ssl.*` keys (protocols, cipher suites, client
  auth) and TlsContextHolder, which reloads them at run time.
"""
