#!/bin/sh
# Spark 4 needs Java 17 or newer. Say how to get it when it is missing or too old.
set -u
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then java="$JAVA_HOME/bin/java"; else java=$(command -v java || true); fi
if [ -z "$java" ]; then
  echo "spillway: Java 17+ is needed by Spark and was not found." >&2
  echo "  Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y openjdk-17-jre-headless" >&2
  echo "  macOS:         brew install openjdk@17   (then set JAVA_HOME)" >&2
  exit 1
fi
major=$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)
if [ -z "$major" ] || [ "$major" -lt 17 ]; then
  echo "spillway: Java 17+ is needed by Spark, found version '${major:-unknown}' at $java." >&2
  echo "  Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless, then set JAVA_HOME" >&2
  exit 1
fi
