"""Docs: the README and every file of docs/, one at a time, so the guides' links lead
somewhere in a browser, a viewer's included (no checkout needed)."""

import streamlit as st

from dashboard.guide import doc_titles, draw_doc
from dashboard.link_state import PageLink

link = PageLink("docs")
titles = doc_titles()
names = list(titles)
link.choice("doc", "doc", names)
name = st.selectbox("Document", names, format_func=lambda n: f"{titles[n]} ({n})", key="doc",
                    **link.initial("doc"))
link.put("doc", name, default=names[0])
link.finish()
draw_doc(name)
