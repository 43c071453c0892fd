"""Training's worker body: one trainer per runtime, each run trained and scored (body.run_group,
train_loop), fed by datasets.

The kind's Scenario names body as its worker_body; nothing is imported here.
"""

__all__: list[str] = []
