"""The README and the files of docs/ as the dashboard draws them: a page's guide on the page
itself (docs/pages/<page>.md), any of them on the Docs page.

The files link to one another by relative paths, which a reader of the repository follows
and a browser on the dashboard cannot (the server serves no files, and a viewer has no
checkout). So a link to another of them becomes a link to the Docs page showing it
(`docs?doc=NAME`, a relative address, which also holds under a notebook's /proxy/8501/
prefix); a link to any other file, an image included, becomes its text and the file's path
from the project root; a link to a section (#anchor) becomes its text, since Streamlit
names its headings' anchors its own way. Addresses with a scheme (https:) stay links.
Streamlit's Markdown reads `$...$` as LaTeX and `~...~` as strikethrough, and the files hold
prices and "~95 %": both are escaped outside code. Fenced code is left exactly as written.

A document's NAME is its path from docs/ without `.md` (`CLI`, `pages/run`), and `README`.
"""

from __future__ import annotations

import posixpath
import re

__all__ = ["PAGE_GUIDES", "README", "doc_name", "doc_path", "doc_title", "guide_markdown"]

# Each dashboard page's guide is docs/pages/<url path>.md: the page's address names its guide.
PAGE_GUIDES = ("run", "results", "compare", "history", "training", "dataload", "deploy",
               "cost", "system")
README = "README"

_LINK = re.compile(r"(!?)\[([^\]]+)\]\(([^)\s]+)\)")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*:", re.IGNORECASE)
_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`]+`")  # a code span may wrap a line
_HEADING = re.compile(r"^(#{1,4}) ", re.MULTILINE)


def doc_path(name: str) -> str:
    """The file of a document NAME, from the project root."""
    return "README.md" if name == README else f"docs/{name}.md"


def doc_name(path: str) -> str | None:
    """The NAME of a file given from the project root, or None when it is none of them."""
    if path == "README.md":
        return README
    if path.startswith("docs/") and path.endswith(".md"):
        return path[len("docs/"):-len(".md")]
    return None


def doc_title(text: str) -> str:
    """The document's first heading, for the Docs page's picker."""
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def _linker(here: str, names: frozenset[str]):
    folder = posixpath.dirname(doc_path(here))

    def link(m: re.Match) -> str:
        image, label, target = m[1], m[2], m[3]
        if _SCHEME.match(target):
            return m[0]
        path = target.partition("#")[0]
        if not path:
            return label
        file = posixpath.normpath(posixpath.join(folder, path))
        name = doc_name(file)
        if name in names and not image:
            return f"[{label}](docs?doc={name})"
        shown = f"`{file}`"
        return shown if label.strip("`") in (file, path) else f"{label} ({shown})"
    return link


def _escape(prose: str) -> str:
    """$ and ~ escaped in prose, inline code left as written."""
    out, at = [], 0
    for m in _CODE.finditer(prose):
        out.append(prose[at:m.start()].replace("$", r"\$").replace("~", r"\~"))
        out.append(m[0])
        at = m.end()
    out.append(prose[at:].replace("$", r"\$").replace("~", r"\~"))
    return "".join(out)


def guide_markdown(text: str, here: str, names: frozenset[str], demote: int = 0) -> str:
    """The Markdown of document `here` for the dashboard: links rewritten against the known
    document names (see the module's docstring), $ and ~ escaped outside code, headings
    `demote` levels smaller (a guide drawn above a page's own title)."""
    link = _linker(here, names)

    def prose(part: str) -> str:
        part = _escape(_LINK.sub(link, part))
        return _HEADING.sub(lambda m: "#" * (len(m[1]) + demote) + " ", part) if demote else part

    out, at = [], 0
    for m in _FENCE.finditer(text):
        out.append(prose(text[at:m.start()]))
        out.append(m[0])
        at = m.end()
    out.append(prose(text[at:]))
    return "".join(out)
