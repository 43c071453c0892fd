"""Every view is a link: link values are parsed against what a page offers (never used as
a name of anything else), refused ones are named with what is allowed, and each page writes
its selection back to the address."""

import pytest

from engine.present.links import (encode_setting, looks_like_path, parse_choice,
                                  parse_choices, parse_integers, parse_number)
from seeds.records import seed_sweep, seed_workloads
from tests.conftest import seed_once
from tests.test_pages import opened_from_link, page


@pytest.mark.parametrize("raw", ["../x", "/etc/passwd", "a\\b", "~root", "x\x00y", ".."])
def test_a_value_that_looks_like_a_path_is_refused_before_any_prefix_match(raw):
    assert looks_like_path(raw)
    value, note = parse_choice("sweep", raw, {raw + "-sweep": "a prefix match"}, prefix_ok=True)
    assert value is None and "a name, not a path" in note and note.startswith("link: sweep=")
    # Only a value equal to one the page offers passes as it is (shape names hold a "/").
    assert parse_choice("shape", raw, {raw: "its own value"}) == ("its own value", None)


def test_choices_numbers_and_lengths():
    opts = {"resnet18": "R", "mobilenet_v3_small": "M"}
    assert parse_choice("model", "resnet18", opts) == ("R", None)
    assert parse_choice("model", None, opts) == (None, None)
    value, note = parse_choice("model", "vgg", opts)
    # Markdown-escaped: the page renders it (an underscore shows as one).
    assert value is None and note.endswith("allowed: one of resnet18, mobilenet\\_v3\\_small; "
                                           "ignored")
    assert parse_choice("sweep", "abcd", {"abcdef12": 1, "ffff": 2}, prefix_ok=True) == (1, None)
    assert parse_choice("sweep", "abc", {"abcdef12": 1}, prefix_ok=True)[0] is None  # too short
    assert parse_choices("model", "mobilenet_v3_small,vgg,resnet18,resnet18", opts)[0] == [
        "M", "R"]
    assert "'vgg'" in parse_choices("model", "mobilenet_v3_small,vgg", opts)[1]
    assert parse_choices("model", "vgg", opts)[0] is None
    long = "r" * 201
    assert "at most 200 characters" in parse_choice("model", long, {long: 1})[1]
    assert parse_number("hours", "730", 1, 744) == (730.0, None)
    assert parse_number("vcpus", "16", 1, 1024, integer=True) == (16, None)
    for bad in ("abc", "inf", "nan", "1e99", "0", "745", "1.5"):
        value, note = parse_number("hours" if bad != "1.5" else "vcpus", bad, 1, 744,
                                   integer=bad == "1.5")
        assert value is None and ("number 1..744" in note or "integer 1..744" in note), bad
    assert encode_setting(("cpu", "fp32", None, "sys-1")) == "cpu_fp32__sys-1"
    # a quiet setting's link is as before neighbours were a setting; a neighbour's says so
    assert encode_setting(("cpu", "fp32", 1, "sys-1", "", "none")) == "cpu_fp32_1_sys-1"
    assert encode_setting(("cpu", "fp32", 1, "sys-1", "", "steady")) == "cpu_fp32_1_sys-1_steady"
    assert not looks_like_path(encode_setting(("cpu", "fp32", None, None)))


def test_integer_lists_keep_the_usable_values_and_name_each_refused_one():
    assert parse_integers("batch", None, 1, 4096) == (None, [])
    assert parse_integers("batch", "8, 1,8", 1, 4096) == ([8, 1], [])
    assert parse_integers("threads", "abc,2,0", 1, 4) == ([2], [
        "link: threads='abc' is not allowed; allowed: integer 1..4; ignored",
        "link: threads='0' is not allowed; allowed: integer 1..4; ignored"])
    assert parse_integers("replicas", "9", 1, 4)[0] is None  # nothing usable: the default
    values, notes = parse_integers("batch", "1," * 150, 1, 4096)
    assert values == [1] and notes == [
        "link: batch='1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1...' is not allowed; allowed: at "
        "most 200 characters; ignored"]


def test_the_run_page_writes_what_differs_from_its_defaults_and_its_link_reopens_it(
        db_path, monkeypatch):
    at = opened_from_link(db_path, monkeypatch, {
        "model": "resnet18", "batch": "3,8", "threads": "1", "rounds": "5", "margin": "5",
        "contention": "1", "image_size": "64", "time_budget": "900", "min_time": "0.5"})
    assert (at.multiselect(key="batch_presets").value, at.text_input(key="batch_free").value,
            at.number_input(key="rounds").value, at.text_input(key="time_budget").value) == (
        [8], "3", 5, "900")
    written = {"model": "resnet18", "batch": "3,8", "threads": "1", "min_time": "0.5",
               "rounds": "5", "margin": "5", "image_size": "64", "time_budget": "900",
               "contention": "1"}
    assert dict(at.query_params) == written
    assert at.code[0].value.endswith("?model=resnet18&batch=3%2C8&threads=1&min_time=0.5&"
                                     "rounds=5&margin=5&image_size=64&time_budget=900&"
                                     "contention=1")
    # The user's later change wins over the link it was opened with; back at the defaults,
    # the address names nothing.
    at.number_input(key="rounds").set_value(4).run()
    assert dict(at.query_params) == {**written, "rounds": "4"} and not at.warning
    for kind, key, value in (("multiselect", "models", ["efficientnet_b0"]),
                             ("multiselect", "batch_presets", [1, 8]),
                             ("text_input", "batch_free", ""), ("number_input", "rounds", 3),
                             ("number_input", "margin", 2.0), ("number_input", "min_time", 2.0),
                             ("checkbox", "contention", False), ("text_input", "image_size", ""),
                             ("text_input", "time_budget", "")):
        getattr(at, kind)(key=key).set_value(value)
    threads = at.multiselect(key="threads")
    threads.set_value([len(threads.options)]).run()
    assert dict(at.query_params) == {}


def test_a_rerun_carrying_an_older_address_of_the_page_keeps_what_the_user_typed(
        db_path, monkeypatch):
    """A rerun can carry the address of the render before last (the browser had not yet
    shown the newest when the user changed the next widget): that address is the page's
    own, not a link opened, so the widgets keep what the user set since."""
    at = opened_from_link(db_path, monkeypatch, {"model": "resnet18", "rounds": "5"})
    older = dict(at.query_params)
    at.number_input(key="rounds").set_value(4).run()
    at.number_input(key="margin").set_value(3.0).run()
    assert dict(at.query_params) == {**older, "rounds": "4", "margin": "3"}
    at.query_params.clear()
    at.query_params.update(older)  # the stale address: rounds=5, no margin
    at.run()
    assert (at.number_input(key="rounds").value, at.number_input(key="margin").value) == (
        4, 3.0)
    assert dict(at.query_params) == {**older, "rounds": "4", "margin": "3"}


def test_a_compare_link_reopens_the_view_and_the_page_writes_its_selection(db_path,
                                                                          monkeypatch):
    seed_once(seed_sweep, db_path)
    at = page("views/compare.py", db_path, monkeypatch, {
        "sweep": "sweep-se", "models": "mobilenet_v3_small", "threads": "1", "batch": "8",
        "band": "IQR", "dist": "violin"})
    assert [w.value for w in at.warning] == []
    assert at.selectbox(key="sweep").value == "sweep-seeded"
    assert (at.selectbox(key="threads").value, at.selectbox(key="batch").value) == (1, 8)
    assert at.radio(key="band").value == "IQR (p25-p75)"
    assert at.radio(key="dist_kind").value == "violin"
    q = dict(at.query_params)
    assert (q["sweep"], q["threads"], q["batch"], q["band"], q["dist"], q["setting"]) == (
        "sweep-seeded", "1", "8", "IQR", "violin", "cpu_fp32_1_sys-test-0001")
    # The user's later change wins over the link it was opened with.
    at.selectbox(key="batch").set_value(1).run()
    assert at.query_params["batch"] == "1" and at.selectbox(key="batch").value == 1
    assert at.code[0].value.endswith("band=IQR&dist=violin&a=tensorflow+%28tf_function%29"
                                     "&b=torch+%28eager%29&heat_model=mobilenet_v3_small")


@pytest.mark.parametrize("name, query, refused", [
    ("views/run.py", {"model": "../../etc/passwd", "framework": "torch,jax", "batch": "abc,8",
                      "threads": "999"}, ["batch", "model", "framework", "threads"]),
    ("views/compare.py", {"sweep": "../../etc/passwd", "models": "x" * 300, "threads": "abc",
                          "setting": "zzz", "a": "<script>"},
     ["sweep", "models", "setting", "threads", "a"]),
    ("views/results.py", {"model": "vgg", "status": "ok,bogus", "run": "../../etc/passwd"},
     ["run", "model", "status"]),
    ("views/cost.py", {"hours": "inf", "rate": "-3", "shape": "nope", "model": "/tmp/x",
                       "machine": "free"},
     ["hours", "model", "machine", "shape", "rate"]),
    ("views/training.py", {"sweep": "zzzz", "setting": "..", "shape": "big",
                           "study_batch": "-1"},
     ["sweep", "setting", "study_batch", "shape"]),
    ("views/dataload.py", {"sweep": "zzzz", "format": "bmp", "show": "fps"},
     ["sweep", "format", "show"]),
])
def test_a_bad_link_value_is_named_and_ignored_never_an_exception(name, query, refused,
                                                                   db_path, monkeypatch):
    seed_once(seed_sweep, db_path)
    seed_once(seed_workloads, db_path)
    at = page(name, db_path, monkeypatch, query)
    notes = [w.value for w in at.warning if w.value.startswith("link: ")]
    assert [n.split("=", 1)[0].removeprefix("link: ") for n in notes] == refused
    assert all(n.endswith("; ignored") and "allowed: " in n for n in notes)


def test_values_the_page_offers_reopen_even_with_a_slash_or_as_all(db_path, monkeypatch):
    """Catalog shape names hold a '/', and ?sweep=all names the option None: both are the
    page's own values and reopen the same view."""
    seed_once(seed_sweep, db_path)
    shape = "OCI VM.Standard.E3.Flex 16 OCPU/32 GB"
    at = page("views/cost.py", db_path, monkeypatch, {"shape": shape})
    assert [w.value for w in at.warning if w.value.startswith("link: ")] == []
    assert at.selectbox(key="shape").value == shape and at.query_params["shape"] == shape
    at = page("views/compare.py", db_path, monkeypatch, {"sweep": "all"})
    assert at.selectbox(key="sweep").value is None and at.query_params["sweep"] == "all"


def test_a_link_value_cannot_put_a_link_on_our_page(db_path, monkeypatch):
    at = page("views/run.py", db_path, monkeypatch,
                   {"rounds": "[Sign in](https://evil.example)"})
    (msg,) = [w.value for w in at.warning if w.value.startswith("link: ")]
    assert msg.startswith("link: rounds='\\[Sign in\\]\\(https\\://evil.example\\)' is not")


def test_a_widget_value_the_page_did_not_offer_is_named_with_what_is_allowed():
    from engine.present.links import not_offered
    assert not_offered("threads", [1, 2], (1, 2, 3)) is None
    assert not_offered("threads", [1, "999"], (1, 2), ("1", "2")) == (
        "threads: '999' is not offered; allowed: one of 1, 2")
    assert not_offered("model", "x" * 300, ("resnet18",), ("resnet18",)) == (
        "model: '" + "x" * 37 + "...' is not offered; allowed: one of resnet18")
    assert not_offered("batch_size", "9," * 150, None, max_len=200) == (
        "batch_size: 300 characters is too long; allowed: at most 200 characters")
    assert not_offered("sweep", None, (None, "s1"), ("all", "s1")) is None  # ?sweep=all
    assert not_offered("model", "m_1", (), ()) == (
        "model: 'm\\_1' is not offered; allowed: nothing here yet")
