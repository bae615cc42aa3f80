"""Problem descriptions are Markdown written by admins; they are rendered with markdown-it-py
with raw HTML off, so a description cannot inject markup or script (and markdown-it's link
check refuses ``javascript:`` and ``data:`` URLs)."""

from __future__ import annotations

from functools import lru_cache

from markdown_it import MarkdownIt
from markupsafe import Markup


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")


def render_markdown(text: str) -> Markup:
    """HTML of a Markdown text, safe to put in a page: raw HTML in the text comes out escaped."""
    return Markup(_parser().render(text or ""))
