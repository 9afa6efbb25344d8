"""Benchmark scripts (run directly; not collected by pytest)."""
