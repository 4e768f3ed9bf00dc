"""Helpers shared by the dashboard tests and benchmarks/live.py."""
from __future__ import annotations


def spec_rows(spec) -> list[dict]:
    """Every data row embedded anywhere in a Vega-Lite spec (inline values and datasets)."""
    rows: list[dict] = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "values" and isinstance(value, list):
                    rows.extend(v for v in value if isinstance(v, dict))
                elif key == "datasets" and isinstance(value, dict):
                    for data in value.values():
                        rows.extend(v for v in data if isinstance(v, dict))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(spec)
    return rows


def spec_texts(spec) -> set[str]:
    """All string values in a spec's data rows (what text marks can show)."""
    return {str(v) for row in spec_rows(spec) for v in row.values() if isinstance(v, (str, int))}
