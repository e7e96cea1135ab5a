"""Benchmarks shipped with the package (the ``constrained bench`` command):

* `constrained.bench.jsonschemabench`: JSONSchemaBench with a model — coverage,
  compliance, grammar compile time, time per output token, constrained vs not;
* `constrained.bench.maskbench`: the MaskBench protocol (no model): time to first
  mask, time between masks, and every valid/invalid instance decided right;
* `constrained.bench.test_suite`: JSON Schema Test Suite compliance per keyword;
* `constrained.bench.datasets`: loaders for MaskBench and JSONSchemaBench files.
"""
