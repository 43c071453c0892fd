"""What a CLI command's runs add up to: the "not ok" part of its summary line and its exit
status, so that a CI can trust `python -m engine run` (and train, dataload, batch-search).

Exit statuses, as the regression gate's (`compare --baseline`) are documented beside them:
0 every run is ok; 1 a run is not ok (error, timeout, oom, killed or invalid), or a batch
search failed as below; 2 a usage error (argparse's refusal or a UserError, before anything
ran). A batch search bisects after out-of-memory on purpose, so its oom probes beyond the
largest batch that fits are the search working: it exits 1 only when a probe ended error,
timeout, killed or invalid, or when no batch fitted at all.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from engine.core.record import STATUSES

__all__ = ["EXIT_OK", "EXIT_NOT_OK", "EXIT_USAGE", "not_ok_text", "runs_exit",
           "search_outcome", "split_text"]

EXIT_OK, EXIT_NOT_OK, EXIT_USAGE = 0, 1, 2


def _counts(statuses: Iterable[str]) -> str:
    """'1 error, 1 invalid': the statuses other than ok, in STATUSES order."""
    n = Counter(statuses)
    return ", ".join(f"{n[s]} {s}" for s in STATUSES if s != "ok" and n[s])


def not_ok_text(statuses: Iterable[str]) -> str:
    """'all ok', or '2 not ok: 1 error, 1 invalid' (the summary line's second part)."""
    statuses = list(statuses)
    failed = [s for s in statuses if s != "ok"]
    if not failed:
        return "all ok"
    return f"{len(failed)} not ok: {_counts(failed)}"


def runs_exit(statuses: Iterable[str]) -> int:
    """0 when every run is ok, 1 when any is not."""
    return EXIT_NOT_OK if any(s != "ok" for s in statuses) else EXIT_OK


def search_outcome(statuses: Iterable[str], best_batch: int | None) -> tuple[int, str]:
    """A batch search's exit status and its line. oom probes are expected (the search bisects
    after out-of-memory); any other status but ok fails it, and so does finding no batch
    that fits (every probe, the first included, out of memory)."""
    statuses = list(statuses)
    failed = [s for s in statuses if s not in ("ok", "oom")]
    ooms = statuses.count("oom")
    expected = f"; {ooms} out of memory, as a search expects" if ooms else ""
    if failed:
        return EXIT_NOT_OK, (f"{len(statuses)} probes; {len(failed)} failed: {_counts(failed)}"
                             + expected.replace(", as a search expects", ""))
    if best_batch is None:
        return EXIT_NOT_OK, f"{len(statuses)} probes; no batch fits: every probe ran out of memory"
    return EXIT_OK, f"{len(statuses)} probes; none failed{expected}"


def split_text(split) -> str:
    """Where a sweep's wall time went (engine/analysis/time_split.TimeSplit): 'wall 178 s,
    measuring 79 s (44 %); each worker's own, side by side: import 45 s, build 20 s, ...'."""
    phases = ", ".join(f"{name} {s:.1f} s" for name, s in split.phases if s > 0)
    return (f"wall {split.wall_s:.1f} s over {split.runs} runs, measuring "
            f"{split.measuring_s:.1f} s ({100 * split.measuring_share:.0f} %)"
            + (f"; before it, each worker's own seconds (workers start side by side, so "
               f"these overlap): {phases}" if phases else ""))


def worker_start_text(framework: str, start: str, server_import_s: float | None = None
                      ) -> str:
    """A worker before its Ready: 'tensorflow worker, spawned, importing tensorflow' or
    'torch worker, forked from a server that imported it' (', in 3.9 s, once' when this
    worker waited for that import) ("" start: not said)."""
    what = f"{framework} worker" if framework else "worker"
    waited = f" in {server_import_s:.1f} s, once" if server_import_s is not None else ""
    how = {"spawn": f", spawned, importing {framework}" if framework else ", spawned",
           "fork": f", forked from a server that imported it{waited}"}.get(start, "")
    return what + how


def starting_text(starting) -> str:
    """Workers started and not yet ready, as (framework, start, seconds since) triples
    (the job queue's JobView.starting): 'starting: tensorflow worker, spawned, importing
    tensorflow, 3.2 s; torch worker, forked from a server that imported it, 0.4 s'. What a
    round's workers do before any run of theirs can say a phase."""
    parts = [f"{worker_start_text(fw, start)}, {since:.1f} s" for fw, start, since in starting]
    return "starting: " + "; ".join(parts) if parts else ""
