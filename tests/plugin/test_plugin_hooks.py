"""The hooks pytest-osmosis offers users (``pytest_osmosis.newhooks``)."""

from __future__ import annotations

import pytest


def test_a_conftest_may_implement_the_osmosis_hooks(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        def pytest_osmosis_row_finished(row, result, report):
            pass

        def pytest_osmosis_run_finished(summary, report_path):
            pass

        def pytest_osmosis_row_verdict(row, result):
            return None
        """
    )
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_misspelt_osmosis_hook_argument_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        def pytest_osmosis_row_finished(row, outcome):
            pass
        """
    )
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*pytest_osmosis_row_finished*outcome*"])


def test_the_verdict_hook_takes_the_first_answer(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest

        class Strict:
            @pytest.hookimpl(tryfirst=True)
            def pytest_osmosis_row_verdict(self, row, result):
                return "failed" if row["row_key"] == "bad" else None

        class Lenient:
            def pytest_osmosis_row_verdict(self, row, result):
                return "passed"

        def pytest_configure(config):
            config.pluginmanager.register(Lenient(), "lenient")
            config.pluginmanager.register(Strict(), "strict")
        """
    )
    pytester.makepyfile(
        """
        def test_first_result(pytestconfig):
            hook = pytestconfig.hook.pytest_osmosis_row_verdict
            assert hook(row={"row_key": "bad"}, result={}) == "failed"
            assert hook(row={"row_key": "good"}, result={}) == "passed"
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
