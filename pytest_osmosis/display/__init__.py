"""Display: what the terminal shows while a run goes.

``progress`` counts the rows and draws the status line, pure; ``live`` wires it into pytest.
This folder reads ``results/`` and the root's base modules (``keys``, ``options``,
``signals``, ``hookspecs``); ``run/`` drives it, and it never imports ``run/`` or ``collect/``.
"""
