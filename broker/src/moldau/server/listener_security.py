"""How each listener secures its connections, and how this broker secures its own
connections to the others.

Per listener: its TLS key material (a holder per SSL and SASL_SSL listener, so dynamic
`listener.name.<l>.ssl.*` configs swap it without a restart), the principal of a TLS
client (`ssl.principal.mapping.rules`), and for SASL_PLAINTEXT and SASL_SSL listeners the
gate that makes each connection authenticate first (sasl_authenticator.py) against the
listener's mechanisms (sasl_listeners.py) and the SCRAM credentials kept in ZooKeeper.
Towards the other brokers (replica fetchers, controlled shutdown, markers): the
inter-broker listener's TLS settings and, on a SASL listener, the mechanism of
`sasl.mechanism.inter.broker.protocol` with its JAAS entry's username and password. The
controller's channel does the same on the control-plane listener when
`control.plane.listener.name` is set (Kafka's controlPlaneSecurityProtocol).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable

from moldau.client.security import ClientSecurity
from moldau.security.credential_cache import ScramCredentialCache
from moldau.security.delegation_tokens import DelegationTokenCache
from moldau.security.principal import principal_from_certificate
from moldau.security.sasl.mechanism import SaslClient
from moldau.security.ssl_settings import PRINCIPAL_MAPPING_RULES, TlsConfigError, read_text
from moldau.security.tls import TlsContextHolder, build_client_context

from .config import BrokerConfig, ConfigValue
from .config.errors import ConfigError
from .listener import Listener
from .sasl_authenticator import MechanismServers, SaslGate, Serve
from .sasl_listeners import inter_broker_sasl, sasl_listeners
from .startup_error import StartupError

log = logging.getLogger("kafka.server.KafkaServer")

# the ssl.* settings of one listener, dynamic overrides applied (DynamicBrokerConfig)
SslSettings = Callable[[str], dict[str, ConfigValue]]


class ListenerSecurity:
    def __init__(self, config: BrokerConfig, kafka_opts: str) -> None:
        """Resolves every SASL listener's settings now: a setting Moldau cannot honour
        stops startup (StartupError naming the key) before anything else happens."""
        self.config = config
        self.tls_holders: dict[str, TlsContextHolder] = {}
        self.credentials = ScramCredentialCache()
        self.tokens = DelegationTokenCache()  # filled by the delegation token manager
        try:
            self.sasl = sasl_listeners(config, kafka_opts)
            self._inter_broker_sasl = inter_broker_sasl(config, self.sasl)
            control = config.control_plane_listener_name
            self._control_plane_sasl = (inter_broker_sasl(config, self.sasl, control)
                                        if control is not None else None)
        except ConfigError as exc:
            raise StartupError(str(exc)) from exc
        self.gates: dict[str, SaslGate] = {}
        self._ssl_settings: SslSettings = config.listener_settings

    def use_dynamic_settings(self, ssl_settings: SslSettings) -> None:
        """The listeners' ssl.* settings with /config/brokers overrides, once loaded."""
        self._ssl_settings = ssl_settings

    def listeners(self, serve: Serve,
                  advertised: Callable[[], dict[int, tuple[int, int]]]) -> list[Listener]:
        """The socket server's listeners, each with its TLS context; the SASL ones get
        their gate in `gates`, for the socket server's `sasl_gates`."""
        listeners = []
        for endpoint in self.config.listeners:
            name, protocol = endpoint.listener, endpoint.security_protocol
            context = self.tls_context(name) if protocol in ("SSL", "SASL_SSL") else None
            if name in self.sasl:
                self.gates[name] = SaslGate(
                    self.sasl[name],
                    MechanismServers(self.sasl[name], self.credentials, self.tokens),
                    serve, advertised)
            listeners.append(Listener(name, endpoint.host, endpoint.port, protocol, context))
        return listeners

    def tls_context(self, listener: str) -> ssl.SSLContext:
        """The listener's TLS context; a holder per listener lets dynamic configs swap the
        key material without a restart (new connections get the new one)."""
        try:
            holder = TlsContextHolder(self._listener_tls(listener))
        except TlsConfigError as exc:
            raise StartupError(f"listener {listener}: {exc}") from exc
        self.tls_holders[listener] = holder
        return holder.listener_context

    def _listener_tls(self, listener: str) -> dict[str, ConfigValue]:
        """A listener's ssl.* settings; on SASL_SSL the broker-wide ssl.client.auth does
        not apply, only the listener's own (KIP-684): SASL authenticates the client."""
        settings = dict(self._ssl_settings(listener))
        own = f"listener.name.{listener.lower()}.ssl.client.auth"
        if (self.config.protocol_map.get(listener) == "SASL_SSL"
                and own not in self.config.listener_overrides):
            settings["ssl.client.auth"] = "none"
        return settings

    def reload_listener_tls(self, listener: str) -> None:
        """New key material for a listener (dynamic listener.name.<l>.ssl.* configs):
        new connections use it, established ones keep theirs."""
        holder = self.tls_holders.get(listener.upper())
        if holder is None:
            return
        try:
            holder.reload(self._listener_tls(listener.upper()))
            log.info("Reloaded the TLS key material of listener %s", listener)
        except (TlsConfigError, ValueError, OSError) as exc:
            log.error("Keeping the old TLS key material of listener %s: %s", listener, exc)

    def principal(self, listener: Listener, cert: bytes | None) -> str:
        """A TLS client's principal (its certificate's DN through the mapping rules): the
        listener's own `listener.name.<l>.ssl.principal.mapping.rules` before the
        broker-wide key, as Kafka reads every ssl.* key of a listener."""
        rules = read_text(self._ssl_settings(listener.name), PRINCIPAL_MAPPING_RULES, "DEFAULT")
        return "User:" + principal_from_certificate(cert, rules)

    def inter_broker_client(self) -> ClientSecurity:
        """How this broker connects to the others: the inter-broker listener's own ssl.*
        settings (keystore as the client certificate, truststore), as Kafka configures
        its broker clients, and its SASL mechanism and credentials."""
        return self._client(self.config.inter_broker_listener_name, self._inter_broker_sasl)

    def controller_client(self) -> ClientSecurity:
        """How the controller connects to the brokers: as inter_broker_client, on the
        control-plane listener with that listener's own ssl.* settings and JAAS entry
        when control.plane.listener.name is set."""
        listener = self.config.control_plane_listener_name
        if listener is None:
            return self.inter_broker_client()
        return self._client(listener, self._control_plane_sasl)

    def _client(self, listener: str, sasl: Callable[[], SaslClient] | None) -> ClientSecurity:
        protocol = self.config.protocol_map.get(listener, "PLAINTEXT")
        context = (build_client_context(self._ssl_settings(listener))
                   if protocol in ("SSL", "SASL_SSL") else None)
        mechanism = (str(self.config.values["sasl.mechanism.inter.broker.protocol"]).upper()
                     if sasl is not None else None)
        return ClientSecurity(protocol, context, mechanism, sasl)
