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

from seeds.records import seed_sweep
from tests.conftest import seed_once
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
    ("views/compare.py", "selectbox", "sweep", dict(string_value="../../etc/passwd"), "sweep"),
    ("views/compare.py", "multiselect", "models", dict(string_array_value=["vgg"]), "models"),
    ("views/compare.py", "selectbox", "setting", dict(string_value="zzz"), "setting"),
    ("views/compare.py", "selectbox", "threads", dict(string_value="abc"), "threads"),
    ("views/compare.py", "selectbox", "batch", dict(string_value=LONG), "batch"),
    ("views/compare.py", "radio", "band", dict(string_value="p1-p99"), "band"),
    ("views/compare.py", "radio", "dist_kind", dict(string_value="strip"), "dist"),
    ("views/compare.py", "selectbox", "heat_a", dict(string_value="jax"), "a"),
    ("views/compare.py", "radio", "report_format", dict(string_value="pdf"), "report_format"),
    ("views/cost.py", "selectbox", "setting", dict(string_value="cpu"), "setting"),
    ("views/cost.py", "selectbox", "model", dict(string_value="vgg"), "model"),
    ("views/cost.py", "selectbox", "contender", dict(string_value="jax"), "fw"),
    ("views/cost.py", "selectbox", "batch", dict(string_value="7"), "batch"),
    ("views/cost.py", "radio", "machine_mode", dict(string_value="free"), "machine"),
    ("views/cost.py", "selectbox", "shape", dict(string_value="OCI nope"), "shape"),
    ("views/cost.py", "selectbox", "b_shape", dict(string_value=LONG), "b_shape"),
    ("views/history.py", "multiselect", "baseline", dict(string_array_value=["nope"]),
     "baseline"),
    ("views/history.py", "multiselect", "candidate", dict(string_array_value=[LONG]),
     "candidate"),
    ("views/history.py", "selectbox", "config", dict(string_value="zzz"), "config"),
]


@pytest.mark.parametrize("name, kind, key, value, field", READ_CASES,
                         ids=[f"{c[0][6:-3]}-{c[2]}" for c in READ_CASES])
def test_a_value_the_page_did_not_offer_gets_its_message(name, kind, key, value, field,
                                                         db_path, monkeypatch):
    seed_once(seed_sweep, db_path)
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


READ_NUMBER_CASES = [
    ("views/cost.py", "hours", dict(double_value=1e9), "hours: 1000000000 is not allowed; "
                                                       "allowed: number 1..744"),
    ("views/cost.py", "hours", dict(double_value=float("nan")),
     "hours: an empty or non-finite value is not allowed; allowed: number 1..744"),
    ("views/cost.py", "rate", dict(double_value=0.0), "rate: 0 is not allowed; allowed: "
                                                      "number 0.1..1000000000"),
    ("views/history.py", "threshold", dict(double_value=-5.0),
     "threshold: -5 is not allowed; allowed: number 1..100"),
    ("views/history.py", "threshold", dict(double_value=float("inf")),
     "threshold: an empty or non-finite value is not allowed; allowed: number 1..100"),
]


@pytest.mark.parametrize("name, key, value, message", READ_NUMBER_CASES,
                         ids=[f"{c[1]}-{next(iter(c[2].values()))}" for c in READ_NUMBER_CASES])
def test_a_number_outside_its_range_is_named_not_replaced(name, key, value, message, db_path,
                                                          monkeypatch):
    """Streamlit itself would reset a number outside min..max (or NaN) to the widget's
    default, silently: these boxes check their range themselves (dashboard/numbers.py)."""
    seed_once(seed_sweep, db_path)
    at = page(name, db_path, monkeypatch)
    crafted(at, "number_input", key, **value)
    assert not at.exception, [e.value for e in at.exception]
    assert errors(at) == [message]
    at.number_input(key=key).set_value(10.0).run()  # the user's next honest message
    assert not at.exception and errors(at) == []


def test_a_nan_in_the_cost_pages_integer_box_is_named(db_path, monkeypatch):
    """An integer st.number_input would raise on it (int(nan)) before the page runs."""
    seed_once(seed_sweep, db_path)
    at = page("views/cost.py", db_path, monkeypatch)
    at.radio(key="machine_mode").set_value("Enter a price").run()
    crafted(at, "number_input", "custom_vcpus", double_value=float("nan"))
    assert not at.exception, [e.value for e in at.exception]
    assert errors(at) == ["vcpus: an empty or non-finite value is not allowed; allowed: "
                          "integer 1..1024"]


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
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/run.py", db_path, monkeypatch)
    crafted(at, kind, key, click=button, **value)  # its button pressed in the same message
    assert not at.exception, [e.value for e in at.exception]
    (msg,) = errors(at)
    assert msg.startswith(f"{field}: ") and " allowed: " in msg, msg
    assert len(msg) < 1000
    assert fake.submitted == [] and not at.success


def test_a_crafted_press_of_a_disabled_launch_button_queues_nothing(db_path, monkeypatch):
    """Streamlit ignores a press of a button it drew disabled."""
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/run.py", db_path, monkeypatch)
    at.multiselect(key="models").set_value([]).run()
    assert at.button(key="launch").disabled is True
    crafted(at, "multiselect", "models", click="launch", string_array_value=[])
    assert not at.exception, [e.value for e in at.exception]
    assert fake.submitted == [] and not at.success
    assert [e.value for e in at.error] == ["model: pick at least one value"]
    assert at.button(key="launch").disabled is True


NAN, INF = float("nan"), float("inf")
# Every number box of the Run page's forms: (key, field, its launch button, a value outside
# its range, the allowed range as the message spells it, a value inside it).
NUMBER_CASES = [
    ("min_time", "min_time", "launch", -1.0, "number 0..3600", 1.0),
    ("min_iters", "min_iters", "launch", 100_001.0, "integer 1..100000", 10),
    ("warmup", "warmup", "launch", -1.0, "integer 0..10000", 2),
    ("rounds", "rounds", "launch", 1000.0, "integer 1..100", 4),
    ("max_rounds", "max_rounds", "launch", 0.0, "integer 1..100", 8),
    ("margin", "margin", "launch", 51.0, "number 0..50", 3.0),
    ("profile", "profile", "launch", 51.0, "integer 0..50", 0),
    ("bs_p99", "p99_bound_ms", "bs_launch", -5.0, "number 0..3600000", 0.0),
    ("bs_margin", "margin", "bs_launch", 1.5, "number 0..1", 0.05),
    ("bs_max", "max_batch", "bs_launch", 5000.0, "integer 1..4096", 128),
    ("bs_cap", "memory_cap_mb", "bs_launch", -512.0, "integer 0..1048576", 0),
    ("tr_epochs", "epochs", "tr_launch", 1001.0, "integer 1..1000", 2),
    ("tr_steps", "steps_per_epoch", "tr_launch", 1e300, "integer 0..1000000", 0),
    ("tr_lr", "lr", "tr_launch", 11.0, "number 0..10", 0.1),
    ("tr_momentum", "momentum", "tr_launch", 1.0, "number 0..0.999", 0.5),
    ("tr_profile", "profile_steps", "tr_launch", 51.0, "integer 0..50", 0),
    ("dl_count", "count", "dl_launch", 7.0, "integer 8..100000", 64),
    ("dl_size", "image_size", "dl_launch", 4097.0, "integer 16..4096", 64),
]


def _crafted_number(db_path, monkeypatch, key, button, **value):
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/run.py", db_path, monkeypatch)
    crafted(at, "number_input", key, click=button, **value)  # pressed in the same message
    assert not at.exception, [e.value for e in at.exception]
    return at, fake


@pytest.mark.parametrize("key, field, button, value, allowed, ok", NUMBER_CASES,
                         ids=[c[0] for c in NUMBER_CASES])
@pytest.mark.parametrize("sent", ["outside", "nan"])
def test_the_run_page_launches_nothing_for_a_number_outside_its_range(
        key, field, button, value, allowed, ok, sent, db_path, monkeypatch):
    """Streamlit would put the box's default in place of the number (see above) and the press
    would launch with it; the form refuses instead, naming the field and the range."""
    at, fake = _crafted_number(db_path, monkeypatch, key, button,
                               double_value=NAN if sent == "nan" else value)
    shown = ("an empty or non-finite value" if sent == "nan"
             else f"{value:g}" if value > 1e15 else f"{value:.10g}")
    assert errors(at) == [f"{field}: {shown} is not allowed; allowed: {allowed}"]
    assert fake.submitted == [] and not at.success
    assert at.button(key=button).disabled is True
    # The user's next honest message, the box set inside its range, launches again.
    at.number_input(key=key).set_value(ok).run()
    assert not at.exception and errors(at) == []
    at.button(key=button).click().run()
    assert len(fake.submitted) == 1 and at.success


@pytest.mark.parametrize("key, button, value", [
    ("rounds", "launch", dict(double_value=INF)),
    ("margin", "launch", dict(double_value=-INF)),
    ("rounds", "launch", dict(double_value=2.5)),       # a fraction in an integer box
    ("bs_max", "bs_launch", dict(int_value=2**40)),
    ("tr_epochs", "tr_launch", dict(int_value=-3)),
])
def test_infinite_fractional_and_huge_numbers_launch_nothing(key, button, value, db_path,
                                                             monkeypatch):
    at, fake = _crafted_number(db_path, monkeypatch, key, button, **value)
    (msg,) = errors(at)
    assert " is not allowed; allowed: " in msg and len(msg) < 200, msg
    assert fake.submitted == [] and not at.success


@pytest.mark.parametrize("key, button, value, field, expected", [
    ("rounds", "launch", dict(double_value=5.0), "rounds", 5),
    ("dl_count", "dl_launch", dict(int_value=64), "count", 64),
])
def test_a_number_in_range_sent_with_the_press_is_launched(key, button, value, field,
                                                          expected, db_path, monkeypatch):
    """The control: the crafted message does carry the number to the form."""
    at, fake = _crafted_number(db_path, monkeypatch, key, button, **value)
    assert errors(at) == [] and [getattr(r, field) for r in fake.submitted] == [expected]


def test_an_emptied_number_box_is_named_and_refused(db_path, monkeypatch):
    """The boxes have no Streamlit default: an honest user who empties one is told so."""
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/run.py", db_path, monkeypatch)
    at.number_input(key="tr_epochs").set_value(None).run()
    assert errors(at) == ["epochs: an empty or non-finite value is not allowed; allowed: "
                          "integer 1..1000"]
    assert at.button(key="tr_launch").disabled is True
    at.number_input(key="tr_epochs").set_value(2).run()
    assert errors(at) == [] and at.button(key="tr_launch").disabled is False


# The Deploy page (a serving test, issue 27): every choice and number box of its form, sent
# with its Launch pressed in the same message; and its read-side choices over stored tests.
DEPLOY_CASES = [
    ("selectbox", "sv_model", dict(string_value="vgg"), "model"),
    ("selectbox", "sv_runtime", dict(string_value="torch/../x"), "runtime"),
    ("selectbox", "sv_threads", dict(string_value="999"), "threads"),
    ("radio", "sv_scenario", dict(string_value="burst"), "scenario"),
    ("radio", "sv_duration", dict(string_value="forever"), "duration"),
    ("radio", "model_source", dict(string_value="a URL"), "source"),
    ("text_input", "sv_image_size", dict(string_value=LONG), "image_size"),
]


@pytest.mark.parametrize("kind, key, value, field", DEPLOY_CASES,
                         ids=[c[1] for c in DEPLOY_CASES])
def test_the_deploy_page_launches_nothing_for_a_value_it_did_not_offer(kind, key, value, field,
                                                                       db_path, monkeypatch):
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/deploy.py", db_path, monkeypatch)
    crafted(at, kind, key, click="sv_launch", **value)
    assert not at.exception, [e.value for e in at.exception]
    (msg,) = errors(at)
    assert msg.startswith(f"{field}: ") and " allowed: " in msg and len(msg) < 1000, msg
    assert fake.submitted == [] and not at.success
    at.run()  # the next message draws the form again (a text box keeps what it holds)
    assert not at.exception and all(e.startswith(f"{field}: ") for e in errors(at))
    assert fake.submitted == []


DEPLOY_NUMBERS = [  # (scenario, key, field, outside, allowed, inside, its launch button)
    ("single-stream", "sv_bound", "bound_ms", 0.0, "number 0.001..600000", 5.0),
    ("server", "sv_qps", "target_qps", -3.0, "number 0.001..10000000", 50.0),
    ("server", "sv_max_batch", "max_batch", 257.0, "integer 1..256", 4),
    ("server", "sv_max_wait", "max_wait_ms", 1e5, "number 0..10000", 1.0),
    ("single-stream", "sv_min_queries", "min_query_count", 0.0, "integer 1..100000000", 10),
    # the searches' bracket precision and probe limit, each with a search's button pressed
    ("server", "sv_qps_precision", "qps_precision", 0.9, "number 0.005..0.5", 0.1,
     "sv_maxqps_launch"),
    ("server", "sv_qps_precision", "qps_precision", 0.0, "number 0.005..0.5", 0.01,
     "sv_tune_launch"),
    ("server", "sv_qps_probes", "max_probes", 41.0, "integer 2..40", 8, "sv_maxqps_launch"),
    ("server", "sv_qps_probes", "max_probes", 1.0, "integer 2..40", 2, "sv_tune_launch"),
    # every probe's query count: under early stopping's 459 (but 0: automatic), negative,
    # or a fraction
    ("server", "sv_search_queries", "search_queries", 458.0,
     "0 (automatic) or integer 459..1000000", 5000, "sv_maxqps_launch"),
    ("server", "sv_search_queries", "search_queries", -1.0,
     "0 (automatic) or integer 459..1000000", 459, "sv_maxqps_launch"),
    ("server", "sv_search_queries", "search_queries", 999.5,
     "0 (automatic) or integer 459..1000000", 459, "sv_tune_launch"),
]


@pytest.mark.parametrize("case", DEPLOY_NUMBERS,
                         ids=[f"{c[1]}-{(*c, 'sv_launch')[6]}" for c in DEPLOY_NUMBERS])
@pytest.mark.parametrize("sent", ["outside", "nan"])
def test_the_deploy_page_launches_nothing_for_a_number_outside_its_range(case, sent, db_path,
                                                                        monkeypatch):
    scenario, key, field, value, allowed, ok, button = (*case, "sv_launch")[:7]
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/deploy.py", db_path, monkeypatch)
    at.radio(key="sv_scenario").set_value(scenario).run()
    crafted(at, "number_input", key, click=button,
            double_value=NAN if sent == "nan" else value)
    assert not at.exception, [e.value for e in at.exception]
    shown = "an empty or non-finite value" if sent == "nan" else f"{value:.10g}"
    assert errors(at) == [f"{field}: {shown} is not allowed; allowed: {allowed}"]
    assert fake.submitted == [] and not at.success
    assert at.button(key=button).disabled is True
    at.number_input(key=key).set_value(ok).run()
    assert not at.exception and errors(at) == []
    at.button(key=button).click().run()
    assert len(fake.submitted) == 1 and at.success
    if button != "sv_launch":  # a search: the value reaches its request
        assert getattr(fake.submitted[0], field) == ok


@pytest.mark.parametrize("kind, key, value, field", [
    ("selectbox", "sv_run", dict(string_value="../../etc/passwd"), "run"),
    ("radio", "sv_report_format", dict(string_value="pdf"), "report_format"),
])
def test_the_deploy_pages_read_side_refuses_a_value_it_did_not_offer(kind, key, value, field,
                                                                     db_path, monkeypatch):
    from tests.serving_seed import seed_serving

    seed_serving(db_path)
    at = page("views/deploy.py", db_path, monkeypatch)
    crafted(at, kind, key, **value)
    assert not at.exception, [e.value for e in at.exception]
    (msg,) = errors(at)
    assert msg.startswith(f"{field}: ") and " is not offered; allowed: " in msg, msg
    at.run()
    assert not at.exception and [e.value for e in at.error if "INVALID" not in e.value] == []
