"""Results: what a run decided and the files it leaves behind.

``verdict`` decides an attempt's and a row's outcome, ``rows`` tracks each row's state,
``resume`` reads an earlier run's journal, ``run_folder`` lays out a run's folder, ``report``
writes ``report.json`` (with ``report_redaction``), ``html`` the HTML report, ``gates`` the
regression gates, ``run_end`` the end-of-run summary and exit status, ``stopped`` how a run
ended, and ``output_paths`` where outputs go. This folder imports only the root's base modules
(``keys``, ``options``, ``signals``, ``hookspecs``): it never imports ``run/``, ``display/``
or ``collect/``, so the report can be rebuilt without running anything.
"""
