"""Data Docs made inert: GX 1.24 writes a failed expectation's sample values into its
pages as markup, and its pages load scripts from public CDNs. Values are escaped
before GX renders them (`inert`), and every page it writes loses its scripts and
anything from elsewhere (`without_scripts`).
"""

from __future__ import annotations

import html
import re
from typing import Any


def inert(value: Any) -> Any:
    """`value` with every string in it HTML-escaped, keys included.

    For the validation results Data Docs are rendered from: GX's table
    template puts a sample value into the page as it is (its Jinja autoescape
    does not cover its `.j2` templates), and a value from a landing file may
    be markup. A value GX does escape shows escaped twice: still text.
    """
    if isinstance(value, str):
        return html.escape(value)
    if isinstance(value, list | tuple):
        return [inert(item) for item in value]
    if isinstance(value, dict):
        return {inert(key): inert(item) for key, item in value.items()}
    return value


# GX's own script elements: CDN libraries (jQuery, Bootstrap, Vega, unpkg) and the
# inline code that needs them. A report page runs no script.
_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script\s*>", re.IGNORECASE | re.DOTALL)


# Stylesheets and pictures from elsewhere (GX's logo): an opened page fetches nothing.
_REMOTE = re.compile(
    r"<(?:link\b[^>]*\bhref|img\b[^>]*\bsrc)=[\"']?(?:https?:)?//[^>]*>", re.IGNORECASE
)


# Links that would lead nowhere from the reports folder, offline: GX's favicon (its
# path is one folder off) and its links to the web (a newsletter, its home page).
_FAVICON = re.compile(r"<link\b[^>]*favicon[^>]*>", re.IGNORECASE)


_WEB_LINK = re.compile(r"(<a\b[^>]*?)\s+href=[\"']?(?:https?:)?//[^\"'\s>]*[\"']?", re.IGNORECASE)


# GX's "home" links, to the Data Docs index: it is not built (its table is drawn by
# scripts); they lead to the reports index, one folder up, instead.
_DOCS_HOME = re.compile(r"href=\"((?:\.\./)*)index\.html\"")


def without_scripts(page: str) -> str:
    """A Data Docs page without scripts or anything from elsewhere, whose every link leads
    to a page of the reports folder; what stays is static.

    Data values in it are escaped (`inert`), so no `<` of theirs is seen here.
    """
    page = _FAVICON.sub("", _REMOTE.sub("", _SCRIPT.sub("", page)))
    return _DOCS_HOME.sub(r'href="\1../index.html"', _WEB_LINK.sub(r"\1", page))
