"""Dashboard entry: the router. Pages render; logic lives in engine/ and store/.

Never imports torch or TensorFlow: only engine workers do (tests/test_layout.py checks the
imports, and the browser tests the server's memory maps).
"""

import streamlit as st

from store.db import resolve_db_path


def run() -> None:
    st.set_page_config(page_title="DL benchmark dashboard", page_icon=":material/speed:",
                       layout="wide")
    pages = [
        st.Page("pages/run.py", title="Run", icon=":material/play_arrow:", url_path="run",
                default=True),
        st.Page("pages/results.py", title="Results", icon=":material/table:",
                url_path="results"),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:",
                url_path="compare"),
        st.Page("pages/training.py", title="Training", icon=":material/model_training:",
                url_path="training"),
        st.Page("pages/dataload.py", title="Data loading", icon=":material/photo_library:",
                url_path="dataload"),
        st.Page("pages/cost.py", title="Cost", icon=":material/payments:", url_path="cost"),
        st.Page("pages/system.py", title="System", icon=":material/memory:",
                url_path="system"),
    ]
    nav = st.navigation(pages)
    st.sidebar.caption(f"Database: `{resolve_db_path()}`")
    nav.run()


run()
