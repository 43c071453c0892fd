"""The docs in the dashboard: the sidebar's "Guide to this page" switch and the Docs page.

While the switch is on, the page's guide (docs/pages/<page>.md, the file a reader of the
repository opens) is drawn above the page, so whatever a page shows is explained one click
from where it shows. The switch lives in the router (app.py), so it keeps its state from
page to page, and a guide is drawn only while it is on: a page not asked for its guide draws
exactly what it drew before. The Docs page draws the README or any file of docs/, which is
where a guide's links lead.

The files are listed and read once per server (they change with the checkout, not with the
data); a name from a link or a widget is looked up in that listing, never joined to a path.
engine/present/guide_text.py turns a file into dashboard Markdown.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from engine.core.paths import PROJECT_ROOT
from engine.present.guide_text import (PAGE_GUIDES, doc_name, doc_path, doc_title,
                                       guide_markdown)

__all__ = ["guide_switch", "doc_titles", "draw_doc"]


@st.cache_data(show_spinner=False)
def _docs(root: str) -> dict[str, str]:
    """NAME -> the file's text, for the README and every Markdown file under docs/."""
    base = Path(root)
    files = [base / "README.md", *sorted((base / "docs").rglob("*.md"))]
    return {doc_name(p.relative_to(base).as_posix()): p.read_text(encoding="utf-8")
            for p in files if p.is_file()}


def doc_titles() -> dict[str, str]:
    """NAME -> its title, README first, for the Docs page's picker."""
    return {name: doc_title(text) or doc_path(name) for name, text in
            _docs(str(PROJECT_ROOT)).items()}


def draw_doc(name: str, demote: int = 0) -> None:
    docs = _docs(str(PROJECT_ROOT))
    st.markdown(guide_markdown(docs[name], name, frozenset(docs), demote))


def guide_switch(page: str) -> None:
    """The sidebar switch, and the page's guide above the page while it is on. page: the
    page's url path, which names its guide."""
    if page not in PAGE_GUIDES:  # a page without a guide gets no switch
        return
    if st.sidebar.toggle(":material/menu_book: Guide to this page", key="page_guide",
                         help=f"How this page works ({doc_path('pages/' + page)}), drawn "
                              "above the page; its links open the Docs page"):
        with st.container(border=True):
            draw_doc(f"pages/{page}", demote=2)
