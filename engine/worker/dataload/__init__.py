"""Data loading's worker body: generated image sets read, decoded and normalised into
batches, timed (body.run_group, load_loop, images).

The kind's Scenario names body as its worker_body; nothing is imported here.
"""

__all__: list[str] = []
