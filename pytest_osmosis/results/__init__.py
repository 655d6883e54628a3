"""Results: what a run decided and the files it leaves behind.

Verdicts, the row book, resume, the run folder, ``report.json``, the HTML and markdown
reports, the gates and the end-of-run summary and exit status. This folder imports only the
root's base modules (``keys``, ``options``, ``signals``, ``hookspecs``): never ``run/``,
``display/`` or ``collect/``, so the report can be rebuilt without running anything.
"""
