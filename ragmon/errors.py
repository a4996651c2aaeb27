"""The ragmon exception tree. Foreign exceptions are translated at the edge with ``from``.

::

    RagmonError
    ├── ConfigError                 bad setting; raised at start-up, names the setting
    ├── DecodeError                 bytes that are not OTLP (reason: a bounded label)
    ├── SourceError                 a span source failed (retriable flag)
    │   └── KafkaSourceError
    ├── JudgeError                  scoring one trace failed (reason: bounded label; retriable flag)
    │   ├── JudgeTimeoutError       no reply within the timeout of a sent request (slot waits not counted)
    │   ├── JudgeHTTPError          non-2xx from the judge endpoint (status), or a broken connection
    │   │   └── JudgeConnectError   no connection at all (refused, unreachable): the endpoint is down
    │   ├── JudgeRateLimitedError   429 after retries
    │   ├── JudgeReplyError         reply not valid JSON / wrong schema after the repair attempt
    │   │   └── JudgeReplyTruncatedError  ... because the reply was cut off at max_tokens
    │   ├── JudgeCircuitOpenError   circuit breaker open: endpoint considered down
    │   └── JudgeBudgetExceeded     token budget exhausted (the trace is *skipped*, not failed)
    ├── ModelError                  local model file missing or checksum mismatch
    ├── EvalInputError              ragmon eval: an input cannot be used at all (exit code 2)
    ├── GateRuleError               ragmon eval: a gate rule does not parse (also a ValueError)
    └── PushgatewayError            ragmon eval: the run's aggregates could not be pushed
"""

from __future__ import annotations

from . import semconv as sc


class RagmonError(Exception):
    """Base of every error ragmon raises on purpose."""


class ConfigError(RagmonError, ValueError):
    """A setting has a bad value. The message names the setting and its env var."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting = setting


class DecodeError(RagmonError):
    """A request body or Kafka message is not valid OTLP."""

    def __init__(self, message: str, reason: str = sc.DROP_MALFORMED_BODY) -> None:
        super().__init__(message)
        self.reason = reason


class SourceError(RagmonError):
    retriable: bool = True


class KafkaSourceError(SourceError):
    pass


class JudgeError(RagmonError):
    """Scoring a trace failed; ``reason`` is a bounded label value for failed{reason}."""

    reason: str = sc.FAIL_INTERNAL
    retriable: bool = False


class JudgeTimeoutError(JudgeError):
    reason = sc.FAIL_TIMEOUT
    retriable = True


class JudgeHTTPError(JudgeError):
    reason = sc.FAIL_HTTP

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retriable = status is None or status >= 500


class JudgeConnectError(JudgeHTTPError):
    """No connection to the judge endpoint (refused, unreachable, DNS): the server is down."""

    reason = sc.FAIL_CONNECT

    def __init__(self, message: str) -> None:
        super().__init__(message, status=None)


class JudgeRateLimitedError(JudgeError):
    reason = sc.FAIL_RATE_LIMITED
    retriable = True


class JudgeReplyError(JudgeError):
    reason = sc.FAIL_INVALID_REPLY


class JudgeReplyTruncatedError(JudgeReplyError):
    """The unusable reply was cut off at ``max_tokens`` (``finish_reason`` "length"): the cap, or a
    model that writes too much, is the cause, not the model's JSON."""

    reason = sc.FAIL_REPLY_TRUNCATED


class JudgeCircuitOpenError(JudgeError):
    reason = sc.FAIL_CIRCUIT_OPEN


class JudgeBudgetExceeded(JudgeError):
    """Not a failure: the agent accounts the trace as skipped{reason="budget"}."""

    reason = sc.SKIP_BUDGET


class ModelError(RagmonError):
    """The local judge's model file is missing, unreadable or fails its checksum."""


class EvalInputError(RagmonError):
    """An evaluation input cannot be used at all: unreadable file, bad ``--app`` spec, ...

    (One bad *row* is never this: it becomes a ``RowProblem``.) ``ragmon eval`` exits with code 2.
    """


class GateRuleError(RagmonError, ValueError):
    """A gate rule's text does not parse, or its severity is unknown."""


class PushgatewayError(RagmonError):
    """The run's metrics could not be pushed (gateway unreachable, refused, timed out, bad URL).

    ``url`` is the gateway as given; the message says what went wrong. The evaluation itself is
    complete: callers report this as a warning or a distinct exit code, not as a failed gate.
    """

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"could not push to the Pushgateway at {url}: {message}")
        self.url = url
