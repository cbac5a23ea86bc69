"""The exceptions spillway raises.

Every error names the parameter, the rule, the value received and what to do. The CLI turns any
:class:`SpillwayError` into one line on standard error: exit code 2 for a configuration or input
error, 1 for :class:`RunFailedError` (the run itself failed).

Examples
--------
>>> try:
...     raise ConfigError("capacity must be >= 0, got -1: pass a non-negative number")
... except SpillwayError as e:
...     print(e)
capacity must be >= 0, got -1: pass a non-negative number
"""

from __future__ import annotations


class SpillwayError(Exception):
    """Base class of every error spillway raises on purpose."""


class ConfigError(SpillwayError, ValueError):
    """A configuration value breaks a rule (raised by config ``__post_init__`` and config loaders)."""


class UnknownNameError(ConfigError, KeyError):
    """A name (policy, feed, workload, experiment, query) is not in its registry."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class InputDataError(SpillwayError):
    """Input data (a replayed file, a config file) cannot be read or parsed."""


class ControlChannelError(SpillwayError):
    """The loopback channel to the NodeController failed (refused, timed out, wrong key)."""


class BrokerError(SpillwayError):
    """The local Kafka broker of ``spillway kafka`` could not be fetched, started or stopped
    (jars not fetched, Maven or Java missing, a port taken, the broker process exited)."""


class KafkaClientError(SpillwayError):
    """Talking to a Kafka cluster failed: the bootstrap servers are unreachable, a topic or
    partition does not exist, an offset range is not in the log, or the broker refused a write."""


class RunFailedError(SpillwayError):
    """A run started but failed: a streaming query died, Spark could not start, a Python worker
    crashed. The CLI reports it in one line, writes the report of what ran (saying where it
    failed) and exits with code 1."""


class BatchStoppedError(SpillwayError):
    """A micro-batch's Spark job was cancelled by its streaming query's stop; raised inside the
    batch in a few lines so that Spark ends the query as stopped
    (:mod:`spillway.spark.batch_stop`)."""


class MissingAssetError(SpillwayError):
    """A file the set-up installs is missing (the dashboard's chart library, bundled by
    ``make setup``); the message names the file and the command that installs it."""
