"""Running rows: the session that owns a run, and everything that executes attempts.

This folder may import ``results/``, ``display/`` and the root's base modules (``keys``,
``options``, ``signals``, ``hookspecs``); never ``collect/`` or the root's plugin modules.
"""
