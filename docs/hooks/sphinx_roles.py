"""MkDocs hook: the package's docstrings mark names with Sphinx roles (``:class:`X```), which mkdocstrings renders
literally; this shows them as the code names they mark (``~`` keeps the last dotted part, as in Sphinx)."""

import re

ROLE = re.compile(r":(?:class|mod|func|meth|data|attr|obj|exc|ref):<code>(~?)([^<]*)</code>")


def on_page_content(html, page, config, files):
    return ROLE.sub(lambda m: f"<code>{m.group(2).split('.')[-1] if m.group(1) else m.group(2)}</code>", html)
