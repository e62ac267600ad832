"""Open a `nas report` file in headless Chromium and check that its plots rendered.

    python scripts/report_in_browser.py report.html [--screenshot shot.png]

Needs Debian's `chromium` (apt-get install chromium). Chromium runs the embedded plotly.js
offline (the page has no network address to reach), then the rendered DOM is checked: every
plot must have drawn its SVG, and the Pareto plot must have drawn one marker for each point
the page hands it (every finished trial, plus the confirmed figure of each confirmed front
trial beside its own). Exit status 0 when all of that holds, 1 otherwise (with what was
missing).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--screenshot", type=Path)
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("chromium not found: apt-get install chromium", file=sys.stderr)
        return 2
    url = args.report.resolve().as_uri()
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000"]
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    source = args.report.read_text(encoding="utf-8")
    plots = len(re.findall(r'<div class="plot">', source))
    found = re.search(r'<script type="application/json" id="summary">(.*?)</script>', source)
    if found is None:
        print(f"{args.report} is not a nas report", file=sys.stderr)
        return 2
    summary = json.loads(found.group(1))
    points = pareto_points(source)
    drawn = dom.count('class="main-svg"')
    blank = blank_plots(dom, plots)
    # plotly draws each marker as a <path class="point">; the Pareto plot is the first plot.
    first_plot = dom.split('id="plot1"')[0] if 'id="plot1"' in dom else dom
    markers = first_plot.count('class="point"')
    problems = []
    if blank:
        problems.append(f"plots {blank} drew no SVG (of {plots} plots, numbered from 0)")
    if points < summary["finished"]:
        problems.append(f"the page hands the Pareto plot {points} points for {summary['finished']} finished trials")
    if markers != points:
        problems.append(f"Pareto plot shows {markers} markers for the {points} points of its data")
    if "<tbody><tr>" not in dom:
        problems.append("the trial table is empty")
    if args.screenshot:
        subprocess.run([*flags, "--window-size=1280,2400", f"--screenshot={args.screenshot.resolve()}", url],
                       capture_output=True, timeout=120)  # fmt: skip
    print(f"{args.report}: {plots} plots, {drawn} SVG layers, {markers} markers in the Pareto plot "
          f"for its {points} points ({summary['finished']} finished trials)")  # fmt: skip
    for problem in problems:
        print(f"FAILED: {problem}", file=sys.stderr)
    return 1 if problems else 0


def blank_plots(dom: str, plots: int) -> list[int]:
    """The plots (numbered from 0) that drew no SVG of their own: a total of SVG layers alone
    would hide one plot that failed beside others that draw several layers each."""
    return [i for i, part in enumerate(plot_parts(dom, plots)) if 'class="main-svg"' not in part]


def plot_parts(dom: str, plots: int) -> list[str]:
    """The rendered DOM of each plot: from its div (id plot<i>) to the next one's."""
    starts = [dom.find(f'id="plot{i}"') for i in range(plots)]
    parts = []
    for i, start in enumerate(starts):
        later = [s for s in starts[i + 1 :] if s > start]
        parts.append("" if start < 0 else dom[start : min(later, default=len(dom))])
    return parts


def pareto_points(source: str) -> int:
    """How many points the page's data gives the Pareto plot (its first): one marker each."""
    start = re.search(r'Plotly\.newPlot\(\s*"plot0",\s*', source)
    if start is None:
        return 0
    traces, _ = json.JSONDecoder().raw_decode(source, start.end())
    return sum(len(trace.get("x") or []) for trace in traces)


if __name__ == "__main__":
    sys.exit(main())
