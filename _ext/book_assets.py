"""Sphinx extension of this book: each page loads each script once, and widgets typeset with MathJax 3.

* sphinx-thebe 0.3 adds its inline configuration script (``const THEBE_JS_URL = ...``) each time the
  environment is read, and myst-nb reads it twice, so every page declared the constant twice and the browser
  threw. :func:`dedupe_scripts` drops repeated script entries from each page's context.
* The vendored Jupyter widget manager (html-manager 1.x) typesets widget labels with MathJax 2's
  ``MathJax.Hub.Queue``; the book uses MathJax 3, which has no ``Hub``. ``_vendor/widgets-offline.js`` maps that
  one call onto MathJax 3's ``typesetPromise``.
  Its fonts are copied beside the pages that need them (``_vendor_pages``, see its README).
* ``_vendor/book.css`` wraps long lines of code and output instead of clipping them at the right edge.
* The website's widgets (``.lh-widget``, precomputed frames of :mod:`labhelpers.site_frames`) are wired by
  ``_vendor/lh-widgets.js``, added only to pages that have one (:func:`widget_assets`). A page whose outputs no
  longer show a saved widget view does not load the 4 MB widget manager nor its saved state.
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
        key = (_static_name(script), tuple(sorted(attributes.items())))
        if key in seen:
            continue
        seen.add(key)
        kept.append(script)
    scripts[:] = kept


#: What the Jupyter widget manager needs on a page (myst-nb adds them wherever the notebook saved widget state).
WIDGET_MANAGER_FILES = ("widgets/require.js", "widgets/embed-amd.js")
WIDGET_STATE_TYPE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW_TYPE = "application/vnd.jupyter.widget-view+json"


def _static_name(script) -> str:
    """A script's file name under ``_static/`` (Sphinx 7.4 stores ``_static/widgets/require.js``, older ones not)."""
    name = str(getattr(script, "filename", None) or "")
    return name[len("_static/"):] if name.startswith("_static/") else name


def widget_assets(app, pagename, templatename, context, doctree) -> None:
    """Load the website widgets' script where a ``.lh-widget`` is, and the widget manager only where a view is."""
    body = context.get("body", "")
    scripts = context.get("script_files")
    if scripts is not None and WIDGET_VIEW_TYPE not in body:
        scripts[:] = [s for s in scripts
                      if _static_name(s) not in WIDGET_MANAGER_FILES
                      and dict(getattr(s, "attributes", {})).get("type") != WIDGET_STATE_TYPE]
    if 'class="lh-widget"' in body:
        app.add_js_file("lh-widgets.js", priority=520, defer="defer")


def setup(app):
    # After MathJax (priority 500, deferred) and before the widget manager renders (on window load).
    app.add_js_file("widgets-offline.js", priority=510, defer="defer")
    app.add_css_file("book.css")
    app.connect("html-page-context", dedupe_scripts, priority=900)
    app.connect("html-page-context", widget_assets, priority=901)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
