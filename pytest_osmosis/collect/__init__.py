"""Collection: where a dataset row becomes a pytest item.

``items`` turns a dataset file into ``DatasetFile`` and ``RowItem`` (and waits on the row's
verdict when the item runs), ``preflight`` checks the workspace before the first row, and
``xdist_groups`` keeps a row's items on one pytest-xdist worker. This folder is driven by the
root modules (``plugin``, ``startup``) and may import ``run/`` (the session a row is handed to),
``results/``, ``display/`` and the root's base modules (``keys``, ``options``, ``signals``,
``hookspecs``); nothing below it imports ``collect/``.
"""
