"""Dashboard entry. Until the dashboard pages land, one page lists the stored runs.

Never imports torch or TensorFlow: only engine workers do.
"""

import streamlit as st

from engine.errors import UserError
from store.db import open_db, resolve_db_path
from store.runs import counts, list_runs


def main() -> None:
    st.set_page_config(page_title="DL benchmark dashboard", layout="wide")
    st.title("Deep-learning inference benchmarks")
    db = resolve_db_path()
    st.caption(f"Database: `{db}`")
    if not db.exists():
        st.info("No results yet. Run a first comparison from a terminal:\n\n"
                "`.venv/bin/python -m engine run --model mobilenet_v3_small "
                "--framework torch tensorflow --batch 1 8 --threads 1`\n\n"
                "then reload this page.")
        return
    try:
        with open_db(db, read_only=True) as con:
            n = counts(con)
            runs = list_runs(con, limit=500)
    except UserError as exc:
        st.error(str(exc))
        return
    cols = st.columns(3)
    cols[0].metric("runs", n["runs"])
    cols[1].metric("raw samples", f"{n['samples']:,}")
    cols[2].metric("machines", n["systems"])
    if runs.empty:
        st.info("The database has no runs yet: start one with `python -m engine run ...`.")
        return
    st.dataframe(runs, hide_index=True, width="stretch")


main()
