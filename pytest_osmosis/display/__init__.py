"""Display: what the terminal shows while a run goes.

``progress`` draws the per-row progress and ``live`` the live status line. This folder reads
``results/`` and the root's base modules (``keys``, ``options``, ``signals``, ``hookspecs``);
``run/`` drives it, and it never imports ``run/`` or ``collect/``.
"""
