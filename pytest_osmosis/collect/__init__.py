"""Collection: where a dataset row becomes a pytest item.

``items`` turns a dataset file into ``DatasetFile`` and ``RowItem``, ``preflight`` checks the
workspace before the first row, and ``xdist_groups`` hands each pytest-xdist worker its rows up
front. Driven by the root modules (``plugin``, ``startup``), this folder may import ``run/``,
``results/``, ``display/`` and the root's base modules; nothing below it imports it.
"""
