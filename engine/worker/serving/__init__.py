"""Serving's worker body: one MLPerf LoadGen test against a warm model (body.run_group), the
model it answers with (model) and the replica processes behind its queue (replica).

The kind's Scenario names body as its worker_body; nothing is imported here.
"""

__all__: list[str] = []
