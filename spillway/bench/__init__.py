"""Micro-benchmarks of spillway's pure decision code (no Spark).

- :mod:`spillway.bench.decision`: time per shedding decision of each policy on realistic
  overloaded backlogs (THEMIS §7.6 compares the fair and the random shedder the same way).

Benchmarks read the clock; the code they measure does not.
"""
