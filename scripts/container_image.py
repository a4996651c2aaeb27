#!/usr/bin/env python3
"""The agent image, built and run without a registry: a Debian 12 base made by ``mmdebstrap`` stands in
for ``python:3.11-slim-bookworm`` (the Dockerfile's ``PYTHON_IMAGE`` build argument), and podman
builds and runs the Dockerfile as Docker would. Standard library only::

    python3 scripts/container_image.py base      # build (or reuse) the base image, print its tag
    python3 scripts/container_image.py build     # base, then the Dockerfile; print the image's tag
    python3 scripts/container_image.py probe     # can containers run here? exit 1 saying why not

What runs where:

* The base is ``mmdebstrap --variant=minbase`` of bookworm (+ updates, security) with ``python3``
  (3.11), ``python3-venv``, ``python-is-python3`` and ``ca-certificates``; documentation, manual pages
  and translations are left out, as in the slim images. The CA certificates this host trusts locally
  (``/usr/local/share/ca-certificates``: a proxy that inspects TLS, say) are trusted inside too, so
  ``pip`` and ``apt-get`` in the Dockerfile's build stage reach the package indexes the host reaches.
  The base is built once per package list and CA set (its tag carries their hash).
* Images live in their own podman storage, ``<repo>/.cache/images/storage`` (``RAGMON_IMAGES_HOME``),
  not in the host's: a rebuild reuses the cached layers, ``make clean`` removes them.
* Containers run with ``runc``: crun refuses a hybrid cgroup layout (v1 controllers with a
  controller left on the v2 hierarchy, as on this kind of machine), runc runs there. Resource limits
  are set from this process's hard limits (podman's defaults are above them, and raising a hard
  limit needs CAP_SYS_RESOURCE).

The image test (``tests/ops/test_image.py``) imports ``Podman`` and ``ensure_image`` from here.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SUITE = "bookworm"
MIRRORS = (
    f"deb http://deb.debian.org/debian {SUITE} main",
    f"deb http://deb.debian.org/debian {SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {SUITE}-security main",
)
PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")
# as in the slim images: no documentation, manual pages or translations (copyright files stay)
DPKG_OPTIONS = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
)
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
IMAGE = "localhost/ragmon:0.1.0"
BUILD_TIMEOUT_S = 1800
#: the Debian packages the image test needs (the Makefile's `services` target installs them)
TOOLS = ("podman", "runc", "iptables", "mmdebstrap")


class ImageError(RuntimeError):
    pass


def images_home() -> Path:
    # resolved: podman's storage database records its path, and .cache may be reached through a link
    return Path(os.environ.get("RAGMON_IMAGES_HOME") or REPO_ROOT / ".cache" / "images").resolve()


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


def _local_cas() -> list[Path]:
    return sorted(LOCAL_CAS.glob("**/*.crt")) if LOCAL_CAS.is_dir() else []


def base_tag() -> str:
    digest = hashlib.sha256()
    for part in (*MIRRORS, *PACKAGES, *DPKG_OPTIONS):
        digest.update(part.encode() + b"\0")
    for ca in _local_cas():
        digest.update(ca.read_bytes() + b"\0")
    return f"localhost/ragmon-base:{SUITE}-py311-{digest.hexdigest()[:12]}"


def _ulimits() -> list[str]:
    """--ulimit flags within this process's hard limits (podman's defaults, nofile 1048576 and nproc
    4194304, are above them here and runc would fail to set them)."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = 65536 if nofile == resource.RLIM_INFINITY else min(nofile, 65536)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", "nproc=4096:4096"]


class Podman:
    """podman over ragmon's own image storage, with runc and limits this host allows."""

    def __init__(self, home: Path | None = None) -> None:
        self.home = home or images_home()
        self.runroot = Path(tempfile.gettempdir()) / f"ragmon-podman-run-{os.getuid()}"
        self.global_args = [
            "podman",
            "--root", str(self.home / "storage"),
            "--runroot", str(self.runroot),
            "--runtime", "runc",
            "--cgroup-manager", "cgroupfs",
            "--events-backend", "file",
        ]
        self.ulimits = _ulimits()

    def argv(self, *args: str) -> list[str]:
        """The podman command line for ``args`` (a docker-compatible subcommand and its flags)."""
        command, rest = args[0], list(args[1:])
        if command in ("run", "create", "build"):
            rest = [*self.ulimits, *rest]
        return [*self.global_args, command, *rest]

    def run(self, *args: str, timeout: float = 600, check: bool = True,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=timeout,
                                input=input, check=False)
        if check and result.returncode != 0:
            raise ImageError(f"podman {' '.join(args[:3])} failed ({result.returncode}):\n"
                             f"{result.stdout[-3000:]}{result.stderr[-4000:]}")
        return result

    def exists(self, image: str) -> bool:
        return self.run("image", "exists", image, check=False).returncode == 0

    def size_bytes(self, image: str) -> int:
        return int(self.run("image", "inspect", "--format", "{{.Size}}", image).stdout.strip())


def build_base(podman: Podman, quiet: bool = True) -> str:
    """The Debian 12 + Python 3.11 base image (mmdebstrap), imported once into ragmon's storage."""
    tag = base_tag()
    if podman.exists(tag):
        return tag
    missing = missing_tools()
    if missing:
        raise ImageError(f"missing {', '.join(missing)}: apt-get install {' '.join(TOOLS)} (make services)")
    podman.home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ragmon-base-", dir=podman.home) as tmp:
        tar = Path(tmp) / "base.tar"
        cmd = ["mmdebstrap", "--mode=root", "--variant=minbase", f"--include={','.join(PACKAGES)}"]
        cmd += [f"--dpkgopt={opt}" for opt in DPKG_OPTIONS]
        cas = _local_cas()
        if cas:
            cmd += [f"--customize-hook=mkdir -p \"$1\"{LOCAL_CAS}"]
            cmd += [f"--customize-hook=copy-in {ca} {LOCAL_CAS}" for ca in cas]
            cmd += ['--customize-hook=chroot "$1" update-ca-certificates']
        cmd += ["--format=tar", SUITE, str(tar), *MIRRORS]
        if not quiet:
            print(f"image: building the base {tag} with mmdebstrap (a minute or two)", file=sys.stderr, flush=True)
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                                stdin=subprocess.DEVNULL, check=False)
        if result.returncode != 0:
            raise ImageError(f"mmdebstrap failed ({result.returncode}):\n{result.stderr[-4000:]}")
        podman.run("import", "--change", 'CMD ["python3"]', str(tar), tag, timeout=BUILD_TIMEOUT_S)
    return tag


def build_image(podman: Podman, base: str, image: str = IMAGE, quiet: bool = True) -> subprocess.CompletedProcess[str]:
    """`docker build -t IMAGE .` with the base as PYTHON_IMAGE; docker's image format, so the
    HEALTHCHECK is kept (OCI images have no field for it)."""
    if not quiet:
        print(f"image: building {image} from the Dockerfile over {base}", file=sys.stderr, flush=True)
    return podman.run("build", "--pull=never", "--format=docker", "--build-arg", f"PYTHON_IMAGE={base}",
                      "-t", image, "-f", str(REPO_ROOT / "Dockerfile"), str(REPO_ROOT), timeout=BUILD_TIMEOUT_S)


def probe(podman: Podman, base: str) -> str | None:
    """None when a container starts here, else the runtime's own words for what was refused."""
    result = podman.run("run", "--rm", "--network=none", base, "true", check=False, timeout=120)
    if result.returncode == 0:
        return None
    return (result.stderr or result.stdout).strip().splitlines()[-1] if (result.stderr or result.stdout).strip() \
        else f"podman run exited {result.returncode}"


def ensure_image(quiet: bool = True) -> tuple[Podman, str]:
    podman = Podman()
    base = build_base(podman, quiet=quiet)
    build_image(podman, base, quiet=quiet)
    return podman, IMAGE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("command", choices=("base", "build", "probe"))
    args = parser.parse_args(argv)
    try:
        podman = Podman()
        base = build_base(podman, quiet=False)
        if args.command == "base":
            print(base)
        elif args.command == "probe":
            refused = probe(podman, base)
            if refused:
                print(f"image: a container cannot start here: {refused}", file=sys.stderr)
                return 1
            print("ok")
        else:
            build_image(podman, base, quiet=False)
            print(IMAGE)
        return 0
    except ImageError as exc:
        print(f"image: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
