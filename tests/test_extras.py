"""Each optional part says which extra to install when its packages are missing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"No module named {{name!r}} (blocked)")
        return None
sys.meta_path.insert(0, Block())
"""


@pytest.mark.parametrize("blocked, code, hint", [
    ({"starlette"}, "import salience.adapters.proxy", 'pip install "salience[proxy]"'),
    ({"langchain"}, "from salience.adapters.langchain import SalienceMiddleware", 'pip install "salience[langchain]"'),
    ({"langchain_core"}, "import salience.adapters.langchain", 'pip install "salience[langchain]"'),
    ({"agents"}, "from salience import Compactor\nfrom salience.adapters.openai_agents import input_filter\n"
                 "input_filter(Compactor(), restore_tool=True)", 'pip install "salience[openai-agents]"'),
], ids=["proxy", "middleware", "langchain-core", "openai-agents"])
def test_install_hint_when_missing(blocked, code, hint):
    script = textwrap.dedent(BLOCK.format(blocked=blocked)) + code
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert done.returncode != 0
    assert hint in done.stderr, done.stderr[-800:]


def test_proxy_command_without_the_extra_says_what_to_install():
    script = textwrap.dedent(BLOCK.format(blocked={"uvicorn"})) + (
        "from salience.cli import main\n"
        "raise SystemExit(main(['proxy', '--upstream', 'http://127.0.0.1:9', '--scorer', 'recency']))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stderr[-800:]
    assert 'pip install "salience[proxy]"' in done.stderr
