"""The worked examples in demo_rag.py's docstrings are tests too, so they cannot rot."""
import doctest

import demo_rag as rag


def test_docstring_examples_run():
    failed, attempted = doctest.testmod(rag, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert attempted >= 25, attempted      # the examples are still there
    assert failed == 0
