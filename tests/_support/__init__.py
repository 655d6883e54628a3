"""Helpers shared by the project's own tests (``tests`` is on ``sys.path``: ``import _support``).

- :mod:`_support.net`: a free loopback port, and waiting until a server answers ``/health``;
- :mod:`_support.servers`: an ASGI app served by uvicorn on loopback in a thread;
- :mod:`_support.repo`: the repository's files and a fresh copy of them, as a clone has them;
- :mod:`_support.inner_runs`: the options every pytest started inside a test runs with;
- :mod:`_support.json_values`: a hypothesis strategy for values a JSON writer may be given;
- :mod:`_support.venvs`: the virtualenvs installed from the package index (built before pytest by
  ``scripts/test.sh``), skipped with the reason where one was not built.
"""
