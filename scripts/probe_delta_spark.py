"""Whether a Delta-Spark release runs on the installed PySpark: the check behind
spillway/sinks/delta.py's "Why not Delta-Spark".

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/probe_delta_spark.py [--delta 4.4.0]

Fetches ``io.delta:delta-spark_2.13`` and ``io.delta:delta-storage`` at ``--delta`` from Maven
Central with Maven into spillway's jar cache (spillway/kafka/jars.py; outside the repository),
starts a local session configured as Delta documents (``spark.sql.extensions`` and the
``spark_catalog``), appends one small batch three times with ``txnAppId``/``txnVersion`` 0, 0, 1
and reads the table back with ``format("delta")``. It prints ``OK rows=4`` when Delta skipped the
replayed version 0 (two rows written twice), else the first line of the error. Exit 0 on OK.
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from spillway.kafka.jars import JarBundle, fetch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delta", default="4.4.0", help="the Delta Lake release to try")
    version = ap.parse_args().delta
    bundle = JarBundle(
        name=f"delta-spark-{version}",
        artifacts=(f"io.delta:delta-spark_2.13:{version}",),
        only=("delta-spark_2.13", "delta-storage"),
    )
    jars = fetch(bundle)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("probe-delta")
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    print(f"pyspark {spark.version}, delta {version}: {[j.name for j in jars]}")
    path = tempfile.mkdtemp() + "/table"
    try:
        rows = spark.createDataFrame([(1, 0.5), (2, 0.25)], "k int, sic double")
        for txn in (0, 0, 1):
            rows.write.format("delta").mode("append").option("txnAppId", "probe").option(
                "txnVersion", txn
            ).save(path)
        n = spark.read.format("delta").load(path).count()
    except Exception as e:  # the probe reports what fails, whatever it is
        lines = str(e).strip().splitlines()
        java = [ln.lstrip(": ") for ln in lines if ln.lstrip(": ").startswith("java.")]
        print("FAILED:", (java or lines)[0][:400])
        return 1
    finally:
        spark.stop()
    print(f"OK rows={n}" if n == 4 else f"WRONG rows={n} (expected 4)")
    return 0 if n == 4 else 1


if __name__ == "__main__":
    sys.exit(main())
