"""Regenerate the README's configuration table from ragmon.config.agent_settings().

    python scripts/gen_config_table.py          # rewrite README.md between the markers
    python scripts/gen_config_table.py --check  # exit 1 when README.md is stale (used by tests)
"""

from __future__ import annotations

import sys
from pathlib import Path

from ragmon.agent.command import format_default
from ragmon.config import agent_settings

START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"
README = Path(__file__).resolve().parent.parent / "README.md"


def table() -> str:
    rows = ["| env var | flag | default | meaning |", "| --- | --- | --- | --- |"]
    for s in agent_settings():
        default = "***" if s.secret else format_default(s.default)
        flags = " ".join(f"`{flag}`" for flag in (s.flag, *s.aliases))
        rows.append(f"| `{s.env}` | {flags} | `{default}` | {s.help.replace('|', '/')} |")
    return "\n".join(rows)


def render(text: str) -> str:
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{table()}\n{END}{tail}"


def main() -> int:
    text = README.read_text(encoding="utf-8")
    new = render(text)
    if "--check" in sys.argv:
        return 0 if new == text else 1
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
