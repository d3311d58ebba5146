"""Training, benchmarks, tuning and experiment tracking (the only place mlflow is imported: tracking.py)."""
