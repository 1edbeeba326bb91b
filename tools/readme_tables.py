"""Rebuild the README's syllabus and results tables from the days and results/h200/*.json.

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


def results() -> str:
    files = sorted((ROOT / "results" / "h200").glob("day*.json"))
    if not files:
        return "_No GPU results recorded yet._"
    lines = ["| day | version | time | rate | % of peak | speedup |", "| --- | --- | --- | --- | --- | --- |"]
    for f in files:
        r = json.loads(f.read_text())
        unit = "GB/s" if r["bound"] == "memory" else "TFLOP/s"
        sizes = {json.dumps(row["n"]) for row in r["rows"]}
        # Versions whose kernel changed after this run (a JSON's "stale": {version: what changed}): the
        # row stays, labelled, until the next `make bench` rewrites the file without the key.
        stale = r.get("stale", {})
        for row in r["rows"]:
            rate = row["gbps"] if r["bound"] == "memory" else row["tflops"]
            wall = " (wall)" if row.get("clock") == "wall" else ""  # course.bench: the call waits on the GPU
            # A day timed at several sizes (course.bench.run_sizes) names the size in each row.
            version = row["version"] if len(sizes) == 1 else f"{row['version']}, {_size(row['n'])}"
            version += " (earlier kernel)" if row["version"] in stale else ""
            lines.append(f"| {r['day'][3:5]} | {version} | {row['ms'] * 1e3:,.1f} µs{wall} | "
                         f"{rate:,.0f} {unit} | {row['pct_peak']:.0f} % of {r['peak_name']} | {_speedup(row)} |")
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
