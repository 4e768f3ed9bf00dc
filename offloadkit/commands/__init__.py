"""Command-line verbs, one module each (see offloadkit.cli)."""
