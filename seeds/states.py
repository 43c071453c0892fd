"""A group of daily sweeps with a state of each kind a board shows first: resnet18 (torch)
30 % slower in the last two sweeps (regression, an alert), mobilenet_v3_small steady (no
change), resnet18 on tensorflow measured in every sweep but the newest (missing, an alert).
Fixed rows through the real store functions, and the group's states updated once, as
`python -m engine watch` would leave them; for the History page's tests."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from seeds.records import SYSTEM, ok_record

__all__ = ["seed_group", "GROUP", "DAYS"]

GROUP = "nightly cpu"
DAYS = 8
# The day-to-day spread of an unchanged build, per day (about 1 %).
SPREAD = (1.00, 1.01, 0.99, 1.005, 0.995, 1.0, 1.01, 0.99)


def seed_group(db_path, group: str = GROUP) -> None:
    from engine.alerts.update import update_states
    from store.db import open_db
    from store.runs import save_record, save_sweep
    from store.states import join_group

    with open_db(db_path) as con:
        for d in range(DAYS):
            sid = f"sweep-{d:02d}"
            save_sweep(con, sid, rounds=3, seed=d, plan=[], configurations=3)
            configs = [("resnet18", "torch", 2.0 * (1.3 if d >= DAYS - 2 else 1.0)),
                       ("mobilenet_v3_small", "torch", 4.0)]
            if d < DAYS - 1:
                configs.append(("resnet18", "tensorflow", 3.0))
            for model, fw, ms in configs:
                for r in (1, 2, 3):
                    ns = int(ms * SPREAD[d] * (1 + 0.002 * r) * 1e6)
                    rec = ok_record(f"{sid}-{model}-{fw}-{r}", samples=(ns, ns, ns),
                                    model=model, framework=fw)
                    save_record(con, replace(rec, sweep_id=sid, round_no=r), SYSTEM)
            join_group(con, group, sid, source="http://127.0.0.1:8501/run?model=resnet18")
    at = datetime(2026, 3, 1, 9, 0)
    update_states(db_path, group, clock=lambda: at + timedelta(minutes=1))
