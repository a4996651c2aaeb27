"""The agent's container image, built from the Dockerfile and run: README's Docker lines as they are
written (``docker`` is podman here, over ragmon's own image storage; the base image, which a registry
would serve as ``python:3.11-slim-bookworm``, is Debian 12 with its Python 3.11 made by mmdebstrap and
given as ``PYTHON_IMAGE``; host ports are free ones instead of 4318/9464): ``scripts/container_image.py``.

Checked: the container runs as uid 10001, not root; ragmon's SDK on the host sends OTLP/HTTP with the
receiver's bearer token and the agent judges it with the local judge (scraped from /metrics); the local
judge works with no network at all (``ragmon demo`` in a container without one); the image's size is
reported; ``docker stop`` (SIGTERM) ends the agent cleanly within its grace period: exit code 0, not
the SIGKILL that follows the stop timeout. Where the kernel refuses to start a container, the tests
skip and say what was refused.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.eventually import eventually_sync
from tests.helpers.net import free_port
from tests.helpers.scrape import Scrape

from .conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import container_image

pytestmark = [pytest.mark.image, pytest.mark.timeout(3600)]

README = REPO / "README.md"
REQUESTS = 20


def readme_docker_lines() -> list[list[str]]:
    """The ``docker ...`` commands of README's "Run the agent in a container" block, continuation
    lines joined, split as a shell would."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### In a container"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, "README: no bash block under 'In a container'"
    joined = block.group(1).replace("\\\n", " ")
    lines = [shlex.split(line, comments=True) for line in joined.splitlines()]
    return [argv for argv in lines if argv and argv[0] == "docker"]


def readme_command(verb: str) -> list[str]:
    (argv,) = [a for a in readme_docker_lines() if a[1] == verb]
    return argv[1:]



def report(**numbers: object) -> None:
    """Append what was measured to $RAGMON_IMAGE_REPORT when set."""
    path = os.environ.get("RAGMON_IMAGE_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(numbers, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def image() -> tuple[container_image.Podman, str]:
    missing = container_image.missing_tools()
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed; make services installs them "
                    f"(apt-get install podman runc netavark aardvark-dns iptables mmdebstrap)")
    podman = container_image.Podman()
    base = container_image.build_base(podman)
    refused = container_image.probe(podman, base)
    if refused:
        pytest.skip(f"this kernel refuses to start a container: {refused}")
    build = readme_command("build")
    assert build[-1] == "." and "-t" in build
    tag = build[build.index("-t") + 1]
    # the README's line, with the base image a registry would have served, and docker's image format
    # (podman's default, OCI, has no HEALTHCHECK)
    argv = [*build[:-1], "--pull=never", "--format=docker", "--build-arg", f"PYTHON_IMAGE={base}", str(REPO)]
    podman.run(*argv, timeout=container_image.BUILD_TIMEOUT_S)
    report(image=tag, size_bytes=podman.size_bytes(tag), base_size_bytes=podman.size_bytes(base))
    return podman, tag


class Container:
    """README's ``docker run`` line on free host ports, under a name of its own."""

    def __init__(self, podman: container_image.Podman) -> None:
        self.podman = podman
        self.name = f"ragmon-test-{uuid.uuid4().hex[:8]}"
        self.ports: dict[int, int] = {}  # container port -> host port
        self.env: dict[str, str] = {}
        argv = readme_command("run")
        out: list[str] = []
        i = 0
        while i < len(argv):
            arg = argv[i]
            if arg == "--name":
                out += [arg, self.name]
                i += 2
                continue
            if arg == "-p":
                host_ip, _host_port, container_port = argv[i + 1].split(":")
                host_port = free_port()
                self.ports[int(container_port)] = host_port
                out += [arg, f"{host_ip}:{host_port}:{container_port}"]
                i += 2
                continue
            if arg == "-e":
                key, value = argv[i + 1].split("=", 1)
                self.env[key] = value
            out.append(arg)
            i += 1
        self.argv = out
        self.started = False

    def start(self) -> None:
        self.podman.run(*self.argv)
        self.started = True

    def url(self, container_port: int, path: str) -> str:
        return f"http://127.0.0.1:{self.ports[container_port]}{path}"

    def ready(self) -> bool:
        try:
            return httpx.get(self.url(9464, "/readyz"), timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def scrape(self) -> Scrape:
        response = httpx.get(self.url(9464, "/metrics"), timeout=10)
        response.raise_for_status()
        return Scrape(response.text)

    def logs(self) -> str:
        result = self.podman.run("logs", self.name, check=False)
        return result.stdout + result.stderr

    def inspect(self, template: str) -> str:
        return self.podman.run("inspect", "--format", template, self.name).stdout.strip()

    def remove(self) -> None:
        if self.started:
            self.podman.run("rm", "-f", "-t", "0", self.name, check=False)


@pytest.fixture
def container(image: tuple[container_image.Podman, str]) -> Iterator[Container]:
    podman, tag = image
    running = Container(podman)
    assert running.argv[-1] == tag, "README runs the image it built"
    try:
        yield running
    finally:
        running.remove()


def test_the_image_runs_as_non_root_judges_host_otlp_locally_and_stops_on_sigterm(
        image: tuple[container_image.Podman, str], container: Container, tmp_path: Path) -> None:
    podman, tag = image
    assert podman.run("image", "inspect", "--format", "{{.Config.User}}", tag).stdout.strip() == "10001:10001"
    container.start()
    eventually_sync(container.ready, timeout_s=300, interval_s=1, what="the agent in the container ready")
    uid = podman.run("exec", container.name, "python", "-c", "import os; print(os.getuid(), os.getgid())")
    assert uid.stdout.split() == ["10001", "10001"], "not root"

    # ragmon's SDK on the host, as an app would use it: OTLP/HTTP with the receiver's token
    token = container.env["RAGMON_RECEIVER_BEARER_TOKEN"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGMON_", "OTEL_"))}
    env.update(PYTHONPATH=str(REPO), OTEL_EXPORTER_OTLP_TRACES_HEADERS=f"authorization=Bearer%20{token}")
    app = subprocess.run([sys.executable, "-m", "tests.kafka.split_app", "--endpoint",
                          container.url(4318, "/v1/traces"), "--requests", str(REQUESTS), "--rate", "10"],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=300, check=False)
    assert app.returncode == 0, app.stderr[-3000:]
    assert len(app.stdout.split()) == REQUESTS

    def all_accounted() -> Scrape | None:
        s = container.scrape()
        done = sum(s.value(f"ragmon_traces_{k}_total") for k in ("scored", "skipped", "failed"))
        return s if s.value("ragmon_traces_received_total") == REQUESTS == done else None

    s = eventually_sync(all_accounted, timeout_s=300, interval_s=1, what="the agent's traces accounted for")
    scored = s.value("ragmon_traces_scored_total", judge="local")
    assert scored > 0 and s.value("ragmon_score_ratio_count", metric="faithfulness") == scored
    assert s.value("ragmon_receiver_requests_total", outcome="unauthorized") == 0

    # docker stop: SIGTERM, SIGKILL only after the timeout; an agent that is still running then
    # exits 137. It exits 0: ended by the SIGTERM itself, within the timeout.
    stop = readme_command("stop")
    stop_timeout = int(stop[stop.index("-t") + 1])
    grace = 20.0  # RAGMON_SHUTDOWN_GRACE_S's default (not set in README's run line)
    assert "RAGMON_SHUTDOWN_GRACE_S" not in container.env and stop_timeout > grace
    podman.run(*[container.name if a == "ragmon" else a for a in stop], timeout=stop_timeout + 60)
    assert container.inspect("{{.State.ExitCode}}") == "0", container.logs()[-3000:]
    assert "ragmon agent stopped" in container.logs()
    report(scored=scored, received=REQUESTS, stop_timeout_s=stop_timeout)


def test_the_local_judge_works_without_any_network(image: tuple[container_image.Podman, str]) -> None:
    """``ragmon demo`` (app, agent and local judge in one process) in a container with no network."""
    podman, tag = image
    result = podman.run("run", "--rm", "--network=none", "--entrypoint", "ragmon", tag, "demo", "--duration", "8",
                        "--rate", "4", "--no-live", timeout=600, check=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    output = result.stdout + result.stderr
    scored = [int(n) for n in re.findall(r"\bscored (\d+)", output)]
    assert scored and max(scored) > 0, output[-3000:]
    report(demo_without_network_scored=max(scored))
