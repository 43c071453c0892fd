"""The process engine: specs run in worker subprocesses, each ending one RunRecord.

The Runner groups specs by worker, drives each worker's protocol lines (drive.Pool), holds a
worker warm for runs decided one after another (held), times a round's contenders in blocks
(together) or R replicas in one window (replicas), beside a controlled neighbour where a run
asks for one; executors start the workers here (pinned, in a memory cgroup). The floor of
engine/run: it imports nothing of engine.run.cluster, .jobs or .search.
"""

__all__: list[str] = []
