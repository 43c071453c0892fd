"""Dashboard entry: the router. Pages render; logic lives in engine/ and store/.

Never imports torch or TensorFlow: only engine workers do (tests/test_layout.py checks the
imports, and the browser tests the server's memory maps).
"""

import streamlit as st

from dashboard.guide import guide_switch
from dashboard.session import access
from store.db import resolve_db_path


def run() -> None:
    st.set_page_config(page_title="DL benchmark dashboard", page_icon=":material/speed:",
                       layout="wide")
    who = access()
    pages = [
        # Viewer mode has no Run page at all: nothing there can be used read-only.
        *([] if who.viewer else [
            st.Page("views/run.py", title="Run", icon=":material/play_arrow:", url_path="run",
                    default=True)]),
        st.Page("views/results.py", title="Results", icon=":material/table:",
                url_path="results", default=who.viewer),
        st.Page("views/compare.py", title="Compare", icon=":material/compare_arrows:",
                url_path="compare"),
        st.Page("views/history.py", title="History", icon=":material/history:",
                url_path="history"),
        st.Page("views/training.py", title="Training", icon=":material/model_training:",
                url_path="training"),
        st.Page("views/dataload.py", title="Data loading", icon=":material/photo_library:",
                url_path="dataload"),
        st.Page("views/deploy.py", title="Deploy", icon=":material/rocket_launch:",
                url_path="deploy"),
        st.Page("views/cost.py", title="Cost", icon=":material/payments:", url_path="cost"),
        st.Page("views/system.py", title="System", icon=":material/memory:",
                url_path="system"),
        # The README and docs/ in the browser: where the pages' guides link to.
        st.Page("views/docs.py", title="Docs", icon=":material/menu_book:", url_path="docs"),
    ]
    nav = st.navigation(pages)
    st.sidebar.caption(f"Database: `{resolve_db_path()}`")
    sign_in(who)
    # A page's url path names its guide, docs/pages/<url path>.md; Streamlit gives the
    # default page's as "" (it is served at /).
    guide_switch(nav.url_path or ("results" if who.viewer else "run"))
    nav.run()


def sign_in(who) -> None:
    """The sidebar's access line: viewer mode, or who is signed in, with the sign-in and
    sign-out buttons when [auth] is configured and the session comes from elsewhere."""
    if who.viewer:
        st.sidebar.caption(":material/visibility: Viewer mode: read-only")
        return
    if who.needs_sign_in:
        st.sidebar.caption("Read-only until you sign in (launching needs an admin).")
        if st.sidebar.button("Sign in", key="sign_in"):
            st.login()
    elif who.email:
        st.sidebar.caption(f"Signed in as {who.email}" + ("" if who.admin else " (read-only)"))
        if st.sidebar.button("Sign out", key="sign_out"):
            st.logout()
    elif not who.can_write:
        st.sidebar.caption(f"Read-only: {who.why_read_only()}")


run()
