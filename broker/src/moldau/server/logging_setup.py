"""Broker logging: Kafka's log files through Python logging, configured from a file.

The operator's equivalent of Kafka's log4j.properties is a Python logging configuration
file in `logging.config.fileConfig` (INI) form, named by MOLDAU_LOG_CONFIG; without one,
the bundled default writes Kafka's files into LOG_DIR (default ./logs):

    server.log         everything at INFO (root logger), as Kafka's kafkaAppender
    controller.log     the `kafka.controller` logger
    state-change.log   the `state.change.logger` logger
    log-cleaner.log    the `kafka.log.LogCleaner` logger
    kafka-request.log  the `kafka.request.logger` logger (WARN by default, as in Kafka;
                       DEBUG logs every completed request)
    kafka-authorizer.log  the `kafka.authorizer.logger` logger: the ACL decisions (INFO
                       logs denials, DEBUG allowed accesses too)

Levels change at runtime through `set_logger_level` (IncrementalAlterConfigs on the
BROKER_LOGGER resource, as `kafka-configs --entity-type broker-loggers` does).
"""

from __future__ import annotations

import logging
import logging.config
import os
from importlib import resources

from moldau.authorizer.audit import TRACE  # log4j's TRACE (below DEBUG), registered there

DEFAULT_CONFIG = "logging.ini"
LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
_TO_PYTHON = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
              "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
              "OFF": logging.CRITICAL + 10}
_FROM_PYTHON = {TRACE: "TRACE", logging.DEBUG: "DEBUG", logging.INFO: "INFO",
                logging.WARNING: "WARN", logging.ERROR: "ERROR", logging.CRITICAL: "FATAL",
                logging.CRITICAL + 10: "OFF"}
ROOT_LOGGER = "root"


def configure_logging(config_path: str | None = None, log_dir: str | None = None) -> str:
    """Configure logging; returns the file used. LOG_DIR is created when missing."""
    log_dir = log_dir or os.environ.get("LOG_DIR") or os.path.join(os.getcwd(), "logs")
    os.makedirs(log_dir, exist_ok=True)
    path = config_path or os.environ.get("MOLDAU_LOG_CONFIG")
    if path is None:
        path = str(resources.files("moldau.server.logconf").joinpath(DEFAULT_CONFIG))
    logging.config.fileConfig(path, defaults={"log_dir": log_dir.replace("%", "%%")},
                              disable_existing_loggers=False)
    return path


def set_logger_level(name: str, level: str) -> None:
    """Change a logger's level now (Kafka's log4j levels; DEFAULT resets to inherit)."""
    level = level.upper()
    logger = logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)
    if level == "DEFAULT":
        if name == ROOT_LOGGER:
            raise ValueError("the root logger cannot be reset to DEFAULT")
        logger.setLevel(logging.NOTSET)
        return
    if level not in _TO_PYTHON:
        raise ValueError(f"Cannot set the log level of {name} to {level} as it is not a "
                         f"supported log level. Valid log levels are {', '.join(LEVELS)}")
    logger.setLevel(_TO_PYTHON[level])


def logger_levels() -> dict[str, str]:
    """Every known logger and its effective level (DescribeConfigs on BROKER_LOGGER)."""
    known = logging.root.manager.loggerDict
    names = [ROOT_LOGGER, *sorted(n for n in known if isinstance(known[n], logging.Logger))]
    levels = {}
    for name in names:
        logger = logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)
        levels[name] = _FROM_PYTHON.get(logger.getEffectiveLevel(), "INFO")
    return levels
