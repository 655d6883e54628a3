"""Running rows: the session that owns a run, and everything that executes attempts.

``session`` (``OsmosisSession``) owns the run's state and wires the rest: ``engine`` and its
``scheduler`` (one event loop on one thread), ``attempts`` (how one attempt runs, in-process or
against ``rollout_servers``), ``row_runner`` (a row's attempts to its verdict), ``policy_choice``,
``watchdog``, ``rollout_log``, ``auto_repeats`` and ``workspace`` (finding and importing the
user's rollout). This folder may import ``results/``, ``display/`` and the root's base modules
(``keys``, ``options``, ``signals``, ``hookspecs``); it never imports ``collect/`` or the root's
plugin modules, and ``results/`` and ``display/`` never import it.
"""
