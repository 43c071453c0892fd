"""Viewer mode and admin sign-in: the decisions, the job queue's own refusals, and the pages
through AppTest (no Run page, no write control, a deep link to /run stops)."""

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.access import decide, is_remote, viewer_mode
from engine.run.jobs.queue import JobManager, SessionJobs
from engine.run.jobs.requests import SweepRequest
from engine.core.errors import UserError
from tests.conftest import ROOT, seed_once
from seeds.records import seed_sweep, seed_workloads

APP = str(ROOT / "app.py")
READ_PAGES = ["views/results.py", "views/compare.py", "views/cost.py", "views/system.py",
              "views/training.py", "views/dataload.py"]


def who(**kw):
    base = dict(env={}, settings={}, auth_configured=False, ip_address=None, headers={},
                email=None)
    return decide(**{**base, **kw})


@pytest.mark.parametrize("env, settings, expected", [
    ({}, {}, False),
    ({"BENCH_VIEWER": "1"}, {}, True),
    ({"BENCH_VIEWER": "TRUE"}, {}, True),
    ({"BENCH_VIEWER": "0"}, {"viewer": True}, False),  # the environment wins
    ({"BENCH_VIEWER": ""}, {"viewer": True}, True),  # empty: not set
    ({}, {"viewer": "yes"}, True),
    ({}, {"viewer": "maybe"}, False),
])
def test_viewer_mode_reads_the_environment_then_the_config_key(env, settings, expected):
    assert viewer_mode(env, settings) is expected


@pytest.mark.parametrize("ip, headers, remote", [
    (None, {}, False),  # Streamlit reports a loopback peer as None
    ("127.0.0.1", {}, False),
    ("::1", {}, False),
    ("10.0.0.7", {}, True),
    (None, {"X-Forwarded-For": "203.0.113.9"}, True),  # a reverse proxy on this machine
    (None, {"Forwarded": "for=203.0.113.9"}, True),
    ("not-an-ip", {}, True),
])
def test_a_session_is_local_only_from_loopback_with_no_proxy(ip, headers, remote):
    assert is_remote(ip, headers) is remote


def test_proxy_trust_switches():
    proxied = dict(ip_address=None, headers={"X-Forwarded-For": "203.0.113.9"})
    assert who(**proxied).remote
    # A proxy that signs its users in (Jupyter behind a notebook service's front proxy).
    assert not who(**proxied, env={"BENCH_TRUST_PROXY": "1"}).remote
    assert not who(**proxied, settings={"trust_proxy": True}).remote
    # A proxy that adds no forwarding header: loopback proves nothing.
    assert who(settings={"trust_loopback": False}).remote
    assert who(env={"BENCH_TRUST_LOOPBACK": "no"}).remote
    assert not who(env={"BENCH_TRUST_LOOPBACK": "yes"}, settings={"trust_loopback": False}).remote


def test_who_may_write():
    assert who().can_write  # the person at the machine that started it
    assert not who(env={"BENCH_VIEWER": "1"}).can_write
    remote = dict(ip_address="10.0.0.7")
    assert not who(**remote).can_write and not who(**remote).needs_sign_in
    assert who(**remote, auth_configured=True).needs_sign_in
    signed = who(**remote, auth_configured=True, email="Ann@Example.com",
                 settings={"admins": ["ann@example.com"]})
    assert signed.can_write and signed.admin and signed.email == "ann@example.com"
    # Signed in is authentication, not authorisation: not on the list, no writes.
    other = who(**remote, auth_configured=True, email="bob@example.com",
                settings={"admins": ["ann@example.com"]})
    assert not other.can_write and not other.needs_sign_in
    assert who(**remote, auth_configured=True, email="ann@example.com",
               settings={"admins": "ann@example.com"}).admin  # one admin as a string
    # Viewer mode beats admin.
    assert not who(**remote, env={"BENCH_VIEWER": "1"}, auth_configured=True,
                   email="ann@example.com", settings={"admins": ["ann@example.com"]}).can_write


def request():
    return SweepRequest(models=("identity",), frameworks=("selftest",), batch_sizes=(1,),
                        threads=(1,), image_size=32)


def test_the_queue_refuses_writes_in_viewer_mode_and_for_a_read_only_session(db_path):
    jm = JobManager(db_path, read_only=True)
    with pytest.raises(UserError) as e:
        jm.submit(request())
    assert e.value.field == "sweep"
    with pytest.raises(UserError) as e:
        jm.cancel(1)
    assert e.value.field == "cancel"
    assert jm.active() is None and jm.queued() == [] and jm.history() == []

    writable = JobManager(db_path)
    session = SessionJobs(writable, who(ip_address="10.0.0.7"))
    with pytest.raises(UserError) as e:
        session.submit(request())
    assert e.value.field == "sweep" and writable.queued() == [] and writable.active() is None
    with pytest.raises(UserError):
        session.cancel(1)
    assert session.history() == []  # reads pass through


def viewer_app(db_path, monkeypatch):
    monkeypatch.setenv("BENCH_DB", str(db_path))
    monkeypatch.setenv("BENCH_VIEWER", "1")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_viewer_mode_opens_on_results_with_no_run_page_and_no_write_control(db_path,
                                                                          monkeypatch):
    seed_once(seed_sweep, db_path)
    # training without inference: the page would offer to measure it
    seed_once(seed_workloads, db_path)
    at = viewer_app(db_path, monkeypatch)
    assert at.title[0].value == "Results"
    assert "Viewer mode: read-only" in [c.value.split(" ", 1)[1] for c in at.sidebar.caption
                                        if c.value.startswith(":material/visibility:")]
    for name in READ_PAGES:
        at.switch_page(name)
        at.run()
        assert not at.exception, (name, [e.value for e in at.exception])
        keys = {b.key for b in at.button}
        assert not keys & {"launch", "train_measure_inference", "bs_launch", "tr_launch",
                             "dl_launch"}, name


def test_a_deep_link_to_the_run_page_in_viewer_mode_stops_before_any_control(db_path,
                                                                           monkeypatch):
    """Streamlit serves a fresh server's first deep link through the page file itself."""
    monkeypatch.setenv("BENCH_DB", str(db_path))
    monkeypatch.setenv("BENCH_VIEWER", "1")
    at = AppTest.from_file(str(ROOT / "views/run.py"), default_timeout=60)
    at.run()
    assert not at.exception
    assert len(at.button) == 0 and len(at.multiselect) == 0
    assert at.info[0].value.startswith("viewer mode: this dashboard is read-only")


def test_the_shipped_server_config_keeps_xsrf_on_and_listens_on_loopback_only():
    import tomllib
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["enableXsrfProtection"] is True
    assert cfg["server"]["address"] == "127.0.0.1"
    assert cfg["client"]["showErrorDetails"] is False  # no tracebacks to a viewer
    assert not (ROOT / ".streamlit" / "secrets.toml").exists() or ".streamlit/secrets.toml" in (
        ROOT / ".gitignore").read_text()
