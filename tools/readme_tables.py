"""Rebuild the README's syllabus and results tables from the days and results/{h200,h100}/*.json.

    python tools/readme_tables.py            # rewrites README.md between the table markers
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from course import days

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _speedup(row) -> str:
    """x the shape's first row, or a dash where that row was dropped (the JSON's "skipped" says why)."""
    return "—" if row.get("speedup") is None else f"{row['speedup']:.2f}×"


def syllabus() -> str:
    lines = ["| day | topic | memory space | versions |", "| --- | --- | --- | --- |"]
    for d in days.all_days():
        consts = days.constants(d.solution_path)
        versions = " → ".join(consts.get("VERSIONS", ("naive", "optimized")))
        lines.append(f"| {d.number:02d} | [{d.title}](lessons/{d.slug}.md) | {d.memory_space} | {versions} |")
    return "\n".join(lines)


_PEAK_SHORT = {"device copy": "copy", "cuBLAS FP32 GEMM": "FP32 GEMM", "cuBLAS FP16 GEMM": "FP16 GEMM"}
CARDS = ("h200", "h100")  # the columns, left to right: results/<card>/day*.json


def _cell(r: dict, row: dict | None) -> str:
    """One card's time and share of its peak, e.g. "211.9 µs, 90 % copy"; a dash where it has no row."""
    if row is None:
        return "—"
    wall = " (wall)" if row.get("clock") == "wall" else ""  # course.bench: the call waits on the GPU
    # Versions whose kernel changed after this run (a JSON's "stale": {version: what changed}): the row
    # stays, labelled, until the next `make bench` rewrites the file without the key.
    stale = " (earlier kernel)" if row["version"] in r.get("stale", {}) else ""
    peak = _PEAK_SHORT.get(r["peak_name"], r["peak_name"])
    return f"{row['ms'] * 1e3:,.1f} µs{wall}, {row['pct_peak']:.0f} % {peak}{stale}"


def _merged_keys(lists: list[list[tuple]]) -> list[tuple]:
    """Every (version, size) key of the cards' rows, in the first card's order, a key only another card
    has placed after the key it follows there."""
    merged: list[tuple] = []
    for keys in lists:
        for i, key in enumerate(keys):
            if key in merged:
                continue
            before = next((k for k in reversed(keys[:i]) if k in merged), None)
            merged.insert(merged.index(before) + 1 if before is not None else len(merged), key)
    return merged


def results() -> str:
    # A day's benchmark is results/<card>/<slug>.json; other day*.json there are experiments' (day31_look_back).
    known = {d.slug for d in days.all_days()}
    slugs = sorted({f.stem for card in CARDS for f in (ROOT / "results" / card).glob("day*.json")} & known)
    if not slugs:
        return "_No GPU results recorded yet._"
    lines = ["| day | version | H200 | H100 | speedup (H200 / H100) |", "| --- | --- | --- | --- | --- |"]
    for slug in slugs:
        files = {card: ROOT / "results" / card / f"{slug}.json" for card in CARDS}
        runs = {card: json.loads(f.read_text()) for card, f in files.items() if f.exists()}
        rows = {card: {(row["version"], json.dumps(row["n"])): row for row in r["rows"]} for card, r in runs.items()}
        keys = _merged_keys([list(rows[card]) for card in CARDS if card in rows])
        sizes = {size for _, size in keys}
        for version, size in keys:
            # A day timed at several sizes (course.bench.run_sizes) names the size in each row.
            label = version if len(sizes) == 1 else f"{version}, {_size(json.loads(size))}"
            found = {card: rows.get(card, {}).get((version, size)) for card in CARDS}
            cells = [_cell(runs[card], found[card]) if card in runs else "—" for card in CARDS]
            speedups = " / ".join(_speedup(found[card]) if found[card] else "—" for card in CARDS)
            lines.append(f"| {slug[3:5]} | {label} | {' | '.join(cells)} | {speedups} |")
    return "\n".join(lines)


def _size(n) -> str:
    """A benchmark size as a row label: 4096, 8192 × 8192, power_law 4194304."""
    if isinstance(n, list):
        return " × ".join(str(v) for v in n) if all(isinstance(v, int) for v in n) else " ".join(str(v) for v in n)
    return str(n)


def main() -> None:
    text = README.read_text()
    for name, body in (("SYLLABUS", syllabus()), ("RESULTS", results())):
        begin, end = f"<!-- {name} BEGIN -->", f"<!-- {name} END -->"
        text = re.sub(re.escape(begin) + r".*?" + re.escape(end), f"{begin}\n{body}\n{end}", text, flags=re.S)
    README.write_text(text)


if __name__ == "__main__":
    main()
