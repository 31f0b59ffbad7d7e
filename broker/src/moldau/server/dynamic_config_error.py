"""The error of a refused dynamic broker config change (every dynamic_* module raises it)."""


class DynamicConfigError(ValueError):
    """A dynamic config change Kafka would refuse (its ConfigException); the message is
    Kafka's."""
