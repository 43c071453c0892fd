"""Widget values the page does not offer, sent as a crafted rerun message would send them.

The browser only offers a page's options and bounds, but a session can put anything in the
WidgetStates of its rerun BackMsg. These tests build that message: the widget states the
browser would send (AppTest's, which mirror the frontend's), one widget's state replaced by a
crafted one, handed to the script runner as the server hands a BackMsg's
rerun_script.widget_states, so Streamlit's own widget code deserializes it as on a real
server. A foreign value must meet the page's message naming the field and what is allowed,
never an exception, and never a write.
"""

import duckdb
import pytest

from tests.helpers import seed_sweep
from tests.test_pages import FakeManager, page


def crafted(at, kind, key, *, click=None, **value):
    """Rerun with widget `key`'s state replaced by `value` (one WidgetState field:
    string_value, string_array_value, double_value, int_value); click: a button's key
    pressed in the same message."""
    widget = getattr(at, kind)(key=key)
    states = at._tree.get_widget_states()
    (state,) = [w for w in states.widgets if w.id == widget.id]
    state.Clear()
    state.id = widget.id
    for name, v in value.items():
        if name == "string_array_value":
            state.string_array_value.data[:] = v
        else:
            setattr(state, name, v)
    if click:
        (button,) = [w for w in states.widgets if w.id == at.button(key=click).id]
        button.trigger_value = True
    return at._run(states)


def errors(at):
    return [e.value for e in at.error]


def runs_stored(db_path):
    with duckdb.connect(str(db_path), read_only=True) as con:
        return con.execute("SELECT count(*) FROM runs").fetchone()[0]


LONG = "9," * 5000  # 10,000 characters

READ_CASES = [
    ("pages/compare.py", "selectbox", "sweep", dict(string_value="../../etc/passwd"), "sweep"),
    ("pages/compare.py", "multiselect", "models", dict(string_array_value=["vgg"]), "models"),
    ("pages/compare.py", "selectbox", "setting", dict(string_value="zzz"), "setting"),
    ("pages/compare.py", "selectbox", "threads", dict(string_value="abc"), "threads"),
    ("pages/compare.py", "selectbox", "batch", dict(string_value=LONG), "batch"),
    ("pages/compare.py", "radio", "band", dict(string_value="p1-p99"), "band"),
    ("pages/compare.py", "radio", "dist_kind", dict(string_value="strip"), "dist"),
    ("pages/compare.py", "selectbox", "heat_a", dict(string_value="jax"), "a"),
    ("pages/compare.py", "radio", "report_format", dict(string_value="pdf"), "report_format"),
    ("pages/cost.py", "selectbox", "setting", dict(string_value="cpu"), "setting"),
    ("pages/cost.py", "selectbox", "model", dict(string_value="vgg"), "model"),
    ("pages/cost.py", "selectbox", "contender", dict(string_value="jax"), "fw"),
    ("pages/cost.py", "selectbox", "batch", dict(string_value="7"), "batch"),
    ("pages/cost.py", "radio", "machine_mode", dict(string_value="free"), "machine"),
    ("pages/cost.py", "selectbox", "shape", dict(string_value="OCI nope"), "shape"),
    ("pages/cost.py", "selectbox", "b_shape", dict(string_value=LONG), "b_shape"),
    ("pages/history.py", "multiselect", "baseline", dict(string_array_value=["nope"]),
     "baseline"),
    ("pages/history.py", "multiselect", "candidate", dict(string_array_value=[LONG]),
     "candidate"),
    ("pages/history.py", "selectbox", "config", dict(string_value="zzz"), "config"),
]


@pytest.mark.parametrize("name, kind, key, value, field", READ_CASES,
                         ids=[f"{c[0][6:-3]}-{c[2]}" for c in READ_CASES])
def test_a_value_the_page_did_not_offer_gets_its_message(name, kind, key, value, field,
                                                         db_path, monkeypatch):
    seed_sweep(db_path)
    before = runs_stored(db_path)
    at = page(name, db_path, monkeypatch)
    crafted(at, kind, key, **value)
    assert not at.exception, [e.value for e in at.exception]
    (msg,) = errors(at)
    assert msg.startswith(f"{field}: ") and " is not offered; allowed: " in msg, msg
    assert len(msg) < 1000  # an over-long value is shown shortened
    assert runs_stored(db_path) == before
    # The browser's next honest message draws the page again.
    at.run()
    assert not at.exception and errors(at) == []


def test_numbers_outside_the_bounds_fall_back_to_the_default(db_path, monkeypatch):
    """Streamlit itself resets a number outside min..max to the widget's default."""
    seed_sweep(db_path)
    at = page("pages/cost.py", db_path, monkeypatch)
    crafted(at, "number_input", "hours", double_value=1e9)
    assert not at.exception and at.number_input(key="hours").value == 730.0
    at = page("pages/history.py", db_path, monkeypatch)
    crafted(at, "number_input", "threshold", double_value=-5.0)
    assert not at.exception and at.number_input(key="threshold").value == 10.0


RUN_CASES = [
    ("multiselect", "models", dict(string_array_value=["../../etc/passwd"]), "model"),
    ("multiselect", "frameworks", dict(string_array_value=["torch", "jax"]), "framework"),
    ("multiselect", "runtimes", dict(string_array_value=["tensorrt"]), "runtime"),
    ("multiselect", "batch_presets", dict(string_array_value=["3"]), "batch_size"),
    ("multiselect", "threads", dict(string_array_value=["999"]), "threads"),
    ("multiselect", "replicas", dict(string_array_value=["0"]), "replicas"),
    ("selectbox", "precision", dict(string_value="fp8"), "precision"),
    ("radio", "model_source", dict(string_value="a URL"), "source"),
    ("text_input", "batch_free", dict(string_value=LONG), "batch_size"),
    ("text_input", "time_budget", dict(string_value=LONG), "time_budget"),
    ("text_input", "image_size", dict(string_value=LONG), "image_size"),
    # the other forms of the page, each with its own button pressed
    ("selectbox", "bs_model", dict(string_value="vgg"), "model", "bs_launch"),
    ("selectbox", "bs_runtime", dict(string_value="torch/../x"), "runtime", "bs_launch"),
    ("selectbox", "bs_mode", dict(string_value="fastest"), "mode", "bs_launch"),
    ("multiselect", "tr_frameworks", dict(string_array_value=["jax"]), "framework",
     "tr_launch"),
    ("text_input", "tr_batch", dict(string_value=LONG), "batch_size", "tr_launch"),
    ("selectbox", "tr_dataset", dict(string_value="imagenet"), "dataset", "tr_launch"),
    ("multiselect", "dl_formats", dict(string_array_value=["bmp"]), "format", "dl_launch"),
    ("text_input", "dl_workers", dict(string_value=LONG), "workers", "dl_launch"),
]


@pytest.mark.parametrize("case", RUN_CASES, ids=[c[1] for c in RUN_CASES])
def test_the_run_page_launches_nothing_for_a_value_it_did_not_offer(case, db_path,
                                                                    monkeypatch):
    kind, key, value, field, button = (*case, "launch")[:5]
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.get_manager", lambda db, read_only=False: fake)
    at = page("pages/run.py", db_path, monkeypatch)
    crafted(at, kind, key, click=button, **value)  # its button pressed in the same message
    assert not at.exception, [e.value for e in at.exception]
    (msg,) = errors(at)
    assert msg.startswith(f"{field}: ") and " allowed: " in msg, msg
    assert len(msg) < 1000
    assert fake.submitted == [] and not at.success


def test_a_crafted_press_of_a_disabled_launch_button_queues_nothing(db_path, monkeypatch):
    """Streamlit ignores a press of a button it drew disabled."""
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.get_manager", lambda db, read_only=False: fake)
    at = page("pages/run.py", db_path, monkeypatch)
    at.multiselect(key="models").set_value([]).run()
    assert at.button(key="launch").disabled is True
    crafted(at, "multiselect", "models", click="launch", string_array_value=[])
    assert not at.exception, [e.value for e in at.exception]
    assert fake.submitted == [] and not at.success
    assert [e.value for e in at.error] == ["model: pick at least one value"]
    assert at.button(key="launch").disabled is True
