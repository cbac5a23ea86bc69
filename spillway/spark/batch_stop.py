r"""A micro-batch cut short by its query's stop, re-raised in a few lines so that Spark sees a stop.

Stopping a streaming query while its ``foreachBatch`` function runs a Spark job cancels the job:
the function's JVM call fails with a Py4J error whose text holds the whole Java stack trace, and
the function's Python traceback (that text included) goes back to the JVM as the message of a
``py4j.Py4JException``. To tell a stop from a failure, Spark's ``StreamExecution`` then matches
that message against ``py4j.protocol.Py4JJavaError: An error occurred while
calling((.|\r\n|\r|\n)*)(java.lang.InterruptedException|...)`` (read from the
``StreamExecution$`` class of the pinned Spark jar). Java's regex engine recurses once per
character of that ``(.|...)*`` loop, so a tail of a couple of thousand characters overflows the
stream thread's stack: the thread dies of a ``StackOverflowError`` instead of ending as stopped
(docs/design.md, "Known limits").

:func:`stop_safe` wraps a batch function: when the error of a batch comes from a JVM call that
was cancelled or interrupted (the JVM exception, or one of its causes, is an
``InterruptedException``, ``InterruptedIOException``, ``ClosedByInterruptException`` or a
``SparkException`` saying "cancelled", the cases Spark's own check names), it is re-raised as a
:class:`~spillway.errors.BatchStoppedError` whose text is the Py4J error's head without the Java
stack trace (:func:`error_head`, at most :data:`HEAD_CHARS` characters). That head is what
Spark's check looks for (the cancelled job's message names the query's run id), so Spark ends
the query as stopped, with no exception. Any other error is re-raised untouched.

Examples
--------
>>> def failing(df, batch_id):
...     raise ValueError(f"boom in batch {batch_id}")
>>> stop_safe(failing, "plan 'avg'")(None, 3)
Traceback (most recent call last):
...
ValueError: boom in batch 3
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spillway.errors import BatchStoppedError

#: The longest head of a Py4J error a stopped batch re-raises: far below the ~1,000 characters
#: Spark's regex gets through on a default 1 MiB thread stack (docs/design.md, Known limits).
HEAD_CHARS = 500

#: The JVM exceptions Spark counts as an interruption by ``stop()``.
INTERRUPTIONS: tuple[str, ...] = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)


def error_head(text: str, limit: int = HEAD_CHARS) -> str:
    r"""The lines of a JVM error's text before its first stack frame, at most ``limit``
    characters.

    >>> error_head("An error occurred while calling o7.collectToPython.\n: org.apache.spark."
    ...            "SparkException: Job 3 cancelled\n\tat org.apache.spark.A.b(A.scala:1)\n\tat c")
    'An error occurred while calling o7.collectToPython.\n: org.apache.spark.SparkException: Job 3 cancelled'
    >>> error_head("x" * 40, limit=10)
    'xxxxxxx...'
    """
    lines = []
    for line in str(text).splitlines():
        if line[:1].isspace() and line.lstrip().startswith("at "):
            break
        lines.append(line)
    head = "\n".join(lines).strip()
    return head if len(head) <= limit else head[: limit - 3] + "..."


def _interrupted(java_exception: Any) -> bool:
    """Whether a JVM exception or one of its causes says its call was cancelled or interrupted."""
    from py4j.java_gateway import is_instance_of
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    link, depth = java_exception, 0
    while link is not None and depth < 32:
        if link.getClass().getName() in INTERRUPTIONS:
            return True
        if (
            gateway is not None
            and is_instance_of(gateway, link, "org.apache.spark.SparkException")
            and "cancelled" in str(link.getMessage() or "")
        ):
            return True
        link, depth = link.getCause(), depth + 1
    return False


def cancelled_call(exc: BaseException) -> str | None:
    """The head (:func:`error_head`) of the Py4J error behind ``exc`` (itself, or its cause or
    context, however deep) when the JVM says that call was cancelled or interrupted, else None.
    """
    from py4j.protocol import Py4JJavaError

    link: BaseException | None = exc
    seen: set[int] = set()
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, Py4JJavaError) and _interrupted(link.java_exception):
            return error_head(str(link))
        link = link.__cause__ or link.__context__
    return None


def stop_safe(fn: Callable[[Any, int], None], where: str) -> Callable[[Any, int], None]:
    """``fn`` as a ``foreachBatch`` function whose batch, cut short by its query's stop, raises
    :class:`~spillway.errors.BatchStoppedError` with a few lines of text (see the module
    docstring); ``where`` names the query in that text."""

    def run(df: Any, batch_id: int) -> None:
        try:
            fn(df, batch_id)
        except Exception as e:
            head = cancelled_call(e)
            if head is None:
                raise
            raise BatchStoppedError(
                f"{where}, batch {batch_id}: its Spark job was cut short by the query's stop: "
                f"py4j.protocol.Py4JJavaError: {head}"
            ) from None

    return run


__all__ = ["HEAD_CHARS", "INTERRUPTIONS", "cancelled_call", "error_head", "stop_safe"]
