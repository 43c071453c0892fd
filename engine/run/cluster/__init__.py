"""The Ray cluster as one executor: a NodeHost actor per node starts the same worker
subprocess there (ray_cluster, node_host), a fleet runs every round on each node kind at once
(fleet), and join gives a job its runner on the nodes it names. Imports engine.run.process
only, never engine.run.jobs or .search.
"""

__all__: list[str] = []
