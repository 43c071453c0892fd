"""Inference's worker body: each run's model built by its runtime's backend and its forward
passes timed (body.run_group).

The kind's Scenario names body as its worker_body; nothing is imported here.
"""

__all__: list[str] = []
