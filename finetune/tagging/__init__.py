"""Word-level tagging tasks (CoNLL-2000 chunking)."""
