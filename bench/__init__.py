"""Strata's benchmarks: run each from the repository root as ``python -m bench.<name>``.

bench/README.md lists them: the main benchmarks, whose figures docs/benchmarks.md shows, and the helpers
they start (load generators, sinks, moto) or that profile and probe one part alone.
"""
