"""tests/engine: the shared plain-Python references live in tests/reference."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
