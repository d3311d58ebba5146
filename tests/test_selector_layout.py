"""The selector's layout (issue 11): old import paths kept.

That nothing under ``selector/`` imports ``adapters/`` is tests/test_import_graph.py's
(imports run one way through the layers), and its modules' size tests/test_module_size.py's.
"""

from __future__ import annotations

import importlib

import pytest

OLD_NAMES = ["Compaction", "CompactionSession", "Compactor", "PrefixReuse", "DEFAULT_RETAIN", "FORMATS", "MEMO_SIZE",
             "VALUE_WEIGHT", "EPSILON", "ON_OVER_BUDGET", "load_profile", "detect_format", "check_budget"]


@pytest.mark.parametrize("name", OLD_NAMES, ids=OLD_NAMES)
def test_the_old_compactor_module_still_exports(name: str) -> None:
    module = importlib.import_module("salience.selector.compactor")
    assert getattr(module, name) is not None


def test_the_langchain_adapter_re_exports_the_converters() -> None:
    pytest.importorskip("langchain_core")
    adapter = importlib.import_module("salience.adapters.langchain")
    converters = importlib.import_module("salience.messages.langchain")
    for name in ("KEY", "entry_from_langchain", "entry_to_langchain", "from_langchain", "to_langchain"):
        assert getattr(adapter, name) is getattr(converters, name), name
    assert callable(adapter.pre_model_hook) and adapter.REMOVE_ALL_MESSAGES == "__remove_all__"
