"""The pinned Java jars spillway runs Kafka with, fetched from Maven Central into a user cache.

Two bundles, each one folder of jars under the cache (never inside the repository):

- :data:`KAFKA` (``kafka-<KAFKA_VERSION>``): the Apache Kafka broker (``kafka_2.13`` with its
  runtime dependencies and a log4j binding), started by :mod:`spillway.kafka.broker`;
- :data:`SPARK_KAFKA` (``spark-sql-kafka-<SPARK_KAFKA_VERSION>``): Spark's own Kafka source
  (``spark-sql-kafka-0-10_2.13``) and the jars it needs beyond PySpark's own, for the
  plain-Spark baseline (:func:`spillway.kafka.spark.configure_spark_kafka`).

:func:`fetch` writes a small pom listing the pinned coordinates into the bundle's folder and runs
``mvn dependency:copy-dependencies`` (Maven's own client, its local repository ``~/.m2``), then
marks the folder complete; a complete folder is never fetched again, so ``make setup`` calls it
every time at no cost. A lock file keeps two concurrent fetches from mixing their jars.

The cache is ``$SPILLWAY_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/spillway``, else
``~/.cache/spillway``.

Spark's connector is pinned at 4.2.0, not 4.3.0: ``spark-sql-kafka-0-10_2.13:4.3.0`` is not on
Maven Central (``mvn dependency:get`` answers "not found"), and 4.2.0, the newest there, reads
our broker from PySpark 4.3.0 in ``tests/kafka/test_spark.py``.

Examples
--------
>>> KAFKA.name
'kafka-4.3.1'
>>> bundle_dir(KAFKA, cache=Path("/tmp/c"))
PosixPath('/tmp/c/kafka-4.3.1')
>>> print(pom_xml(SPARK_KAFKA).splitlines()[0])
<?xml version="1.0" encoding="UTF-8"?>
>>> jars(KAFKA, cache=Path("/nonexistent"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
spillway.errors.BrokerError: Kafka jars (kafka-4.3.1) are not fetched in /nonexistent/...
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from spillway.errors import BrokerError

#: The Apache Kafka release the broker runs (KRaft mode, Java 17+).
KAFKA_VERSION = "4.3.1"
#: Spark's Kafka source: the newest release on Maven Central (4.3.0 is not published there).
SPARK_KAFKA_VERSION = "4.2.0"
#: The maven-dependency-plugin that copies the jars (pinned: Maven 3.8's default is 2.8).
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
#: log4j's binding for the slf4j 1.7 API Kafka logs through (same release as Kafka's log4j-core).
LOG4J_VERSION = "2.25.4"

_DONE = "COMPLETE"


@dataclass(frozen=True, kw_only=True)
class JarBundle:
    """A pinned set of Maven artifacts copied into one folder.

    Parameters
    ----------
    name : folder name under the cache, version included (``kafka-4.3.1``).
    artifacts : ``group:artifact:version`` coordinates; their runtime dependencies come along.
    only : if not empty, keep only these artifact ids (the rest are on PySpark's classpath).
    """

    name: str
    artifacts: tuple[str, ...]
    only: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for a in self.artifacts:
            if len(a.split(":")) != 3 or not all(a.split(":")):
                raise BrokerError(
                    f"jar bundle {self.name!r}: artifact {a!r} must be 'group:artifact:version'"
                )


KAFKA = JarBundle(
    name=f"kafka-{KAFKA_VERSION}",
    artifacts=(
        f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
        f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}",
    ),
)

SPARK_KAFKA = JarBundle(
    name=f"spark-sql-kafka-{SPARK_KAFKA_VERSION}",
    artifacts=(f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_KAFKA_VERSION}",),
    only=(
        "spark-sql-kafka-0-10_2.13",
        "spark-token-provider-kafka-0-10_2.13",
        "kafka-clients",
        "commons-pool2",
    ),
)

#: Every bundle, by the name ``spillway kafka fetch`` prints.
BUNDLES: dict[str, JarBundle] = {"kafka": KAFKA, "spark-kafka": SPARK_KAFKA}


def cache_root() -> Path:
    """The user cache spillway keeps jars in (see the module docstring)."""
    if os.environ.get("SPILLWAY_CACHE_DIR"):
        return Path(os.environ["SPILLWAY_CACHE_DIR"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "spillway"


def bundle_dir(bundle: JarBundle, *, cache: Path | None = None) -> Path:
    """The folder of ``bundle`` under ``cache`` (default :func:`cache_root`)."""
    return (cache if cache is not None else cache_root()) / bundle.name


def pom_xml(bundle: JarBundle) -> str:
    """The pom that lists ``bundle``'s artifacts as dependencies (nothing is built from it)."""
    deps = "\n".join(
        "    <dependency><groupId>{}</groupId><artifactId>{}</artifactId>"
        "<version>{}</version></dependency>".format(*a.split(":"))
        for a in bundle.artifacts
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        f"  <groupId>spillway.jars</groupId><artifactId>{bundle.name}</artifactId>\n"
        "  <version>1</version><packaging>pom</packaging>\n"
        f"  <dependencies>\n{deps}\n  </dependencies>\n"
        "</project>\n"
    )


def jars(bundle: JarBundle, *, cache: Path | None = None) -> list[Path]:
    """The jars of a fetched ``bundle``, sorted.

    Raises
    ------
    BrokerError
        The bundle has not been fetched (or a fetch did not finish).
    """
    folder = bundle_dir(bundle, cache=cache)
    listed = folder / _DONE
    if not listed.is_file():
        raise BrokerError(
            f"Kafka jars ({bundle.name}) are not fetched in {folder}: run 'make setup' or "
            "'spillway kafka fetch' (needs Maven and access to Maven Central)"
        )
    found = [folder / "jars" / n for n in listed.read_text().split()]
    missing = [p.name for p in found if not p.is_file()]
    if missing or not found:
        raise BrokerError(
            f"Kafka jars ({bundle.name}) in {folder} are incomplete (missing {missing[:3]}): "
            f"delete {folder} and run 'spillway kafka fetch' again"
        )
    return found


def is_fetched(bundle: JarBundle, *, cache: Path | None = None) -> bool:
    """Whether :func:`jars` would succeed for ``bundle``."""
    try:
        jars(bundle, cache=cache)
    except BrokerError:
        return False
    return True


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def fetch(bundle: JarBundle, *, cache: Path | None = None, mvn: str = "mvn") -> list[Path]:
    """Fetch ``bundle`` into the cache unless it is there; return its jars.

    Parameters
    ----------
    bundle : what to fetch (:data:`KAFKA`, :data:`SPARK_KAFKA`).
    cache : the cache folder (default :func:`cache_root`).
    mvn : the Maven command.

    Raises
    ------
    BrokerError
        Maven is missing or failed (its last lines are in the message).
    """
    folder = bundle_dir(bundle, cache=cache)
    with _locked(folder):
        if is_fetched(bundle, cache=cache):
            return jars(bundle, cache=cache)
        exe = shutil.which(mvn)
        if exe is None:
            raise BrokerError(
                f"Maven ({mvn!r}) is needed to fetch the Kafka jars and was not found: "
                "install it (Debian/Ubuntu: apt-get install -y maven; macOS: brew install maven)"
            )
        (folder / "pom.xml").write_text(pom_xml(bundle))
        staging = folder / "jars.partial"
        shutil.rmtree(staging, ignore_errors=True)
        cmd = [
            exe,
            "-q",
            "-B",
            "-f",
            str(folder / "pom.xml"),
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ]
        if bundle.only:
            cmd.append("-DincludeArtifactIds=" + ",".join(bundle.only))
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
            raise BrokerError(
                f"fetching {bundle.name} with Maven failed (exit {done.returncode}): {tail}"
            )
        names = sorted(p.name for p in staging.glob("*.jar"))
        if not names:
            raise BrokerError(f"fetching {bundle.name} with Maven copied no jar into {staging}")
        shutil.rmtree(folder / "jars", ignore_errors=True)
        staging.rename(folder / "jars")
        (folder / _DONE).write_text("\n".join(names) + "\n")
    return jars(bundle, cache=cache)
