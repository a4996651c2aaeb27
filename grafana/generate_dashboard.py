#!/usr/bin/env python3
"""Generate the Grafana dashboard ``grafana/dashboards/ragmon.json`` with Grafana's builder SDK.

    python grafana/generate_dashboard.py           # rewrite the JSON
    python grafana/generate_dashboard.py --check   # exit 1 when the JSON is out of date (CI)

The dashboard is built with ``grafana-foundation-sdk`` (Grafana's typed builders; installed by
``pip install -e '.[dev]'``), so its JSON follows the dashboard schema Grafana keeps; the code is in
``grafana/dashboard_gen/``. Panels read the recording rules of ``deploy/prometheus/ragmon-rules.yml``
where one exists, so the dashboard and the alerts share one definition; alert thresholds are drawn
as lines and are imported from the rules generator, so a threshold changed there moves here too.
Template variables: ``datasource``, ``service``, ``pipeline`` and ``token_price`` (price of 1000
judge tokens in your currency, for the cost panel). Score panels have exemplars on: a dot per
sampled trace, linked by ``trace_id`` to your tracing backend.

After regenerating, rerun ``python scripts/gen_dashboard_configmap.py`` (the same dashboard as a
ConfigMap for Grafana's dashboard sidecar).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "dashboards" / "ragmon.json"
if str(HERE) not in sys.path:  # run from anywhere, or loaded by path
    sys.path.insert(0, str(HERE))

from dashboard_gen import render  # noqa: E402
from dashboard_gen.common import R  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the dashboard JSON is out of date")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"dashboard JSON file (default: {OUTPUT})")
    parser.add_argument("--evaluators", type=Path, metavar="FILE.yaml",
                        help="add a row with a panel per declared evaluator (docs/evaluators.md)")
    args = parser.parse_args(argv)
    output: Path = args.output
    evaluators = R.load_evaluators(args.evaluators) if args.evaluators is not None else None
    text = render(evaluators)
    if args.check:
        if not output.exists() or output.read_text(encoding="utf-8") != text:
            sys.stderr.write(f"{output} is out of date: run python grafana/{Path(__file__).name}\n")
            return 1
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {output}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
