"""The pinned jar bundles: pom, cache layout, fetch and its errors."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from spillway.errors import BrokerError
from spillway.kafka import jars


def test_pom_lists_the_pinned_artifacts() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    for bundle in jars.BUNDLES.values():
        root = ET.fromstring(jars.pom_xml(bundle))
        deps = [
            ":".join(d.find(f"m:{k}", ns).text for k in ("groupId", "artifactId", "version"))  # type: ignore[union-attr]
            for d in root.iterfind("m:dependencies/m:dependency", ns)
        ]
        assert deps == list(bundle.artifacts)
    assert f"org.apache.kafka:kafka_2.13:{jars.KAFKA_VERSION}" in jars.KAFKA.artifacts


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPILLWAY_CACHE_DIR", "/x/cache")
    assert jars.cache_root() == Path("/x/cache")
    monkeypatch.delenv("SPILLWAY_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/y")
    assert jars.cache_root() == Path("/y/spillway")


def test_unfetched_bundle_says_how_to_fetch(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="not fetched .* run 'make setup' or 'spillway kafka"):
        jars.jars(jars.KAFKA, cache=tmp_path)
    assert not jars.is_fetched(jars.KAFKA, cache=tmp_path)


def test_incomplete_bundle_is_reported(tmp_path: Path) -> None:
    folder = jars.bundle_dir(jars.KAFKA, cache=tmp_path)
    (folder / "jars").mkdir(parents=True)
    (folder / "COMPLETE").write_text("a.jar\nb.jar\n")
    (folder / "jars" / "a.jar").write_bytes(b"")
    with pytest.raises(BrokerError, match=r"incomplete \(missing \['b.jar'\]\)"):
        jars.jars(jars.KAFKA, cache=tmp_path)


def test_fetched_bundle_is_not_fetched_again(tmp_path: Path) -> None:
    folder = jars.bundle_dir(jars.SPARK_KAFKA, cache=tmp_path)
    (folder / "jars").mkdir(parents=True)
    (folder / "jars" / "a.jar").write_bytes(b"")
    (folder / "COMPLETE").write_text("a.jar\n")
    # no Maven is called: a missing one would raise
    assert jars.fetch(jars.SPARK_KAFKA, cache=tmp_path, mvn="no-such-mvn") == [
        folder / "jars" / "a.jar"
    ]


def test_fetch_without_maven_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="Maven .* was not found: install it"):
        jars.fetch(jars.KAFKA, cache=tmp_path, mvn="no-such-mvn")


def test_failing_maven_is_reported_with_its_output(tmp_path: Path) -> None:
    fake = tmp_path / "mvn"
    fake.write_text("#!/bin/sh\necho 'Could not resolve dependencies' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(BrokerError, match="failed \\(exit 1\\): Could not resolve"):
        jars.fetch(jars.KAFKA, cache=tmp_path / "c", mvn=str(fake))
    assert not jars.is_fetched(jars.KAFKA, cache=tmp_path / "c")


def test_bad_artifact_is_rejected() -> None:
    with pytest.raises(BrokerError, match="must be 'group:artifact:version'"):
        jars.JarBundle(name="x", artifacts=("org.apache.kafka:kafka_2.13",))


def test_the_pinned_bundles_are_fetched() -> None:
    """``make setup`` fetched them (this suite runs after it): both bundles are complete."""
    assert any(p.name == f"kafka_2.13-{jars.KAFKA_VERSION}.jar" for p in jars.jars(jars.KAFKA))
    names = {p.name for p in jars.jars(jars.SPARK_KAFKA)}
    assert f"spark-sql-kafka-0-10_2.13-{jars.SPARK_KAFKA_VERSION}.jar" in names
