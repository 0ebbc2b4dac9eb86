"""The Docker image's recipe, run without Docker (no engine runs here).

The test reads the Dockerfile and plays it: a clean virtual environment (no system site
packages) that holds only the closure of the requirement file the Dockerfile installs, a work
folder with only what the Dockerfile copies, the Dockerfile's ENV, then its CMD, then its
HEALTHCHECK. A requirement missing from the file, a file not copied, or a CMD that does not start
the server fails it. Tests run offline, so the closure is not downloaded by pip: each installed
distribution of the project's venv that the requirement file reaches (read from its metadata) is
linked into the clean venv's site-packages. What is checked is the recipe; the image build itself
is left to `docker build` on a machine with an engine (docs/SERVING.md).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import time
from importlib import metadata
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from env.registry import env_class, names
from env.server import free_port

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for word, rest in instructions():
        if word == "ENV":
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                env[key] = value
    return env


def closure(requirement_file: Path) -> set[str]:
    """Distribution names reached from a requirement file through installed metadata."""
    todo = [
        Requirement(line.split("#")[0].strip())
        for line in requirement_file.read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    seen: set[tuple[str, str]] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        extras = ["", *sorted(req.extras)]
        if all((name, e) in seen for e in extras):
            continue
        seen.update((name, e) for e in extras)
        dist = metadata.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), (req, dist.version)
        for line in dist.requires or []:
            dep = Requirement(line)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in extras):
                todo.append(dep)
    return {name for name, _ in seen}


def link_distributions(dists: set[str], site_packages: Path) -> None:
    """Make each distribution importable in the clean venv (offline stand-in for pip)."""
    source = Path(sysconfig.get_paths()["purelib"])
    for name in dists:
        dist = metadata.distribution(name)
        tops = {p.parts[0] for p in dist.files or [] if p.parts and p.parts[0] != ".."}
        for top in tops:
            if top.endswith(".pth") or top == "__pycache__":
                continue
            target = site_packages / top
            if (source / top).exists() and not target.exists():
                target.symlink_to(source / top)


def served_env() -> str:
    """The image's default environment if it imports yet, else the first that does."""
    default = dockerfile_env().get("ENV_NAME", "aml")
    for name in [default, *names()]:
        try:
            env_class(name)
            return name
        except ImportError:
            continue
    pytest.skip("no registered environment imports yet")


def test_dockerfile_is_slim_non_root_with_healthcheck_and_port():
    steps = instructions()
    words = [w for w, _ in steps]
    assert steps[0][0] == "FROM" and "slim" in steps[0][1]
    user = [rest for w, rest in steps if w == "USER"]
    assert user and user[-1] not in ("root", "0")
    assert words.index("USER") > max(i for i, w in enumerate(words) if w in ("RUN", "COPY"))
    health = next(rest for w, rest in steps if w == "HEALTHCHECK")
    assert "/health" in health and "PORT" in health
    assert dockerfile_env()["PORT"] == "8000"
    cmd = json.loads(next(rest for w, rest in steps if w == "CMD"))
    assert "$PORT" in cmd[-1] and "env.server" in cmd[-1]
    assert "-r requirements-server.txt" in next(r for w, r in steps if w == "RUN" and "pip" in r)
    heavy = {"torch", "transformers", "trl"} & closure(ROOT / "requirements-server.txt")
    assert not heavy, f"the server image would install {heavy}"


def test_dockerignore_lets_every_copied_path_through():
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied = [shlex.split(rest)[:-1] for w, rest in instructions() if w == "COPY"]
    for sources in copied:
        for src in sources:
            assert src.rstrip("/") in allowed, src


@pytest.mark.slow
def test_entry_command_serves_from_a_clean_venv(tmp_path):
    venv, app = tmp_path / "venv", tmp_path / "app"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    link_distributions(closure(ROOT / "requirements-server.txt"), site)
    app.mkdir()
    for w, rest in instructions():
        if w == "COPY":
            *sources, _ = shlex.split(rest)
            for src in sources:
                if src.rstrip("/") != "requirements-server.txt":
                    (app / src.rstrip("/")).symlink_to(ROOT / src.rstrip("/"))
    port = free_port()
    env = {
        **dockerfile_env(),
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "ENV_NAME": served_env(),
        "PORT": str(port),
    }
    cmd = json.loads(next(rest for w, rest in instructions() if w == "CMD"))
    health = next(rest for w, rest in instructions() if w == "HEALTHCHECK")
    health_cmd = health.split(" CMD ", 1)[1]
    proc = subprocess.Popen(cmd, cwd=app, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while subprocess.run(["sh", "-c", health_cmd], env=env, capture_output=True).returncode:
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "server did not become healthy"
            time.sleep(0.5)
        meta = httpx.get(f"http://127.0.0.1:{port}/metadata").json()
        assert meta["name"] == env["ENV_NAME"]
        assert httpx.get(f"http://127.0.0.1:{port}/web").status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert not os.path.exists(site / "torch")


def test_openenv_yaml_app_builds_the_app_of_env_name(monkeypatch):
    import yaml

    manifest = yaml.safe_load((ROOT / "openenv.yaml").read_text())
    module, _, attr = manifest["app"].partition(":")
    assert manifest["port"] == int(dockerfile_env()["PORT"])
    assert {"reward", "resources", "capabilities", "types"} <= set(manifest["validation"])
    name = served_env()
    monkeypatch.setenv("ENV_NAME", name)
    app = getattr(__import__(module, fromlist=[attr]), attr)
    assert app.title == f"{name} environment"
