"""Serving a language model as a job (issue 38): its fields and expansion are the kind's
(engine/scenarios/genserve/request.py); how it is queued, run and stored is the Request's."""

from __future__ import annotations

from dataclasses import dataclass

from engine.run.jobs.requests import Request
from engine.scenarios.genserve.request import GenServeJob

__all__ = ["GenServeRequest"]


@dataclass(frozen=True)
class GenServeRequest(GenServeJob, Request):
    """Serving tests of a language model as a job: one stored sweep, every test a row."""
