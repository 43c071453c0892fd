"""A generation sweep as a job (issue 37): its fields and expansion are the kind's
(engine/scenarios/generation/request.py); how it is queued, run and stored is the
Request's, as every sweep's."""

from __future__ import annotations

from dataclasses import dataclass

from engine.run.jobs.requests import Request
from engine.scenarios.generation.request import GenJob

__all__ = ["GenRequest"]


@dataclass(frozen=True)
class GenRequest(GenJob, Request):
    """A generation sweep as a job: one stored sweep of its rounds, every run a row."""
