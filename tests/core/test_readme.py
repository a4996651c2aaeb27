import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_configuration_table_is_current():
    result = subprocess.run([sys.executable, "scripts/gen_config_table.py", "--check"], cwd=ROOT)
    assert result.returncode == 0, "README config table is stale: run python scripts/gen_config_table.py"


def test_readme_gives_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "ragmon demo" in readme
    assert "make test" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
