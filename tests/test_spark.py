"""The Compactor's MLflow model as a Spark UDF, on a local one-core Spark session.

The model folder comes from :func:`salience.training.tracking.save_compactor_model`
(a scorer trained on ``data/`` without embeddings, for speed); ``mlflow.pyfunc.spark_udf``
applies it to a DataFrame of transcripts (OpenAI messages as JSON strings), with a struct
result. Prints rows per second. Skips only when pyspark or Java is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadpoolctl import threadpool_limits

from conftest import SAMPLES
from salience import load_transcripts
from salience.scorer.features import FeatureExtractor
from salience.scorer.model import ImportanceScorer
from salience.selector.compactor import Compactor

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[dev]' or '.[spark]')")


def _java() -> str | None:
    java = shutil.which("java") or (os.path.join(os.environ["JAVA_HOME"], "bin", "java")
                                    if os.environ.get("JAVA_HOME") else None)
    if java is None or not os.path.exists(java):
        return None
    try:
        subprocess.run([java, "-version"], capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return java


if _java() is None:
    pytest.skip("Java is not installed (pyspark needs a JRE: apt-get install openjdk-17-jre-headless)",
                allow_module_level=True)

RESULT = ("messages string, tokens long, budget long, kept string, trimmed string, stubbed string, "
          "dropped string, over_budget boolean")


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[1]")
        .appName("salience-test")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "768m")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    _stop_jvm()


def _stop_jvm() -> None:
    """End the JVM this test's session started (``stop()`` leaves it running until Python exits)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    SparkContext._gateway = None
    SparkContext._jvm = None
    gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        proc.stdin.close()  # the gateway server exits when its stdin closes
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def scorer() -> ImportanceScorer:
    with threadpool_limits(1):
        return ImportanceScorer(features=FeatureExtractor(use_embeddings=False)).fit(load_transcripts(SAMPLES))


@pytest.fixture(scope="module")
def model_dir(scorer: ImportanceScorer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from salience.training.tracking import save_compactor_model

    return save_compactor_model(scorer, tmp_path_factory.mktemp("spark") / "model")


@pytest.fixture(scope="module")
def rows(scorer: ImportanceScorer) -> list[tuple[str, int]]:
    """Each sample transcript as OpenAI messages (JSON), with a budget of 40% of its tokens or,
    where the pinned entries need more, 50 tokens above what they need."""
    out = []
    sizer = Compactor(scorer=scorer, budget=10**9, on_over_budget="keep_pins")
    for t in load_transcripts(SAMPLES):
        messages = t.to_openai(with_ids=True, with_labels=False)
        tokens = sizer.compact(messages).tokens
        pins = sizer.compact(messages, budget=1).tokens
        out.append((json.dumps(messages), max(int(tokens * 0.4), pins + 50)))
    return out


def test_compactor_model_as_a_spark_udf(
    spark: Any, model_dir: Path, scorer: ImportanceScorer, rows: list[tuple[str, int]]
) -> None:
    import mlflow.pyfunc
    from pyspark.sql import functions as F

    udf = mlflow.pyfunc.spark_udf(spark, model_uri=str(model_dir), result_type=RESULT, env_manager="local")

    def run(data: list[tuple[str, int]]) -> tuple[list[Any], float]:
        frame = spark.createDataFrame(data, "messages string, budget long").repartition(1)
        started = time.perf_counter()
        out = frame.withColumn("out", udf(F.struct("messages", "budget"))).select("budget", "out.*").collect()
        return out, time.perf_counter() - started

    _, cold_seconds = run(rows)  # starts the Python worker and loads the model there
    data = rows * 16
    out, seconds = run(data)
    print(f"\nSpark UDF (local[1]): first {len(rows)} transcripts in {cold_seconds:.1f} s (worker start, model "
          f"load); then {len(out)} transcripts in {seconds:.1f} s = {len(out) / seconds:.1f} rows/s")
    assert len(out) == len(data)
    direct = Compactor(scorer=scorer, on_over_budget="keep_pins")
    expected: dict[tuple[str, int], Any] = {}
    for row, (messages_json, budget) in zip(out, data):
        assert row.budget == budget and row.tokens <= budget and not row.over_budget
        source = {m["id"]: m for m in json.loads(messages_json)}
        compacted = json.loads(row.messages)
        kept = json.loads(row.kept)
        changed = json.loads(row.trimmed) + json.loads(row.stubbed) + json.loads(row.dropped)
        assert changed, "a budget under the transcript's tokens must change something"
        assert set(kept) | set(changed) == set(source)
        for m in compacted:
            if m["id"] in kept:
                assert m == source[m["id"]]  # untouched messages come back exactly
        if (messages_json, budget) not in expected:
            expected[(messages_json, budget)] = direct.compact(json.loads(messages_json), budget=budget).messages
        assert compacted == expected[(messages_json, budget)]  # the same as compacting in this process
