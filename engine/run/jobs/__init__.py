"""The jobs a user asks for: requests that expand into specs, the one sweep driver and its
round orders, the dashboard's job queue, a sweep's time estimate and a calibration job.
Imports engine.run.process and engine.run.cluster, never engine.run.search.
"""

__all__: list[str] = []
