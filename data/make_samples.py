# Long lines: one invented turn, tool result or command per line reads best.
# ruff: noqa: E501
"""Write the project's sample transcripts: data/coding_agent.jsonl, customer_service.jsonl, long_chat.jsonl.

Every word below was written for this project (no third-party data); the files are
released under the project's license (MIT). Labels come from salience's own labellers:
hindsight labels for the agent transcripts, evidence labels for the chat (whose queries
list their evidence turns).

Run from the repository root::

    python data/make_samples.py          # rewrites the three files
    python data/make_samples.py --check  # exits 1 if the files differ from what it would write
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from salience import Query, Transcript, save_transcripts
from salience.scorer.labels import label

HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------------------
# building OpenAI-format messages
# ---------------------------------------------------------------------------


class Chat:
    """Collects OpenAI chat messages with stable ids ``m0, m1, ...`` and call ids."""

    def __init__(self, tid: str, domain: str) -> None:
        self.tid = tid
        self.domain = domain
        self.messages: list[dict[str, Any]] = []
        self.calls = 0

    def _add(self, message: dict[str, Any]) -> None:
        self.messages.append({"id": f"m{len(self.messages)}", **message})

    def system(self, text: str) -> None:
        self._add({"role": "system", "content": text.strip()})

    def user(self, text: str) -> None:
        self._add({"role": "user", "content": text.strip()})

    def say(self, text: str) -> None:
        self._add({"role": "assistant", "content": text.strip()})

    def call(self, *calls: tuple[str, dict[str, Any], Any], thought: str | None = None) -> None:
        """An assistant turn making ``calls`` (name, arguments, result), then one tool message per call."""
        made = []
        for name, args, _ in calls:
            self.calls += 1
            made.append((f"call_{self.tid.replace('-', '_')}_{self.calls:02d}", name, args))
        self._add({
            "role": "assistant",
            "content": thought.strip() if thought else None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for cid, name, args in made
            ],
        })
        for (cid, name, _), (_, _, result) in zip(made, calls):
            content = result if isinstance(result, str) else json.dumps(result)
            self._add({"role": "tool", "tool_call_id": cid, "name": name, "content": content.rstrip("\n")})

    def transcript(self, queries: tuple[Query, ...] = ()) -> Transcript:
        return Transcript.from_openai(self.messages, id=self.tid, domain=self.domain, queries=queries)


def numbered(text: str, start: int = 1) -> str:
    """``cat -n`` style listing."""
    lines = text.strip("\n").splitlines()
    return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(lines, start))


# ---------------------------------------------------------------------------
# coding agent
# ---------------------------------------------------------------------------

CODING_SYSTEM = """
You are a software engineering agent working in a checked-out repository. You can use these tools:

- read_file(path, start_line?, end_line?): show a file with line numbers.
- grep(pattern, path): search files for a regular expression; prints path:line:text.
- run(command): run a shell command in the repository root and show its output and exit code.
- edit_file(path, old, new): replace the exact text `old` (which must occur once) with `new`.

Work in small steps. Reproduce a failure before you fix it, read the code you change, keep edits
minimal, and run the relevant tests after every edit. When you are done, summarise what you changed
and why in a few sentences, naming the files.
"""

INVOICE_PY = '''
"""Invoices: line items, discounts, tax and totals."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from invoicekit.money import round_money
from invoicekit.tax import TaxTable


@dataclass(frozen=True)
class LineItem:
    sku: str
    description: str
    quantity: int
    unit_price: Decimal

    @property
    def subtotal(self) -> Decimal:
        return self.unit_price * self.quantity


@dataclass
class Invoice:
    number: str
    customer_id: str
    items: list[LineItem] = field(default_factory=list)
    discount_rate: Decimal = Decimal("0")
    tax_region: str = "DE-BY"

    def add(self, item: LineItem) -> None:
        if item.quantity <= 0:
            raise ValueError(f"quantity must be positive (got {item.quantity})")
        self.items.append(item)

    @property
    def subtotal(self) -> Decimal:
        return sum((i.subtotal for i in self.items), Decimal("0"))

    @property
    def discount(self) -> Decimal:
        return round_money(self.subtotal * self.discount_rate)

    def total(self, taxes: TaxTable) -> Decimal:
        net = self.subtotal - self.discount
        tax = round_money(net * taxes.rate(self.tax_region))
        return round_money(net + tax)

    def lines(self) -> list[str]:
        out = [f"Invoice {self.number} for {self.customer_id}"]
        for item in self.items:
            out.append(f"{item.quantity:>3} x {item.sku:<12} {item.unit_price:>9}  {item.subtotal:>10}")
        out.append(f"{'discount':>29} {-self.discount:>10}")
        return out
'''

MONEY_PY = '''
"""Money helpers: rounding to whole cents the way invoices need it."""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal

CENT = Decimal("0.01")


def round_money(amount: Decimal) -> Decimal:
    """Round ``amount`` to whole cents, half away from zero (commercial rounding).

    >>> round_money(Decimal("8.485"))
    Decimal('8.49')
    """
    return amount.quantize(CENT, rounding=ROUND_DOWN)


def split_evenly(amount: Decimal, parts: int) -> list[Decimal]:
    """Split ``amount`` into ``parts`` cent amounts that add up exactly.

    The first shares get the leftover cents, so ``split_evenly(Decimal("10"), 3)``
    gives 3.34, 3.33, 3.33.
    """
    if parts <= 0:
        raise ValueError(f"parts must be positive (got {parts})")
    base = (amount / parts).quantize(CENT, rounding=ROUND_DOWN)
    leftover = int((amount - base * parts) / CENT)
    return [base + CENT if i < leftover else base for i in range(parts)]
'''

TEST_INVOICE_FAIL = """
============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.2.1, pluggy-1.5.0
rootdir: /repo
configfile: pyproject.toml
collected 51 items

tests/test_cli.py ........                                               [ 15%]
tests/test_invoice.py ...FF                                              [ 25%]
tests/test_money.py .........                                            [ 43%]
tests/test_pdf.py ...............                                        [ 72%]
tests/test_tax.py ..............                                         [100%]

=================================== FAILURES ===================================
___________________________ test_discount_rounding ____________________________

    def test_discount_rounding():
        invoice = make_invoice(discount_rate=Decimal("0.10"))
>       assert invoice.discount == Decimal("8.49")
E       AssertionError: assert Decimal('8.48') == Decimal('8.49')
E        +  where Decimal('8.48') = Invoice(number='INV-2024-0457', customer_id='cus_88213', items=[...], discount_rate=Decimal('0.10'), tax_region='DE-BY').discount

tests/test_invoice.py:33: AssertionError
____________________________ test_discount_total ______________________________

    def test_discount_total():
        invoice = make_invoice(discount_rate=Decimal("0.10"))
>       assert invoice.total(TAXES) == Decimal("90.87")
E       AssertionError: assert Decimal('90.88') == Decimal('90.87')
E        +  where Decimal('90.88') = <bound method Invoice.total of Invoice(number='INV-2024-0457', ...)>(TaxTable(regions=3))

tests/test_invoice.py:38: AssertionError
=========================== short test summary info ============================
FAILED tests/test_invoice.py::test_discount_rounding - AssertionError: assert Decimal('8.48') == Decimal('8.49')
FAILED tests/test_invoice.py::test_discount_total - AssertionError: assert Decimal('90.88') == Decimal('90.87')
========================= 2 failed, 49 passed in 1.37s =========================
exit code: 1
"""

TEST_INVOICE_PY = '''
from decimal import Decimal

import pytest

from invoicekit.invoice import Invoice, LineItem
from invoicekit.tax import TaxTable

TAXES = TaxTable({"DE-BY": Decimal("0.19"), "AT-W": Decimal("0.20"), "FR-IDF": Decimal("0.20")})


def make_invoice(**kwargs):
    invoice = Invoice(number="INV-2024-0457", customer_id="cus_88213", **kwargs)
    invoice.add(LineItem("PEN-BLK-12", "Gel pens, black, pack of 12", 3, Decimal("12.95")))
    invoice.add(LineItem("NB-A5-DOT", "Notebook A5, dotted", 2, Decimal("23.00")))
    return invoice


def test_subtotal():
    assert make_invoice().subtotal == Decimal("84.85")


def test_quantity_must_be_positive():
    with pytest.raises(ValueError, match="quantity must be positive"):
        make_invoice().add(LineItem("X", "x", 0, Decimal("1")))


def test_total_without_discount():
    assert make_invoice().total(TAXES) == Decimal("100.97")


def test_discount_rounding():
    invoice = make_invoice(discount_rate=Decimal("0.10"))
    assert invoice.discount == Decimal("8.49")


def test_discount_total():
    invoice = make_invoice(discount_rate=Decimal("0.10"))
    assert invoice.total(TAXES) == Decimal("90.87")
'''

GIT_LOG_MONEY = """
a41c9e2 money: use Decimal.quantize instead of float round() (2 days ago, Priya Raman)
7d0b3f1 money: add split_evenly for instalment plans (3 weeks ago, Tomás Ruiz)
c55e820 invoicekit: initial money helpers (5 months ago, Priya Raman)
exit code: 0
"""

GIT_SHOW_A41 = """
commit a41c9e2d8b1f0c6e4a7f2b9d3c1e5a8f7b6d4c2e
Author: Priya Raman <priya@invoicekit.dev>
Date:   Mon May 13 16:02:11 2024 +0200

    money: use Decimal.quantize instead of float round()

diff --git a/src/invoicekit/money.py b/src/invoicekit/money.py
index 3be1f20..9c04d7a 100644
--- a/src/invoicekit/money.py
+++ b/src/invoicekit/money.py
@@ -3,15 +3,18 @@
 from __future__ import annotations

-from decimal import Decimal
+from decimal import ROUND_DOWN, Decimal

 CENT = Decimal("0.01")


 def round_money(amount: Decimal) -> Decimal:
-    return Decimal(str(round(float(amount), 2)))
+    \"\"\"Round ``amount`` to whole cents, half away from zero (commercial rounding).
+    \"\"\"
+    return amount.quantize(CENT, rounding=ROUND_DOWN)
exit code: 0
"""

NAME_ERROR_RUN = """
============================= test session starts ==============================
collected 5 items

tests/test_invoice.py ..FFF                                              [100%]

=================================== FAILURES ===================================
_________________________ test_total_without_discount __________________________

    def test_total_without_discount():
>       assert make_invoice().total(TAXES) == Decimal("100.97")

tests/test_invoice.py:28:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
src/invoicekit/invoice.py:47: in total
    tax = round_money(net * taxes.rate(self.tax_region))
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
src/invoicekit/money.py:16: in round_money
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)
E   NameError: name 'ROUND_HALF_UP' is not defined
___________________________ test_discount_rounding _____________________________

    def test_discount_rounding():
        invoice = make_invoice(discount_rate=Decimal("0.10"))
>       assert invoice.discount == Decimal("8.49")

tests/test_invoice.py:33:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
src/invoicekit/invoice.py:43: in discount
    return round_money(self.subtotal * self.discount_rate)
src/invoicekit/money.py:16: in round_money
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)
E   NameError: name 'ROUND_HALF_UP' is not defined
____________________________ test_discount_total _______________________________

    def test_discount_total():
        invoice = make_invoice(discount_rate=Decimal("0.10"))
>       assert invoice.total(TAXES) == Decimal("90.87")

tests/test_invoice.py:38:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
src/invoicekit/invoice.py:46: in total
    net = self.subtotal - self.discount
src/invoicekit/invoice.py:43: in discount
    return round_money(self.subtotal * self.discount_rate)
src/invoicekit/money.py:16: in round_money
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)
E   NameError: name 'ROUND_HALF_UP' is not defined
=========================== short test summary info ============================
FAILED tests/test_invoice.py::test_total_without_discount - NameError: name 'ROUND_HALF_UP' is not defined
FAILED tests/test_invoice.py::test_discount_rounding - NameError: name 'ROUND_HALF_UP' is not defined
FAILED tests/test_invoice.py::test_discount_total - NameError: name 'ROUND_HALF_UP' is not defined
========================= 3 failed, 2 passed in 0.12s ==========================
exit code: 1
"""


def coding_invoice() -> Transcript:
    c = Chat("coding-invoice-rounding", "coding")
    c.system(CODING_SYSTEM)
    c.user(
        "CI went red on main after yesterday's merge: two tests in tests/test_invoice.py fail, both about the "
        "discount. Customers are getting invoices that are a cent off. Please find the cause and fix it; "
        "don't change the expected values in the tests, they match what finance signed off."
    )
    c.call(("run", {"command": "python -m pytest -q -p no:cacheprovider"}, TEST_INVOICE_FAIL),
           thought="First I'll reproduce the failure with the full test suite.")
    c.call(("read_file", {"path": "tests/test_invoice.py"}, numbered(TEST_INVOICE_PY)))
    c.say(
        "Both failures come from the discount: 10% of 84.85 is 8.485, which should round to 8.49, but "
        "`Invoice.discount` returns 8.48, and the total is then one cent too high (90.88 instead of 90.87). "
        "The discount goes through `round_money`, so I'll look at the invoice code next."
    )
    c.call(("read_file", {"path": "src/invoicekit/invoice.py"}, numbered(INVOICE_PY)))
    c.call(("grep", {"pattern": "def round_money|ROUND_", "path": "src/"},
            "src/invoicekit/money.py:5:from decimal import ROUND_DOWN, Decimal\n"
            "src/invoicekit/money.py:10:def round_money(amount: Decimal) -> Decimal:\n"
            "src/invoicekit/money.py:16:    return amount.quantize(CENT, rounding=ROUND_DOWN)\n"
            "src/invoicekit/money.py:27:    base = (amount / parts).quantize(CENT, rounding=ROUND_DOWN)"))
    c.call(("read_file", {"path": "src/invoicekit/money.py"}, numbered(MONEY_PY)))
    c.call(("run", {"command": "git log -3 --format='%h %s (%ar, %an)' -- src/invoicekit/money.py"}, GIT_LOG_MONEY))
    c.call(("run", {"command": "git show a41c9e2 -- src/invoicekit/money.py"}, GIT_SHOW_A41),
           thought="Commit a41c9e2 is two days old and touches round_money; let me see the diff.")
    c.say(
        "Found it: commit a41c9e2 replaced `round(float(amount), 2)` with `amount.quantize(CENT, "
        "rounding=ROUND_DOWN)` in src/invoicekit/money.py line 16. ROUND_DOWN truncates, so 8.485 becomes "
        "8.48, while the docstring (and finance) want half away from zero, which is `ROUND_HALF_UP` in the "
        "decimal module. `split_evenly` at line 27 must keep ROUND_DOWN: it hands out leftover cents itself."
    )
    c.call(("edit_file", {"path": "src/invoicekit/money.py",
                          "old": "    return amount.quantize(CENT, rounding=ROUND_DOWN)\n\n\ndef split_evenly",
                          "new": "    return amount.quantize(CENT, rounding=ROUND_HALF_UP)\n\n\ndef split_evenly"},
            "Edited src/invoicekit/money.py: replaced 1 occurrence (lines 16-19)."))
    c.call(("run", {"command": "python -m pytest -q -p no:cacheprovider tests/test_invoice.py"}, NAME_ERROR_RUN))
    c.call(("edit_file", {"path": "src/invoicekit/money.py",
                          "old": "from decimal import ROUND_DOWN, Decimal",
                          "new": "from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal"},
            "Edited src/invoicekit/money.py: replaced 1 occurrence (line 5)."),
           thought="I forgot the import of ROUND_HALF_UP at line 5.")
    c.call(("run", {"command": "python -m pytest -q -p no:cacheprovider tests/test_invoice.py tests/test_money.py"},
            "..............                                                           [100%]\n14 passed in 0.44s\nexit code: 0"))
    c.call(("run", {"command": "python -m pytest -q -p no:cacheprovider --doctest-modules src tests"},
            ".....................................................                    [100%]\n"
            "53 passed in 1.52s\nexit code: 0"))
    c.say(
        "Fixed. The cause was commit a41c9e2, which changed `round_money` in src/invoicekit/money.py to "
        "`quantize(CENT, rounding=ROUND_DOWN)`: that truncates, so a discount of 8.485 became 8.48 and the "
        "invoice total 90.88 instead of 90.87. I changed it to `ROUND_HALF_UP` (half away from zero, as the "
        "docstring says) and added the import on line 5; `split_evenly` keeps ROUND_DOWN on purpose. "
        "tests/test_invoice.py and tests/test_money.py pass (14 tests), and the whole suite with doctests "
        "passes (53 tests), including the docstring example `round_money(Decimal(\"8.485\")) == Decimal(\"8.49\")`."
    )
    return c.transcript()


CONFIG_PY = '''
"""Configuration: TOML files merged over built-in defaults."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "crawl": {
        "concurrency": 4,
        "user_agent": "feedfetch/0.9 (+https://feedfetch.dev/bot)",
        "respect_robots": True,
    },
    "http": {
        "timeout_ms": 10_000,
        "retries": 3,
        "backoff_ms": 500,
    },
    "store": {
        "path": "feeds.sqlite3",
        "keep_days": 30,
    },
}


class ConfigError(Exception):
    """A configuration file that cannot be used."""


@dataclass(frozen=True)
class Config:
    feeds: tuple[str, ...]
    concurrency: int
    user_agent: str
    respect_robots: bool
    timeout: float
    retries: int
    backoff: float
    store_path: Path
    keep_days: int


def load_config(path: str | Path) -> Config:
    """Read ``path`` (TOML) and return a :class:`Config`."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    feeds = raw.get("feeds", {}).get("urls", [])
    if not feeds:
        raise ConfigError(f"{path}: [feeds] urls must list at least one feed")
    return Config(
        feeds=tuple(feeds),
        concurrency=raw["crawl"]["concurrency"],
        user_agent=raw["crawl"]["user_agent"],
        respect_robots=raw["crawl"]["respect_robots"],
        timeout=raw["http"]["timeout_ms"] / 1000,
        retries=raw["http"]["retries"],
        backoff=raw["http"]["backoff_ms"] / 1000,
        store_path=Path(raw["store"]["path"]),
        keep_days=raw["store"]["keep_days"],
    )
'''

MINIMAL_TOML = """
# The smallest useful configuration: everything else comes from the defaults.
[feeds]
urls = [
  "https://blog.rust-lang.org/feed.xml",
  "https://www.python.org/blogs/rss/",
  "https://lwn.net/headlines/rss",
]

[crawl]
concurrency = 2
user_agent = "feedfetch/0.9 (+https://feedfetch.dev/bot)"
respect_robots = true

[http]
retries = 5
"""

TEST_CONFIG_PY = '''
from pathlib import Path

import pytest

from feedfetch.config import ConfigError, load_config

FULL = """
[feeds]
urls = ["https://example.org/feed.xml"]
[crawl]
concurrency = 8
user_agent = "test-agent"
respect_robots = false
[http]
timeout_ms = 2500
retries = 1
backoff_ms = 100
[store]
path = "x.sqlite3"
keep_days = 7
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "feedfetch.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_full_config(tmp_path):
    config = load_config(write(tmp_path, FULL))
    assert config.timeout == 2.5
    assert config.concurrency == 8
    assert config.respect_robots is False


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.toml")


def test_no_feeds(tmp_path):
    with pytest.raises(ConfigError, match="at least one feed"):
        load_config(write(tmp_path, "[crawl]\\nconcurrency = 2\\n"))
'''

CRAWL_TRACEBACK = """
Traceback (most recent call last):
  File "/repo/.venv/bin/feedfetch", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "/repo/src/feedfetch/cli.py", line 74, in main
    config = load_config(args.config)
             ^^^^^^^^^^^^^^^^^^^^^^^^
  File "/repo/src/feedfetch/config.py", line 62, in load_config
    timeout=raw["http"]["timeout_ms"] / 1000,
            ~~~~~~~~~~~^^^^^^^^^^^^^^
KeyError: 'timeout_ms'
exit code: 1
"""

MERGE_OLD = '''    feeds = raw.get("feeds", {}).get("urls", [])
    if not feeds:'''

MERGE_NEW = '''    raw = _merge(DEFAULTS, raw)
    feeds = raw.get("feeds", {}).get("urls", [])
    if not feeds:'''

MERGE_FN_OLD = '''def load_config(path: str | Path) -> Config:'''
MERGE_FN_NEW = '''def _merge(defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``given`` over ``defaults``, table by table (neither is modified)."""
    out = dict(defaults)
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(defaults.get(key), dict):
            out[key] = _merge(defaults[key], value)
        else:
            out[key] = value
    return out


def load_config(path: str | Path) -> Config:'''

NEW_TEST = '''

def test_minimal_config_uses_defaults():
    config = load_config(Path("configs/minimal.toml"))
    assert config.timeout == 10.0
    assert config.retries == 5
    assert config.concurrency == 2
    assert config.keep_days == 30
'''

CONFIG_TEST_FAIL = """
============================= test session starts ==============================
collected 4 items

tests/test_config.py ...F                                                [100%]

=================================== FAILURES ===================================
_______________________ test_minimal_config_uses_defaults ______________________

    def test_minimal_config_uses_defaults():
>       config = load_config(Path("configs/minimal.toml"))

tests/test_config.py:48:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
src/feedfetch/config.py:62: in load_config
    raise ConfigError(f"{path}: no such file") from None
E   feedfetch.config.ConfigError: configs/minimal.toml: no such file
=========================== short test summary info ============================
FAILED tests/test_config.py::test_minimal_config_uses_defaults - feedfetch.config.ConfigError: configs/minimal.toml: no such file
========================= 1 failed, 3 passed in 0.09s ==========================
exit code: 1
"""


def coding_config() -> Transcript:
    c = Chat("coding-config-defaults", "coding")
    c.system(CODING_SYSTEM)
    c.user(
        "`feedfetch crawl --config configs/minimal.toml` crashes with a KeyError since we trimmed that file. "
        "Missing keys should fall back to the defaults in the code, not crash. Please fix it and add a test. "
        "Don't change the CLI."
    )
    c.call(("run", {"command": "feedfetch crawl --config configs/minimal.toml --dry-run"}, CRAWL_TRACEBACK))
    c.call(("read_file", {"path": "src/feedfetch/config.py"}, numbered(CONFIG_PY)),
           thought="The KeyError comes from config.py line 62. Reading the loader.")
    c.call(("read_file", {"path": "configs/minimal.toml"}, numbered(MINIMAL_TOML)))
    c.say(
        "The cause: `load_config` reads every key straight from the parsed TOML, e.g. "
        "`raw[\"http\"][\"timeout_ms\"]` at line 62, and never consults `DEFAULTS` (lines 10-25). "
        "configs/minimal.toml has an [http] table with only `retries = 5`, so `timeout_ms` is missing. "
        "The fix is to merge the file over DEFAULTS table by table before reading it. Let me check who else "
        "reads these keys."
    )
    c.call(("grep", {"pattern": "timeout_ms|DEFAULTS", "path": "."},
            "./src/feedfetch/config.py:10:DEFAULTS: dict[str, Any] = {\n"
            "./src/feedfetch/config.py:17:        \"timeout_ms\": 10_000,\n"
            "./src/feedfetch/config.py:62:        timeout=raw[\"http\"][\"timeout_ms\"] / 1000,\n"
            "./docs/configuration.md:42:| `http.timeout_ms` | 10000 | per-request timeout in milliseconds |\n"
            "./docs/configuration.md:12:Every key is optional; missing keys take the DEFAULTS listed below.\n"
            "./tests/test_config.py:15:timeout_ms = 2500"))
    c.call(("read_file", {"path": "tests/test_config.py"}, numbered(TEST_CONFIG_PY)))
    c.call(("edit_file", {"path": "src/feedfetch/config.py", "old": MERGE_FN_OLD, "new": MERGE_FN_NEW},
            "Edited src/feedfetch/config.py: replaced 1 occurrence (line 45)."))
    c.call(("edit_file", {"path": "src/feedfetch/config.py", "old": MERGE_OLD, "new": MERGE_NEW},
            "Edited src/feedfetch/config.py: replaced 1 occurrence (lines 65-66)."))
    c.call(("edit_file", {"path": "tests/test_config.py", "old": "        load_config(write(tmp_path, "
                          "\"[crawl]\\nconcurrency = 2\\n\"))\n",
                          "new": "        load_config(write(tmp_path, \"[crawl]\\nconcurrency = 2\\n\"))\n" + NEW_TEST},
            "Edited tests/test_config.py: replaced 1 occurrence (line 44)."))
    c.call(("run", {"command": "python -m pytest -q tests/test_config.py"}, CONFIG_TEST_FAIL))
    c.say(
        "The new test fails only because `configs/minimal.toml` is a relative path and pytest runs from "
        "the rootdir of the test session, not always the repository root. I'll anchor it on the test file: "
        "`Path(__file__).resolve().parents[1] / \"configs\" / \"minimal.toml\"`."
    )
    c.call(("edit_file", {"path": "tests/test_config.py",
                          "old": "    config = load_config(Path(\"configs/minimal.toml\"))",
                          "new": "    root = Path(__file__).resolve().parents[1]\n"
                                 "    config = load_config(root / \"configs\" / \"minimal.toml\")"},
            "Edited tests/test_config.py: replaced 1 occurrence (line 48)."))
    c.call(("run", {"command": "python -m pytest -q tests/test_config.py"},
            "....                                                                     [100%]\n"
            "4 passed in 0.06s\nexit code: 0"))
    c.call(("run", {"command": "feedfetch crawl --config configs/minimal.toml --dry-run"},
            "dry run: 3 feeds, concurrency 2, timeout 10.0s, retries 5, backoff 0.5s, store feeds.sqlite3 "
            "(keep 30 days)\nwould fetch https://blog.rust-lang.org/feed.xml\n"
            "would fetch https://www.python.org/blogs/rss/\nwould fetch https://lwn.net/headlines/rss\n"
            "exit code: 0"))
    c.call(("run", {"command": "python -m pytest -q"},
            "..........................................                               [100%]\n"
            "42 passed in 2.87s\nexit code: 0"))
    c.say(
        "Done. `load_config` in src/feedfetch/config.py now merges the file over `DEFAULTS` with a new "
        "`_merge` helper (table by table, neither input modified), so a trimmed file like "
        "configs/minimal.toml works: the dry run shows timeout 10.0s and keep 30 days from the defaults, "
        "and retries 5 and concurrency 2 from the file. docs/configuration.md line 12 already promised this. "
        "I added `test_minimal_config_uses_defaults` to tests/test_config.py, with the path anchored on the "
        "test file so it runs from any directory; all 42 tests pass. The CLI is unchanged."
    )
    return c.transcript()


RETRY_PY = '''
"""Retries with exponential backoff and jitter for HTTP fetches."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class GiveUp(Exception):
    """Raised when every attempt failed; ``attempts`` says how many were made."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


def backoff_delays(retries: int, base: float, cap: float = 30.0) -> list[float]:
    """The sleeps between attempts: base * 2**k with full jitter, capped at ``cap``."""
    return [random.uniform(0, min(cap, base * 2**k)) for k in range(retries)]


def with_retries(fetch: Callable[[], T], *, retries: int, backoff: float,
                 retry_on: Callable[[Exception], bool]) -> T:
    delays = backoff_delays(retries, backoff)
    for attempt, delay in enumerate([0.0, *delays], 1):
        time.sleep(delay)
        try:
            return fetch()
        except Exception as exc:
            if not retry_on(exc) or attempt == retries + 1:
                raise GiveUp(f"giving up after {attempt} attempts: {exc}", attempt) from exc
    raise AssertionError("unreachable")
'''


def coding_question() -> Transcript:
    c = Chat("coding-retry-question", "coding")
    c.system(CODING_SYSTEM)
    c.user(
        "Quick question before I tune the crawler for a flaky host: with retries = 5 and backoff_ms = 500, "
        "what's the longest feedfetch can wait between two attempts, and which HTTP statuses are retried?"
    )
    c.call(("grep", {"pattern": "def with_retries|RETRY_STATUS|backoff_delays", "path": "src/"},
            "src/feedfetch/retry.py:12:RETRY_STATUS = frozenset({429, 500, 502, 503, 504})\n"
            "src/feedfetch/retry.py:23:def backoff_delays(retries: int, base: float, cap: float = 30.0) -> "
            "list[float]:\n"
            "src/feedfetch/retry.py:28:def with_retries(fetch: Callable[[], T], *, retries: int, backoff: float,\n"
            "src/feedfetch/fetch.py:85:    if exc.response.status_code in RETRY_STATUS:\n"
            "src/feedfetch/fetch.py:97:    return with_retries(get, retries=config.retries, "
            "backoff=config.backoff, retry_on=_retryable)"))
    c.call(("read_file", {"path": "src/feedfetch/retry.py"}, numbered(RETRY_PY)))
    c.call(("read_file", {"path": "src/feedfetch/fetch.py", "start_line": 80, "end_line": 97}, numbered('''
def _retryable(exc: Exception) -> bool:
    """Network errors and the statuses in RETRY_STATUS are worth another try."""
    if isinstance(exc, (httpx.ConnectError, httpx.ReadTimeout, httpx.RemoteProtocolError)):
        return True
    if isinstance(exc, httpx.HTTPStatusError):
        if exc.response.status_code in RETRY_STATUS:
            return True
        return False
    return False


def fetch_feed(url: str, config: Config, client: httpx.Client) -> bytes:
    def get() -> bytes:
        response = client.get(url, timeout=config.timeout, headers={"User-Agent": config.user_agent})
        response.raise_for_status()
        return response.content

    return with_retries(get, retries=config.retries, backoff=config.backoff, retry_on=_retryable)
''', start=80)))
    c.call(("run", {"command": "python -c \"print([min(30.0, 0.5 * 2**k) for k in range(5)])\""},
            "[0.5, 1.0, 2.0, 4.0, 8.0]\nexit code: 0"))
    c.say(
        "With retries = 5 and backoff_ms = 500 (backoff 0.5 s), feedfetch makes up to 6 attempts. "
        "`backoff_delays` in src/feedfetch/retry.py (line 23) draws each sleep uniformly between 0 and "
        "min(30.0, 0.5 * 2**k): the caps are 0.5, 1.0, 2.0, 4.0 and 8.0 seconds, so the longest single wait "
        "is 8.0 s (before the sixth attempt) and the worst case in total is 15.5 s of sleeping, plus the "
        "per-request timeout of each attempt. Retried: connection errors, read timeouts, protocol errors, and "
        "HTTP statuses in `RETRY_STATUS` = 429, 500, 502, 503, 504 (`_retryable` in src/feedfetch/fetch.py). "
        "A 404 or 403 fails at once with `GiveUp` after 1 attempt. The 30 s cap only matters from retries = 7 on."
    )
    return c.transcript()


# ---------------------------------------------------------------------------
# customer service
# ---------------------------------------------------------------------------

AIRLINE_POLICY = """
# Airline agent policy

The current time is 2024-05-15 15:00:00 EST. You are a customer service agent for a regional airline.
You can help users book, modify or cancel reservations, and answer questions about baggage and fares.

- Before any action that changes the booking database (booking, changing flights, editing baggage,
  changing cabin, updating passengers) list the action's details and get an explicit "yes" from the user.
- Get the user id from the user before looking anything up. Never guess ids or make up information.
- Make at most one tool call at a time, and do not respond to the user while a tool call is pending.
- Payment: each reservation may use at most one travel certificate, at most one credit card and at most
  three gift cards. A certificate's unused remainder is not refundable. Every payment method must already
  be in the user's profile.
- Changing flights: basic economy flights cannot be changed. Other reservations may change flights but
  not origin, destination or trip type. The fare difference is paid or refunded with one gift card or
  credit card from the profile.
- Checked bags: regular members get 0 free bags in basic economy, 1 in economy, 2 in business; silver
  members 1, 2, 3; gold members 2, 3, 3, per passenger. Each extra bag costs $50. Bags can be added but
  never removed.
- Travel insurance costs $30 per passenger and gives a full refund when the user cancels for health or
  weather reasons.
- Transfer the user to a human agent only when the request cannot be handled within this policy.
"""


def user_olivia() -> dict[str, Any]:
    return {
        "user_id": "olivia_chen_4512",
        "name": {"first_name": "Olivia", "last_name": "Chen"},
        "address": {"address1": "218 Harbor View Road", "address2": "Apt 5C", "city": "Boston",
                    "country": "USA", "state": "MA", "zip": "02127"},
        "email": "olivia.chen4512@example.com",
        "dob": "1991-07-23",
        "payment_methods": {
            "credit_card_7731902": {"source": "credit_card", "brand": "visa", "last_four": "1184",
                                    "id": "credit_card_7731902"},
            "gift_card_5520341": {"source": "gift_card", "amount": 87, "id": "gift_card_5520341"},
            "certificate_4410287": {"source": "certificate", "amount": 250, "id": "certificate_4410287"},
        },
        "saved_passengers": [{"first_name": "Daniel", "last_name": "Chen", "dob": "1989-02-11"}],
        "membership": "gold",
        "reservations": ["R7QK2M", "TX93LB", "8HZW1C"],
    }


def reservation(rid: str, origin: str, dest: str, kind: str, cabin: str, flights: list[tuple[str, str, str, str, int]],
                passengers: list[tuple[str, str, str]], pay: list[tuple[str, int]], bags: int, insurance: str,
                user_id: str, created: str) -> dict[str, Any]:
    return {
        "reservation_id": rid, "user_id": user_id, "origin": origin, "destination": dest, "flight_type": kind,
        "cabin": cabin,
        "flights": [{"origin": o, "destination": d, "flight_number": n, "date": day, "price": p}
                    for n, o, d, day, p in flights],
        "passengers": [{"first_name": f, "last_name": la, "dob": dob} for f, la, dob in passengers],
        "payment_history": [{"payment_id": pid, "amount": amount} for pid, amount in pay],
        "created_at": created, "total_baggages": bags, "nonfree_baggages": 0, "insurance": insurance,
    }


def flight(number: str, o: str, d: str, dep: str, arr: str, prices: tuple[int, int, int],
           seats: tuple[int, int, int]) -> dict[str, Any]:
    return {
        "flight_number": number, "origin": o, "destination": d, "scheduled_departure_time_est": dep,
        "scheduled_arrival_time_est": arr, "status": "available",
        "available_seats": dict(zip(("basic_economy", "economy", "business"), seats)),
        "prices": dict(zip(("basic_economy", "economy", "business"), prices)),
    }


def airline_change() -> Transcript:
    c = Chat("airline-change-flight", "airline")
    c.system(AIRLINE_POLICY)
    c.user("Hi, I need to move my flight to Chicago next week by one day. Can you help?")
    c.say("Of course. Could you give me your user id, and the reservation id if you have it at hand?")
    c.user("My user id is olivia_chen_4512. I don't have the reservation number with me, sorry.")
    c.call(("get_user_details", {"user_id": "olivia_chen_4512"}, user_olivia()))
    c.call(("get_reservation_details", {"reservation_id": "R7QK2M"}, reservation(
        "R7QK2M", "BOS", "SFO", "one_way", "business", [("HAT402", "BOS", "SFO", "2024-06-03", 689)],
        [("Olivia", "Chen", "1991-07-23")], [("credit_card_7731902", 689)], 1, "yes", "olivia_chen_4512",
        "2024-04-28T10:14:51")))
    c.call(("get_reservation_details", {"reservation_id": "TX93LB"}, reservation(
        "TX93LB", "BOS", "ORD", "round_trip", "economy",
        [("HAT118", "BOS", "ORD", "2024-05-21", 189), ("HAT245", "ORD", "BOS", "2024-05-24", 204)],
        [("Olivia", "Chen", "1991-07-23")], [("credit_card_7731902", 393)], 1, "no", "olivia_chen_4512",
        "2024-05-02T19:40:07")))
    c.say(
        "I found it: reservation TX93LB, Boston (BOS) to Chicago (ORD) on May 21 on flight HAT118, returning "
        "May 24 on HAT245, economy, one passenger. Which leg would you like to move, and to which day?"
    )
    c.user("The outbound. I'd like to fly on May 22 instead, ideally at the same time of day. Keep the return as is.")
    c.call(("search_direct_flight", {"origin": "BOS", "destination": "ORD", "date": "2024-05-22"}, [
        flight("HAT118", "BOS", "ORD", "08:10:00", "10:05:00", (112, 198, 466), (6, 14, 4)),
        flight("HAT301", "BOS", "ORD", "13:40:00", "15:32:00", (98, 176, 431), (0, 9, 7)),
        flight("HAT077", "BOS", "ORD", "17:55:00", "19:51:00", (121, 205, 489), (11, 3, 2)),
        flight("HAT263", "BOS", "ORD", "21:20:00", "23:14:00", (87, 161, 402), (15, 20, 8)),
    ]))
    c.say(
        "On May 22 there are four direct flights from BOS to ORD with economy seats:\n"
        "1. HAT118 dep 08:10, arr 10:05, economy $198 (same flight and time as now)\n"
        "2. HAT301 dep 13:40, arr 15:32, economy $176\n"
        "3. HAT077 dep 17:55, arr 19:51, economy $205\n"
        "4. HAT263 dep 21:20, arr 23:14, economy $161\n"
        "Which one would you like?"
    )
    c.user("HAT118 again please, the morning one.")
    c.say(
        "Here is the change before I make it:\n"
        "- Reservation TX93LB, economy, 1 passenger (Olivia Chen)\n"
        "- Outbound: HAT118 on 2024-05-22 (was 2024-05-21), price $198 (was $189)\n"
        "- Return: HAT245 on 2024-05-24, unchanged\n"
        "- Fare difference: $9, to be charged to your Visa ending in 1184 (credit_card_7731902), or to your "
        "gift card with $87 if you prefer.\n"
        "Shall I go ahead (yes/no)?"
    )
    c.user("Yes, go ahead. The Visa is fine.")
    updated = reservation(
        "TX93LB", "BOS", "ORD", "round_trip", "economy",
        [("HAT118", "BOS", "ORD", "2024-05-22", 198), ("HAT245", "ORD", "BOS", "2024-05-24", 204)],
        [("Olivia", "Chen", "1991-07-23")], [("credit_card_7731902", 393), ("credit_card_7731902", 9)], 1, "no",
        "olivia_chen_4512", "2024-05-02T19:40:07")
    c.call(("update_reservation_flights", {
        "reservation_id": "TX93LB", "cabin": "economy",
        "flights": [{"flight_number": "HAT118", "date": "2024-05-22"}, {"flight_number": "HAT245", "date": "2024-05-24"}],
        "payment_id": "credit_card_7731902"}, updated))
    c.say(
        "Done. TX93LB now leaves Boston on May 22 on HAT118 at 08:10 and returns on May 24 on HAT245. "
        "$9 was charged to your Visa ending in 1184. Is there anything else?"
    )
    c.user("Actually yes, I'll have more luggage on this trip. Can I add a checked bag?")
    c.say(
        "As a gold member flying economy you get 3 free checked bags. The reservation has 1 bag now, so "
        "I can raise it to 2 at no cost:\n"
        "- Reservation TX93LB: total bags 1 -> 2, non-free bags 0, cost $0\n"
        "Shall I make this change (yes/no)?"
    )
    c.user("Yes please.")
    bags = dict(updated, total_baggages=2)
    c.call(("update_reservation_baggages", {"reservation_id": "TX93LB", "total_baggages": 2, "nonfree_baggages": 0,
                                            "payment_id": "credit_card_7731902"}, bags))
    c.say("Your reservation TX93LB now includes 2 checked bags, free of charge. Have a good trip to Chicago!")
    c.user("Thanks, that's all.")
    return c.transcript()


def airline_booking() -> Transcript:
    c = Chat("airline-book-family", "airline")
    c.system(AIRLINE_POLICY)
    c.user("Hello! I want to book a one-way flight from New York JFK to Seattle on May 20 for me and my son.")
    c.say("Happy to help. May I have your user id first?")
    c.user("Sure: noah_patel_2207")
    c.call(("get_user_details", {"user_id": "noah_patel_2207"}, {
        "user_id": "noah_patel_2207",
        "name": {"first_name": "Noah", "last_name": "Patel"},
        "address": {"address1": "47 Linden Street", "address2": "", "city": "Brooklyn", "country": "USA",
                    "state": "NY", "zip": "11221"},
        "email": "noah.patel@example.com", "dob": "1986-11-02",
        "payment_methods": {
            "certificate_8843210": {"source": "certificate", "amount": 150, "id": "certificate_8843210"},
            "credit_card_3301987": {"source": "credit_card", "brand": "mastercard", "last_four": "5521",
                                    "id": "credit_card_3301987"},
            "gift_card_9047716": {"source": "gift_card", "amount": 40, "id": "gift_card_9047716"},
        },
        "saved_passengers": [{"first_name": "Arjun", "last_name": "Patel", "dob": "2012-03-14"},
                             {"first_name": "Meera", "last_name": "Patel", "dob": "1988-05-30"}],
        "membership": "silver", "reservations": ["Q4NB7S"],
    }))
    c.say(
        "Thanks, Noah. Is your son Arjun Patel (born 2012-03-14) from your saved passengers? And which cabin "
        "would you like: basic economy, economy or business?"
    )
    c.user("Yes, Arjun. Economy, whatever is cheapest in the afternoon if possible.")
    c.call(("search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}, [
        flight("HAT069", "JFK", "SEA", "06:00:00", "12:15:00", (204, 312, 1011), (8, 5, 3)),
        flight("HAT083", "JFK", "SEA", "10:30:00", "16:41:00", (219, 347, 1134), (2, 0, 6)),
    ]))
    c.call(("search_onestop_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}, [
        [flight("HAT136", "JFK", "ORD", "13:00:00", "15:05:00", (95, 142, 420), (9, 12, 5)),
         flight("HAT289", "ORD", "SEA", "16:30:00", "19:05:00", (88, 151, 455), (4, 7, 2))],
        [flight("HAT212", "JFK", "ATL", "14:15:00", "16:55:00", (80, 133, 390), (12, 18, 9)),
         flight("HAT031", "ATL", "SEA", "18:00:00", "21:10:00", (101, 165, 512), (3, 6, 4))],
    ]), thought="No direct flight leaves in the afternoon; checking one-stop options too.")
    c.say(
        "The direct flights on May 20 leave in the morning: HAT069 at 06:00 (economy $312) and HAT083 at "
        "10:30 (no economy seats left). In the afternoon there are one-stop options in economy:\n"
        "1. HAT136 JFK 13:00 -> ORD 15:05, then HAT289 ORD 16:30 -> SEA 19:05: $142 + $151 = $293 per person\n"
        "2. HAT212 JFK 14:15 -> ATL 16:55, then HAT031 ATL 18:00 -> SEA 21:10: $133 + $165 = $298 per person\n"
        "The cheapest is option 1 at $293 per person, $586 for both of you."
    )
    c.user("Option 1 is good. One checked bag in total, no insurance. Pay with the certificate and the rest on my card.")
    c.say(
        "Here is the booking before I make it:\n"
        "- One way JFK -> SEA on 2024-05-20, economy: HAT136 (JFK -> ORD) and HAT289 (ORD -> SEA)\n"
        "- Passengers: Noah Patel (1986-11-02), Arjun Patel (2012-03-14)\n"
        "- Price: 2 x $293 = $586\n"
        "- Bags: 1 checked bag, free (silver members get 2 free bags each in economy)\n"
        "- Insurance: no\n"
        "- Payment: certificate_8843210 $150, then $436 on your Mastercard ending in 5521 (credit_card_3301987)\n"
        "Note that a certificate's unused remainder is not refundable. Shall I book it (yes/no)?"
    )
    c.user("yes")
    c.call(("book_reservation", {
        "user_id": "noah_patel_2207", "origin": "JFK", "destination": "SEA", "flight_type": "one_way",
        "cabin": "economy",
        "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}, {"flight_number": "HAT289", "date": "2024-05-20"}],
        "passengers": [{"first_name": "Noah", "last_name": "Patel", "dob": "1986-11-02"},
                       {"first_name": "Arjun", "last_name": "Patel", "dob": "2012-03-14"}],
        "payment_methods": [{"payment_id": "certificate_8843210", "amount": 150},
                            {"payment_id": "credit_card_3301987", "amount": 436}],
        "total_baggages": 1, "nonfree_baggages": 0, "insurance": "no"}, reservation(
        "K2V8PD", "JFK", "SEA", "one_way", "economy",
        [("HAT136", "JFK", "ORD", "2024-05-20", 142), ("HAT289", "ORD", "SEA", "2024-05-20", 151)],
        [("Noah", "Patel", "1986-11-02"), ("Arjun", "Patel", "2012-03-14")],
        [("certificate_8843210", 150), ("credit_card_3301987", 436)], 1, "no", "noah_patel_2207",
        "2024-05-15T15:06:42")))
    c.say(
        "You're booked! Reservation K2V8PD: HAT136 from JFK at 13:00 with a connection in Chicago to HAT289, "
        "arriving in Seattle at 19:05 on May 20, for you and Arjun, with 1 checked bag. $150 came from the "
        "certificate and $436 from your Mastercard ending in 5521."
    )
    c.user("Great. If we end up with two bags, can I add one at the airport or do I have to pay?")
    c.say(
        "You can add it later through us (bags can be added, never removed). As a silver member in economy "
        "each of you gets 2 free checked bags, so a second bag on K2V8PD would still be free."
    )
    c.user("Perfect, thank you!")
    return c.transcript()


RETAIL_POLICY = """
# Retail agent policy

You help users of an online electronics and home store with their orders: cancelling pending orders,
modifying pending orders, returning or exchanging delivered orders, and updating addresses.

- Authenticate the user first, by email or by name and zip code, even if they give a user id.
- One user per conversation. Before any consequential action (cancel, modify, return, exchange) list the
  details and get an explicit "yes".
- Exchanges: only delivered orders; an item can be exchanged for another variant of the same product
  (different options), once per order. All items to exchange must be collected in one call. The price
  difference is paid or refunded with a payment method from the user's profile.
- Do not make up product ids, item ids or prices: read them with the tools.
"""


def retail_exchange() -> Transcript:
    c = Chat("retail-exchange-keyboard", "retail")
    c.system(RETAIL_POLICY)
    c.user("Hi, I got a mechanical keyboard last week and the switches are way too loud. Can I exchange it?")
    c.say("I can help with that. First I need to confirm your identity: what's the email on your account?")
    c.user("It's lucas.moreau@example.net")
    c.call(("find_user_id_by_email", {"email": "lucas.moreau@example.net"}, "lucas_moreau_9120"))
    c.call(("get_user_details", {"user_id": "lucas_moreau_9120"}, {
        "user_id": "lucas_moreau_9120", "name": {"first_name": "Lucas", "last_name": "Moreau"},
        "address": {"address1": "903 Pine Street", "address2": "Unit 12", "city": "Denver", "country": "USA",
                    "state": "CO", "zip": "80203"},
        "email": "lucas.moreau@example.net",
        "payment_methods": {"paypal_6612094": {"source": "paypal", "id": "paypal_6612094"},
                            "gift_card_2281553": {"source": "gift_card", "balance": 35, "id": "gift_card_2281553"}},
        "orders": ["#W4827113", "#W9031544"],
    }))
    c.call(("get_order_details", {"order_id": "#W4827113"}, {
        "order_id": "#W4827113", "user_id": "lucas_moreau_9120", "status": "delivered",
        "address": {"address1": "903 Pine Street", "address2": "Unit 12", "city": "Denver", "state": "CO",
                    "zip": "80203", "country": "USA"},
        "items": [
            {"name": "Mechanical Keyboard", "product_id": "1656367028", "item_id": "4843487907",
             "price": 212.04, "options": {"switch type": "clicky", "backlight": "RGB", "size": "full size"}},
            {"name": "Wrist Rest", "product_id": "7710935527", "item_id": "3102290714", "price": 24.99,
             "options": {"material": "memory foam", "color": "black"}},
        ],
        "fulfillments": [{"tracking_id": ["517034992265"], "item_ids": ["4843487907", "3102290714"]}],
        "payment_history": [{"transaction_type": "payment", "amount": 237.03, "payment_method_id": "paypal_6612094"}],
    }))
    c.call(("get_product_details", {"product_id": "1656367028"}, {
        "name": "Mechanical Keyboard", "product_id": "1656367028",
        "variants": {
            "4843487907": {"item_id": "4843487907", "options": {"switch type": "clicky", "backlight": "RGB",
                                                               "size": "full size"}, "available": True, "price": 212.04},
            "9025753381": {"item_id": "9025753381", "options": {"switch type": "linear", "backlight": "RGB",
                                                               "size": "full size"}, "available": True, "price": 231.58},
            "7706410293": {"item_id": "7706410293", "options": {"switch type": "tactile", "backlight": "none",
                                                               "size": "full size"}, "available": True, "price": 197.32},
            "1151293680": {"item_id": "1151293680", "options": {"switch type": "linear", "backlight": "RGB",
                                                               "size": "80%"}, "available": False, "price": 220.65},
            "6342039236": {"item_id": "6342039236", "options": {"switch type": "tactile", "backlight": "white",
                                                               "size": "full size"}, "available": True, "price": 208.07},
        },
    }))
    c.say(
        "Thanks, Lucas. Order #W4827113 (delivered) has the Mechanical Keyboard with clicky switches, RGB "
        "backlight, full size, for $212.04. Quieter variants of the same keyboard in stock:\n"
        "1. linear switches, RGB, full size: $231.58\n"
        "2. tactile switches, no backlight, full size: $197.32\n"
        "3. tactile switches, white backlight, full size: $208.07\n"
        "(The linear 80% version is out of stock.) Which would you like?"
    )
    c.user("Linear with RGB, full size. What would I owe?")
    c.say(
        "Here is the exchange before I submit it:\n"
        "- Order #W4827113: Mechanical Keyboard item 4843487907 (clicky, RGB, full size, $212.04) -> "
        "item 9025753381 (linear, RGB, full size, $231.58)\n"
        "- Price difference: $19.54, charged to your PayPal (paypal_6612094), or to your gift card with $35\n"
        "You'll get instructions by email for returning the old keyboard. Note that an order can only be "
        "exchanged once, so is the wrist rest fine as it is? Shall I go ahead (yes/no)?"
    )
    c.user("Wrist rest is fine. Yes, use the gift card.")
    c.call(("exchange_delivered_order_items", {
        "order_id": "#W4827113", "item_ids": ["4843487907"], "new_item_ids": ["9025753381"],
        "payment_method_id": "gift_card_2281553"}, {
        "order_id": "#W4827113", "user_id": "lucas_moreau_9120", "status": "exchange requested",
        "exchange_items": ["4843487907"], "exchange_new_items": ["9025753381"],
        "exchange_payment_method_id": "gift_card_2281553", "exchange_price_difference": 19.54,
    }))
    c.say(
        "Done: the exchange for order #W4827113 is requested. The linear RGB full-size keyboard "
        "(item 9025753381) will ship once the clicky one is on its way back; $19.54 was taken from your gift "
        "card, which has $15.46 left. Anything else?"
    )
    c.user("No, that's it. Thanks!")
    return c.transcript()


# ---------------------------------------------------------------------------
# long chat
# ---------------------------------------------------------------------------

# (speaker, text) turns per session; sessions are (date, turns).
CHAT_MAYA_JONAS: list[tuple[str, list[tuple[str, str]]]] = [
    ("8:15 pm on 3 March, 2023", [
        ("Maya", "Jonas! It's been ages. How's Lisbon treating you?"),
        ("Jonas", "Maya! Lisbon is great, the light here is unreal. I finally started the ceramics course I kept talking about."),
        ("Maya", "No way, the one at the studio near Graça? What are you making?"),
        ("Jonas", "That one. Right now mostly wonky bowls. My teacher, Inês, says centering the clay takes everyone a month."),
        ("Maya", "Ha, I'd love a wonky bowl. Things here are hectic, I just accepted the job at Northwind Bakery as head of pastry."),
        ("Jonas", "Head of pastry! Congratulations! When do you start?"),
        ("Maya", "On the 20th of March. I'm nervous, the team is twelve people and I've only ever led three."),
        ("Jonas", "You'll be fine. You ran that pop-up for two summers basically alone."),
        ("Maya", "True. Also, big news at home: we adopted a dog. A beagle mix called Biscuit, two years old."),
        ("Jonas", "Biscuit! Perfect name for a pastry chef's dog. Is he trouble?"),
        ("Maya", "He ate a whole loaf of sourdough off the counter on day two. So yes."),
        ("Jonas", "Ha! Send pictures. Are you still running?"),
        ("Maya", "Trying to. I signed up for the Riverside Half Marathon in June, my first half."),
        ("Jonas", "That's brave with a new job. Do you have a training plan?"),
        ("Maya", "Three runs a week, long run on Sundays. I'm at 9 kilometres for the long run now."),
        ("Jonas", "Nice. I'll cheer from Lisbon. I should go, my class starts at nine tomorrow."),
    ]),
    ("1:40 pm on 2 April, 2023", [
        ("Jonas", "How were your first two weeks at Northwind?"),
        ("Maya", "Intense! The ovens are ancient and the morning shift starts at 4 am. But the team is lovely."),
        ("Jonas", "4 am! How is Biscuit coping with your hours?"),
        ("Maya", "My partner Sam walks him in the mornings now. Biscuit has decided Sam is his favourite, the traitor."),
        ("Jonas", "Ha. I have news too: I glazed my first set of cups. Celadon green, four of them, and only one cracked in the kiln."),
        ("Maya", "Celadon! Fancy. Are you keeping them?"),
        ("Jonas", "I'm giving one to my sister Leonor for her birthday on the 14th. She turns thirty."),
        ("Maya", "That's a lovely gift. How's the training for the Porto trip going, by the way? Weren't you planning to walk part of the Camino?"),
        ("Jonas", "Yes, the Portuguese coastal route, from Porto to Vigo. I'm going in September with my friend Tiago."),
        ("Maya", "How long is that?"),
        ("Jonas", "About 150 kilometres, we plan ten days so we don't suffer too much."),
        ("Maya", "Sounds amazing. My long run is up to 14 km now, and my knee only complained once."),
        ("Jonas", "Be careful with that knee. Did you see a physio?"),
        ("Maya", "Not yet. If it hurts again I'll book one. The race is on June 11, so I have time."),
        ("Jonas", "Good. What are you baking these days?"),
        ("Maya", "I'm putting a cardamom bun on the menu. My grandmother's recipe from Gothenburg, with a bit less sugar."),
        ("Jonas", "Save me one for when I visit in the summer."),
    ]),
    ("10:05 am on 21 May, 2023", [
        ("Maya", "Jonas, the cardamom buns sold out every day this week. My boss wants them on the permanent menu."),
        ("Jonas", "I knew it! Your grandmother would be proud."),
        ("Maya", "She would. Bad news though: my knee got worse, so I finally saw a physio. It's runner's knee."),
        ("Jonas", "Oh no. Can you still do the half marathon?"),
        ("Maya", "The physio says yes if I cut my mileage for two weeks and do the strength exercises. So I'm hopeful."),
        ("Jonas", "Do the exercises! I'm a bit jealous, my big project is much slower. I'm building a wheel-thrown vase for the student show."),
        ("Maya", "When's the show?"),
        ("Jonas", "The 17th of June, at the studio. Inês picked three students and I'm one of them."),
        ("Maya", "That's huge! Can you send a photo of the vase?"),
        ("Jonas", "When it's out of the kiln. It's tall, about 40 centimetres, with a cobalt blue glaze."),
        ("Maya", "I'll frame it. Sam and I are thinking of visiting Lisbon in August, by the way."),
        ("Jonas", "Come! You can stay at my place, I have a sofa bed and a view of the river."),
        ("Maya", "Would Biscuit be welcome too? He'd come with us."),
        ("Jonas", "Of course, but my building has no lift and I'm on the fourth floor. Beagles and stairs, hmm."),
        ("Maya", "He'll manage. He climbs onto the kitchen counter, after all."),
    ]),
    ("7:30 pm on 12 June, 2023", [
        ("Maya", "I did it!! Riverside Half Marathon, 2 hours 7 minutes!"),
        ("Jonas", "MAYA! Congratulations! How was the knee?"),
        ("Maya", "It held up. A bit sore after kilometre 16 but the exercises worked. Sam and Biscuit cheered at the finish."),
        ("Jonas", "I'm so proud. Are you going to do another one?"),
        ("Maya", "Maybe the autumn one in October, if work lets me. We're opening a second shop in the Harbour district in September."),
        ("Jonas", "Another shop! Will you run pastry for both?"),
        ("Maya", "Yes, and I'm hiring two new pastry cooks. Exciting and terrifying."),
        ("Jonas", "My show is on Saturday. I'm nervous, the vase has a small crack near the base."),
        ("Maya", "Nobody will notice. Or call it wabi-sabi."),
        ("Jonas", "Ha, Inês said exactly that. Are you still coming in August?"),
        ("Maya", "Yes! We booked flights for the 9th to the 16th of August. Biscuit is coming, stairs or not."),
        ("Jonas", "Perfect. I'll take you to the ceramics market in Caldas da Rainha."),
    ]),
    ("6:10 pm on 27 August, 2023", [
        ("Maya", "We're home. Lisbon was the best week of the year, thank you for hosting us, and for carrying Biscuit up four floors twice."),
        ("Jonas", "He only made me carry him when it was hot. It was a joy having you. Sam's cooking was a revelation."),
        ("Maya", "He still talks about the fish market in Cascais. And I still can't believe the vase sold at the show."),
        ("Jonas", "Neither can I. A couple from Ghent bought it for 120 euros. Inês says I should apply for a stall at the Christmas market."),
        ("Maya", "You should! What would you sell?"),
        ("Jonas", "Sets of four cups in the celadon glaze, and small bowls. I'd need about forty pieces by December."),
        ("Maya", "Forty! That's a lot of wonky bowls. Speaking of numbers, the Harbour shop opens on September 18th."),
        ("Jonas", "So soon! Did you hire the two pastry cooks?"),
        ("Maya", "One of them, Priya, who used to work in a hotel kitchen in Manchester. Still interviewing for the second."),
        ("Jonas", "And the October half marathon?"),
        ("Maya", "I'm skipping it. With the opening I can't train properly, and my knee agrees. Next spring instead."),
        ("Jonas", "Sensible. The Camino starts on September 9th, by the way. Tiago has bought us matching hats, which I did not agree to."),
        ("Maya", "Send a photo of the hats, that's non-negotiable. And the ceramics from Caldas da Rainha are on our kitchen shelf now."),
        ("Jonas", "The cabbage-leaf plates? Good choice. Buen Camino to me, I suppose."),
    ]),
]


CHAT_RUTH_OMAR: list[tuple[str, list[tuple[str, str]]]] = [
    ("9:00 am on 6 January, 2024", [
        ("Ruth", "Happy new year, Omar! Any resolutions?"),
        ("Omar", "Happy new year! Yes: learn to play the cello. I rented one from a shop in Leeds yesterday."),
        ("Ruth", "The cello! At forty-two, I respect it. Do you have a teacher?"),
        ("Omar", "A retired orchestra player called Mr. Hargreaves. Lessons are on Thursday evenings."),
        ("Ruth", "Lovely. My resolution is less romantic: finish my thesis on river restoration by July."),
        ("Omar", "How far along are you?"),
        ("Ruth", "Three chapters out of five. The fieldwork chapter on the River Wharfe is the hard one."),
        ("Omar", "You'll get there. How is your mum doing after the hip operation?"),
        ("Ruth", "Much better, thanks. She's walking with one crutch now and bossing the physio around."),
        ("Omar", "That sounds like her. Tell her I said hello."),
        ("Ruth", "I will. Also, I'm fostering a cat for the shelter. A grey tabby called Pepper. Just for a month, they say."),
        ("Omar", "Famous last words. Foster fail incoming."),
    ]),
    ("6:45 pm on 18 February, 2024", [
        ("Omar", "Update: I can play 'Ode to Joy' on the cello. Slowly. Very slowly."),
        ("Ruth", "That's wonderful! How does Mr. Hargreaves rate you?"),
        ("Omar", "He says my bowing is 'enthusiastic'. I think that's a polite word for loud."),
        ("Ruth", "Ha! Okay, confession: Pepper is staying. I signed the adoption papers on Valentine's Day."),
        ("Omar", "I called it! Foster fail. How's the thesis?"),
        ("Ruth", "Chapter four is drafted. My supervisor, Dr. Okafor, wants more data on trout numbers before and after the weir removal."),
        ("Omar", "Trout numbers, the stuff of legends. Do you have the data?"),
        ("Ruth", "The Environment Agency has counts from 2015 to 2022. I requested them last week; they say six weeks."),
        ("Omar", "Bureaucracy. Meanwhile I've been asked to play in the community orchestra's spring concert. Back row, easy parts."),
        ("Ruth", "When is it? I'll come."),
        ("Omar", "The 27th of April at St. Anne's church hall. Seven thirty."),
        ("Ruth", "It's in my diary. Mum might come too, she loves a church hall concert."),
        ("Omar", "Brilliant. I'll need friendly faces in the audience."),
    ]),
    ("11:20 am on 28 April, 2024", [
        ("Ruth", "Omar, last night was fantastic! You looked so calm."),
        ("Omar", "I was terrified. I lost my place in the second movement for four bars."),
        ("Ruth", "Nobody noticed. Mum said the cellos were her favourite section."),
        ("Omar", "She's very kind. Did the trout data ever arrive?"),
        ("Ruth", "Finally, yes, on April 2nd. And the result is great: trout numbers doubled in the three years after the weir came out."),
        ("Omar", "That's a headline! Does it finish chapter four?"),
        ("Ruth", "It does. Dr. Okafor wants me to submit a paper from it too, to a journal called River Research and Applications."),
        ("Omar", "A paper! You're officially a scientist."),
        ("Ruth", "Ha. Pepper disagrees, she sat on my laptop during the statistics."),
        ("Omar", "Peer review by cat. Speaking of news, I'm moving. I found a flat in York, closer to my new job."),
        ("Ruth", "New job? You kept that quiet!"),
        ("Omar", "I start in June as a data analyst for the railway museum. I'll keep the cello lessons online with Mr. Hargreaves."),
        ("Ruth", "York is only forty minutes from me. We'll see each other more."),
        ("Omar", "Exactly my plan. Moving day is May 25th."),
    ]),
    ("8:50 pm on 9 June, 2024", [
        ("Omar", "Greetings from York! The flat is full of boxes and the cello is the only thing unpacked."),
        ("Ruth", "Priorities. How did the move go?"),
        ("Omar", "The van was two hours late and the sofa didn't fit up the stairs, so it's in my neighbour's garage for now."),
        ("Ruth", "Oh no. Was the neighbour nice about it?"),
        ("Omar", "Very. She's called Agnes, she's eighty and she used to be a piano teacher. We're going to try a duet."),
        ("Ruth", "Only you could move house and form a chamber group in a week. How's the job at the railway museum?"),
        ("Omar", "Week one was all about passenger numbers. Visits went up 18 percent since the new steam gallery opened."),
        ("Ruth", "That's a nice first finding. My news: the paper was accepted with minor revisions!"),
        ("Omar", "Ruth! The trout paper? Congratulations!"),
        ("Ruth", "Yes. Dr. Okafor bought champagne, and the reviewers only want a clearer map of the River Wharfe sites."),
        ("Omar", "And the thesis deadline in July, are you on track?"),
        ("Ruth", "I moved it to the end of August with my supervisor's blessing. Chapter five needs the paper's revisions first."),
        ("Omar", "Sensible. How's Pepper?"),
        ("Ruth", "Pepper caught a mouse, brought it to my mother's feet, and Mum has forgiven her for everything."),
        ("Omar", "Ha. Come visit when the sofa is back and I'll play you the duet."),
    ]),
]

CHAT_QUERIES = {
    "chat-maya-jonas": [
        ("What is the name of Maya's dog, and what kind of dog is it?", ["D1:9"], None, 4,
         "Biscuit, a beagle mix"),
        ("When did Maya start her job at Northwind Bakery?", ["D1:5", "D1:7"], None, 2, "20 March 2023"),
        ("Who is Jonas's ceramics teacher?", ["D1:4"], 16, 4, "Inês"),
        ("What did Jonas give his sister for her birthday?", ["D2:5", "D2:7"], None, 1,
         "One of his celadon green cups"),
        ("How long is the Camino route Jonas plans to walk, and with whom?", ["D2:9", "D2:11"], None, 1,
         "About 150 km, from Porto to Vigo, with Tiago"),
        ("What injury did Maya have while training, and did she finish the half marathon?",
         ["D3:3", "D4:1", "D4:3"], None, 1, "Runner's knee; yes, in 2 hours 7 minutes"),
        ("Where does the cardamom bun recipe come from?", ["D2:16"], 33, 4, "Maya's grandmother, from Gothenburg"),
        ("When is Maya visiting Lisbon and who is coming?", ["D3:11", "D3:13", "D4:11"], None, 2,
         "9 to 16 August 2023, with Sam and Biscuit"),
        ("What colour is the glaze on Jonas's vase for the student show?", ["D3:10"], None, 4, "Cobalt blue"),
        ("What happened to the vase Jonas made for the student show?", ["D3:6", "D4:8", "D5:4"], None, 1,
         "It had a small crack near the base, and a couple from Ghent bought it for 120 euros"),
        ("Did Maya run the October half marathon?", ["D4:5", "D5:11"], None, 2,
         "No; she skipped it because of the Harbour shop opening and her knee"),
        ("When does the Harbour shop open?", ["D4:5", "D5:7"], 70, 2, "18 September 2023"),
    ],
    "chat-ruth-omar": [
        ("What instrument did Omar start learning, and who teaches him?", ["D1:2", "D1:4"], None, 1,
         "The cello, with Mr. Hargreaves"),
        ("What is Ruth's thesis about?", ["D1:5", "D1:7"], 12, 4, "River restoration, with fieldwork on the River Wharfe"),
        ("When did Ruth adopt Pepper?", ["D1:11", "D2:4"], None, 2, "On Valentine's Day 2024 (14 February)"),
        ("Where and when was the spring concert?", ["D2:11"], None, 2, "27 April 2024 at St. Anne's church hall"),
        ("What did the Environment Agency data show?", ["D2:8", "D3:5"], None, 1,
         "Trout numbers doubled in the three years after the weir removal"),
        ("What is Omar's new job and when does he move?", ["D3:10", "D3:12", "D3:14"], None, 1,
         "Data analyst at the railway museum in York; moving on 25 May"),
        ("Who is Ruth's supervisor?", ["D2:6"], None, 4, "Dr. Okafor"),
        ("Which journal did Ruth submit her paper to, and what happened?", ["D3:7", "D4:8", "D4:10"], None, 1,
         "River Research and Applications; accepted with minor revisions"),
        ("Who is Agnes?", ["D4:5"], None, 4, "Omar's eighty-year-old neighbour in York, a former piano teacher"),
        ("When did Omar say he would move, and where is his sofa?", ["D3:14", "D4:3"], 45, 2,
         "25 May; in his neighbour's garage"),
    ],
}


def long_chat(tid: str, speakers: tuple[str, str], sessions: list[tuple[str, list[tuple[str, str]]]]) -> Transcript:
    messages: list[dict[str, Any]] = []
    roles = {speakers[0]: "user", speakers[1]: "assistant"}
    for s, (date, turns) in enumerate(sessions, 1):
        for k, (speaker, text) in enumerate(turns, 1):
            messages.append({"id": f"D{s}:{k}", "role": roles[speaker], "name": speaker, "content": text,
                             "meta": {"session": s, "date": date, "speaker": speaker}})
    queries = tuple(
        Query(text=text, evidence=tuple(evidence), at=at, meta={"category": cat, "answer": answer})
        for text, evidence, at, cat, answer in CHAT_QUERIES[tid]
    )
    # Messages carry "meta"; the canonical JSONL parser moves it into Entry.meta.
    from salience.datasets.jsonl import parse_transcript

    obj = {"id": tid, "domain": "conversation", "messages": messages,
           "meta": {"speaker_a": speakers[0], "speaker_b": speakers[1],
                    "sessions": [{"session": s, "date": d} for s, (d, _) in enumerate(sessions, 1)]}}
    t = parse_transcript(obj, default_id=tid)
    return t.replace(queries=queries)


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------


def build() -> dict[str, list[Transcript]]:
    """The sample files' transcripts, labelled, by file name."""
    files = {
        "coding_agent.jsonl": [coding_invoice(), coding_config(), coding_question()],
        "customer_service.jsonl": [airline_change(), airline_booking(), retail_exchange()],
        "long_chat.jsonl": [
            long_chat("chat-maya-jonas", ("Maya", "Jonas"), CHAT_MAYA_JONAS),
            long_chat("chat-ruth-omar", ("Ruth", "Omar"), CHAT_RUTH_OMAR),
        ],
    }
    return {name: label(ts, mode="auto") for name, ts in files.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the files differ from what would be written")
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write to (default: data/)")
    args = parser.parse_args(argv)
    built = build()
    if args.check:
        stale = []
        with tempfile.TemporaryDirectory() as tmp:
            for name, transcripts in built.items():
                fresh = save_transcripts(transcripts, Path(tmp) / name).read_text(encoding="utf-8")
                current = args.out / name
                if not current.exists() or current.read_text(encoding="utf-8") != fresh:
                    stale.append(name)
        if stale:
            print(f"stale sample files (rerun python data/make_samples.py): {', '.join(stale)}", file=sys.stderr)
            return 1
        return 0
    for name, transcripts in built.items():
        path = save_transcripts(transcripts, args.out / name)
        print(f"wrote {path} ({len(transcripts)} transcripts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
