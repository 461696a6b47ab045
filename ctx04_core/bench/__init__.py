"""Measuring retrieval on real tasks: SWE-bench instances, gold from the patch, metrics.

``ctx04 eval``, ``ctx04 ab`` and ``ctx04 ablate`` (see :mod:`ctx04_core.bench.cli`)
run a system over a dataset, score each instance against the gold regions of
its patch and summarise; spec §7.1 defines the metrics, §7.4 the decision.
"""
