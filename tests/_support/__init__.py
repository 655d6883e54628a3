"""Helpers shared by the project's own tests (``tests`` is on ``sys.path``: ``import _support``).

- :mod:`_support.repo`: the repository's files and a fresh copy of them, as a clone has them;
- :mod:`_support.venvs`: throwaway virtualenvs installed from the package index, skipped with a
  reason where the index cannot be reached.
"""
