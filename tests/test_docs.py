"""The docs stay one hop from what they explain: the README is short and every link in it
and in docs/ resolves; every command's --help names a guide that shows the command, and
docs/CLI.md names every flag of every command under that command; every page has a guide,
drawn above it by the sidebar's switch; the Docs page opens a document from its link."""

import re

import pytest
from streamlit.testing.v1 import AppTest

from engine.cli import GUIDES, build_parser
from engine.present.guide_text import PAGE_GUIDES, guide_markdown
from tests.conftest import ROOT

APP = str(ROOT / "app.py")
README_MAX_LINES = 200
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]+\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _subcommands():
    ap = build_parser()
    sub = next(a for a in ap._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices


def _flags(parser) -> list[str]:
    """Every long option of a parser and of its own subcommands (prices list|check|import)."""
    out = []
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for child in action.choices.values():
                out += _flags(child)
        out += [o for o in action.option_strings if o.startswith("--") and o != "--help"]
    return out


def test_the_readme_is_short_and_every_link_of_the_docs_resolves():
    assert len((ROOT / "README.md").read_text().splitlines()) <= README_MAX_LINES
    broken = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            if not file.is_file():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
            elif anchor and anchor not in {_anchor(h) for h in re.findall(
                    r"^#+ (.+)$", file.read_text(), re.MULTILINE)}:
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_the_screenshot_is_a_small_png_the_readme_shows():
    png = ROOT / "docs" / "img" / "compare-verdict.png"
    assert "](docs/img/compare-verdict.png)" in (ROOT / "README.md").read_text()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 300_000


def test_every_command_names_a_guide_that_shows_it():
    commands = _subcommands()
    assert set(GUIDES) == set(commands)
    for name, parser in commands.items():
        guide = GUIDES[name]
        assert parser.epilog.startswith(f"Guide: {guide}"), name
        assert f"python -m engine {name}" in (ROOT / guide).read_text(), (name, guide)
    assert "docs/CLI.md" in build_parser().epilog


def test_the_cli_reference_names_every_flag_under_its_command():
    text = (ROOT / "docs" / "CLI.md").read_text()
    ref = text[text.index("## Every command, its flags, and where each is explained"):]
    entries = dict(re.findall(r"^- \*\*`([\w-]+)`\*\*(.*?)(?=^- \*\*`|^\S|\Z)", ref,
                              re.MULTILINE | re.DOTALL))
    commands = _subcommands()
    assert set(entries) == set(commands)
    missing = {name: [f for f in _flags(p) if f"`{f}`" not in entries[name]]
               for name, p in commands.items()}
    assert {k: v for k, v in missing.items() if v} == {}
    # and a flag the reference names exists: no entry keeps a flag that was removed
    stale = {name: [f for f in re.findall(r"`(--[\w-]+)`", entries[name])
                    if f not in _flags(commands[name])] for name in commands}
    assert {k: v for k, v in stale.items() if v} == {}


def test_every_page_of_the_router_has_a_guide():
    paths = re.findall(r'url_path="([\w-]+)"', (ROOT / "app.py").read_text())
    assert sorted(paths) == sorted([*PAGE_GUIDES, "docs"])
    for page in PAGE_GUIDES:
        assert (ROOT / "docs" / "pages" / f"{page}.md").read_text().startswith("# ")


def test_guide_markdown_makes_links_work_in_the_dashboard():
    text = ("# Title\n\nSee [the verdict](../VERDICTS.md#verdicts), [Training](training.md), "
            "[this](#title), [code](../../engine/cli/args.py), [Streamlit](https://st.io) "
            "and ![shot](../img/x.png).\n\nA $362.08 machine, ~95 % busy, `$BENCH_DB` and "
            "`~`.\n\n```bash\necho $HOME ~\n```\n## Sub\n")
    names = frozenset({"VERDICTS", "pages/training", "pages/run"})
    assert guide_markdown(text, "pages/run", names, demote=2) == (
        "### Title\n\nSee [the verdict](docs?doc=VERDICTS), [Training](docs?doc=pages/training)"
        ", this, code (`engine/cli/args.py`), [Streamlit](https://st.io) and shot "
        "(`docs/img/x.png`).\n\nA \\$362.08 machine, \\~95 % busy, `$BENCH_DB` and `~`."
        "\n\n```bash\necho $HOME ~\n```\n#### Sub\n")
    # from the README, docs/ is a folder down
    assert guide_markdown("[CLI](docs/CLI.md)", "README", frozenset({"CLI"})) == (
        "[CLI](docs?doc=CLI)")


def test_the_guide_switch_draws_the_page_guide_above_the_page(db_path, monkeypatch):
    monkeypatch.setenv("BENCH_DB", str(db_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert at.toggle(key="page_guide").value is False
    assert not [m for m in at.markdown if "Run: launch a sweep" in m.value]  # off: unchanged
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["page_guide"] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    guide = at.markdown[0].value
    assert guide.startswith("### Run: launch a sweep\n")
    assert "[VERDICTS.md](docs?doc=VERDICTS)" in guide
    assert at.title[0].value == "Run a benchmark sweep"  # the page follows, as before


@pytest.mark.parametrize("doc, title", [("VERDICTS", "# Comparisons that survive machine drift"),
                                        ("pages/deploy", "# Deploy: serving under a latency"),
                                        (None, "# DL benchmark dashboard")])
def test_the_docs_page_opens_a_document_from_its_link(doc, title, db_path, monkeypatch):
    monkeypatch.setenv("BENCH_DB", str(db_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/docs.py")
    at.query_params.update({"doc": doc} if doc else {})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="doc").value == (doc or "README")
    assert at.markdown[-1].value.startswith(title)


def test_the_docs_page_refuses_a_path_in_its_link(db_path, monkeypatch):
    monkeypatch.setenv("BENCH_DB", str(db_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/docs.py")
    at.query_params.update({"doc": "../../etc/passwd"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (note,) = [w.value for w in at.warning]
    assert note.startswith("link: doc='../../etc/passwd' is not allowed; allowed: a name, "
                           "not a path")
    assert at.selectbox(key="doc").value == "README"
