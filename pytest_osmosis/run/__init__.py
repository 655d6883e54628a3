"""Running rows: the session that owns a run, and everything that executes attempts.

``session`` (``OsmosisSession``) owns the run's state and wires the rest: the engine and its
scheduler (one event loop on one thread), an attempt in-process or against rollout servers,
a row's attempts to its verdict, and finding and importing the user's rollout. This folder may
import ``results/``, ``display/`` and the root's base modules (``keys``, ``options``,
``signals``, ``hookspecs``); it never imports ``collect/`` or the root's plugin modules, and
``results/`` and ``display/`` never import it.
"""
