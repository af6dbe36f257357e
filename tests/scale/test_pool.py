"""The scale test's work pool and deploy (issue 26): the pool's job template is Prefect's own
with one change, each flow run started as `python -m prefect.engine` (no workspace
supervisor, a second interpreter start per round); the rendered prefect.yaml split for
several `prefect deploy --all` keeps every deployment once, with the same pull step; the
Prefect API's CA file holds one certificate and loads."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from pathlib import Path

import yaml

from scale.slot_test import api_ca_file, engine_pool_template, split_prefect_file

ROOT = Path(__file__).resolve().parents[2]


def test_the_pool_template_is_prefects_default_with_the_engine_as_command() -> None:
    """Only `command`'s default differs from Prefect's default process template, and it
    starts this interpreter's engine."""
    template = engine_pool_template(dict(os.environ))
    command = template["variables"]["properties"]["command"]
    assert command["default"] == f"{sys.executable} -m prefect.engine"
    command["default"] = None
    from prefect.workers.process import ProcessWorker

    assert template == ProcessWorker.get_default_base_job_template()


def test_split_keeps_every_deployment_once_with_the_pull_step(tmp_path: Path) -> None:
    """Two parts of the rendered file: every deployment in exactly one, the pull step and the
    definitions in both; one part is the file itself."""
    rendered = subprocess.run(
        [sys.executable, "-m", "deployments.render"],
        cwd=ROOT,
        env={**os.environ, "CANARY_MODELS": "a/one,b/two,c/three"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = tmp_path / "prefect.yaml"
    path.write_text(rendered)
    whole = yaml.safe_load(rendered)
    parts = [yaml.safe_load(p.read_text()) for p in split_prefect_file(path, 2)]
    names = sorted(d["name"] for part in parts for d in part["deployments"])
    assert names == sorted(d["name"] for d in whole["deployments"])
    assert all(p["pull"] == whole["pull"] and p["name"] == whole["name"] for p in parts)
    assert split_prefect_file(path, 1) == [path]


def test_the_api_ca_file_is_one_certificate_that_loads(tmp_path: Path) -> None:
    """One PEM certificate, which a TLS context loads as its only CA."""
    path = api_ca_file(tmp_path)
    assert path.read_text().count("BEGIN CERTIFICATE") == 1
    ctx = ssl.create_default_context(cafile=str(path))
    assert ctx.cert_store_stats()["x509_ca"] == 1
