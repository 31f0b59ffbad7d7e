"""SASL as Kafka 3.9 speaks it, without I/O: JAAS configuration, the mechanisms' server
and client state machines (PLAIN, SCRAM-SHA-256/512) and SCRAM credentials. The broker's
authenticator (server/sasl_authenticator.py) and Moldau's clients drive them."""
