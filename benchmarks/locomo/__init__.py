"""LoCoMo recall benchmark: protocol, metrics, baselines and runner (see ``benchmarks/locomo_recall.py``)."""
