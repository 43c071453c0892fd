"""Alerts that reach people: a group's states updated after its newest sweep, each change
recorded once, and a webhook told of the ones worth sending (a JSON POST, retried, every
attempt recorded). Above store/ and engine/present/, beside engine/run: `watch` and the job
queue call it, nothing below imports it."""
