"""Benchmarks of spillway: the decision path alone, and the shedder on Spark.

- :mod:`spillway.bench.decision`: time per shedding decision of each policy on realistic
  overloaded backlogs (THEMIS §7.6 compares the fair and the random shedder the same way).
- :mod:`spillway.bench.spark_bench`: source throughput against Spark's ``rate`` source, and
  latency and utilisation under overload with and without shedding (starts Spark).
- :mod:`spillway.bench.command`: the ``BENCHMARKS`` registry and the report folder
  ``spillway bench`` writes.

Benchmarks read the clock; the code they measure does not.
"""
