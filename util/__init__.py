"""Shared utilities: configs, errors, storage, tokenization."""
