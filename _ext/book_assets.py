"""Sphinx extension of this book: each page loads each script once, and widgets typeset with MathJax 3.

* sphinx-thebe 0.3 adds its inline configuration script (``const THEBE_JS_URL = ...``) each time the
  environment is read, and myst-nb reads it twice, so every page declared the constant twice and the browser
  threw. :func:`dedupe_scripts` drops repeated script entries from each page's context.
* The vendored Jupyter widget manager (html-manager 1.x) typesets widget labels with MathJax 2's
  ``MathJax.Hub.Queue``; the book uses MathJax 3, which has no ``Hub``. ``_vendor/widgets-offline.js`` maps that
  one call onto MathJax 3's ``typesetPromise``.
  Its fonts are copied beside the pages that need them (``_vendor_pages``, see its README).
* ``_vendor/book.css`` wraps long lines of code and output instead of clipping them at the right edge.
"""

from __future__ import annotations


def dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    """Keep the first of several identical script entries (same file and same inline body)."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        # Sphinx stores an inline script's file name as None or "" depending on who added it.
        attributes = dict(getattr(script, "attributes", {}))
        key = (getattr(script, "filename", None) or "", tuple(sorted(attributes.items())))
        if key in seen:
            continue
        seen.add(key)
        kept.append(script)
    scripts[:] = kept


def setup(app):
    # After MathJax (priority 500, deferred) and before the widget manager renders (on window load).
    app.add_js_file("widgets-offline.js", priority=510, defer="defer")
    app.add_css_file("book.css")
    app.connect("html-page-context", dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
