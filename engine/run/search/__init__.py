"""The searches: optimal batch, max Server QPS under a bound, the autotuner and its fleet
form, each a pure function of its probes' answers driven on stored runs, with the dashboard's
jobs that launch them and replay them from the store. The top of engine/run: it may import
engine.run.jobs, .cluster and .process; nothing in engine/run imports it.
"""

__all__: list[str] = []
