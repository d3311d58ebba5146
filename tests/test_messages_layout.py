"""salience.messages and salience.datasets: the old import paths, the converter registry, the two
provider converters independent of each other.

That ``transcript`` imports none of ``messages``, ``datasets`` or ``formats``, and that the new
packages import no old path, is tests/test_import_graph.py's (no cycle, imports one way through
the layers, no import of a shim).
"""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import salience.transcript as transcript_module
from salience.errors import SalienceError
from salience.transcript import Transcript

SRC = Path(__file__).resolve().parents[1] / "src" / "salience"

#: Old module -> (new module, every public name the old one had).
MOVED = {
    "salience.formats": ("salience.datasets", (
        "LAYOUTS", "PathLike", "detect_layout", "iter_files", "known_layouts", "load_transcripts", "save_transcripts")),
    "salience.formats._io": ("salience.datasets._io", ("json_lines", "read_json")),
    "salience.formats.openai": ("salience.messages.openai", (
        "KEY", "entry_from_openai", "entry_to_openai", "from_openai", "message_where", "to_openai")),
    "salience.formats.anthropic": ("salience.messages.anthropic", (
        "KEY", "Reader", "from_anthropic", "render_appended", "source_messages", "system_of", "to_anthropic")),
    "salience.formats.jsonl": ("salience.datasets.jsonl", (
        "NAME", "dump_transcript", "load", "parse_transcript", "save", "sniff")),
    "salience.formats.locomo": ("salience.datasets.locomo", ("DOMAIN", "NAME", "load", "normalise_evidence", "sniff")),
    "salience.formats.taubench": ("salience.datasets.taubench", ("NAME", "load", "run_to_transcript", "sniff")),
    "salience.formats.mint": ("salience.datasets.mint", ("CATEGORIES", "NAME", "load", "run_to_transcript", "sniff")),
    "salience.formats.sweagent": ("salience.datasets.sweagent", (
        "DOMAIN", "NAME", "history_to_transcript", "load", "sniff")),
    "salience.formats.tooltalk": ("salience.datasets.tooltalk", (
        "DOMAIN", "NAME", "conversation_to_transcript", "load", "sniff")),
    "salience.formats.apibank": ("salience.datasets.apibank", ("DOMAIN", "NAME", "load", "sniff")),
    "salience.selector.validate": ("salience.messages.validate", (
        "ANTHROPIC_ID", "check_anthropic", "check_openai", "pending_calls")),
}


@pytest.mark.parametrize(("old", "new", "names"), [(o, n, names) for o, (n, names) in MOVED.items()], ids=list(MOVED))
def test_old_paths_re_export_the_same_objects(old: str, new: str, names: tuple[str, ...]) -> None:
    old_module, new_module = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert getattr(old_module, name) is getattr(new_module, name), f"{old}.{name}"
    assert set(old_module.__all__) <= set(names)
    assert new in (old_module.__doc__ or ""), f"{old}'s docstring should say where the code went"


def test_old_package_paths_still_import_as_from_imports() -> None:
    from salience.formats import jsonl, openai

    assert jsonl.NAME == "jsonl"
    assert openai.KEY == "_openai"


def test_transcript_methods_go_through_the_registered_converters() -> None:
    from salience.messages import anthropic, openai

    registered = transcript_module._converters
    assert registered["from_openai"] is openai.from_openai
    assert registered["to_openai"] is openai.to_openai
    assert registered["from_anthropic"] is anthropic.from_anthropic
    assert registered["to_anthropic"] is anthropic.to_anthropic
    assert registered["anthropic_system"] is anthropic.system_of
    assert set(registered) == set(transcript_module.CONVERTERS)


def test_a_missing_converter_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(transcript_module._converters, "to_anthropic")
    t = Transcript.from_openai([{"role": "user", "content": "hi"}])
    with pytest.raises(SalienceError, match=r"Transcript\.to_anthropic has no converter: salience\.messages\.anth"):
        t.to_anthropic()


def test_registering_an_unknown_method_is_refused() -> None:
    with pytest.raises(SalienceError, match="no Transcript method 'to_yaml' takes a converter"):
        transcript_module.register_converter("to_yaml", print)


def test_the_converters_are_there_after_importing_only_the_transcript_module() -> None:
    code = (
        "from salience.transcript import Transcript\n"
        "t = Transcript.from_anthropic([{'role': 'user', 'content': 'hi'}], system='s')\n"
        "assert t.to_openai() == [{'role': 'system', 'content': 's'}, {'role': 'user', 'content': 'hi'}]\n"
        "assert t.anthropic_system() == 's'\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC.parent)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def _imports(path: Path) -> set[str]:
    """Every salience module ``path`` imports (function-level ones too; not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("salience"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("salience"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names if (SRC.parent / f"{node.module}.{a.name}"
                       .replace(".", "/")).with_suffix(".py").exists())
    return out


@pytest.mark.parametrize(("module", "forbidden"), [
    ("messages/openai.py", "salience.messages.anthropic"),
    ("messages/anthropic.py", "salience.messages.openai"),
], ids=lambda v: str(v))
def test_the_provider_converters_do_not_import_each_other(module: str, forbidden: str) -> None:
    imported = _imports(SRC / module)
    assert not {m for m in imported if m == forbidden or m.startswith(forbidden + ".")}
