"""The report's board section: a group's every configuration's state, worst first, with
the policy stated once, as the History page's board shows it (engine/present/board.py's
rows), for `report --group` and the Compare page's report. Read here, written down by
engine/present/report_doc.py, which escapes every string."""

from __future__ import annotations

from dataclasses import dataclass

from engine.analysis.states import StatePolicy
from engine.present.board import board_frame
from engine.present.states_text import policy_text
from store.states import group_policy, group_states, group_sweep_ids

__all__ = ["BoardData", "BOARD_HEADERS", "gather_board"]

BOARD_HEADERS = ("state", "configuration", "since sweep", "ratio", "95 % CI", "evidence",
                 "mark")


@dataclass(frozen=True)
class BoardData:
    group: str
    policy: str  # the policy in words, stated once above the rows
    rows: tuple[tuple[str, ...], ...]  # BOARD_HEADERS' cells, worst first
    caption: str


def gather_board(con, group: str) -> BoardData:
    """The group's board as of its newest sweep, judged by the policy its last update used
    (store.states.group_policy), else the default; UserError naming the groups there are
    when it has no sweeps."""
    policy = group_policy(con, group) or StatePolicy()
    states = group_states(con, group, policy)  # worst first
    frame = board_frame(states)
    rows = tuple((state, label, since, "" if ratio is None or ratio != ratio
                  else f"{ratio:.3f}x", ci, evidence, mark)
                 for state, label, since, ratio, ci, evidence, mark
                 in frame.itertuples(index=False, name=None))
    ids = group_sweep_ids(con, group)
    return BoardData(group, policy_text(policy), rows,
                     f"{len(states)} configurations as of sweep {ids[-1]}, the newest of "
                     f"{len(ids)} in group {group}; worst first, acknowledged and ignored "
                     "ones after the rest.")
