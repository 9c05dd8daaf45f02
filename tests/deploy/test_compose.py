"""deploy/compose.yaml and the Grafana provisioning: valid YAML, every referenced file exists, and the
services point at each other consistently (ports, host names, mount paths).

The stack itself is not started: there is no container engine here. What is checked is what can be
checked without one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from ctxutil_otel._settings import ENV_PREFIX, Settings
from ctxutil_otel.cli import build_parser

from ._promql import DEPLOY, ROOT

COMPOSE = DEPLOY / "compose.yaml"
SERVICES = {"otel-collector", "jaeger", "prometheus", "grafana", "demo"}


def _yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), path
    return data


def _services() -> dict[str, Any]:
    services = _yaml(COMPOSE)["services"]
    assert isinstance(services, dict)
    return services


def _mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path (relative paths resolved against deploy/, like compose does)."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        mounts[target] = (DEPLOY / source).resolve()
    return mounts


def test_compose_defines_the_whole_stack() -> None:
    services = _services()
    assert set(services) == SERVICES
    for name, service in services.items():
        assert "image" in service or "build" in service, name


def test_every_mounted_or_built_file_exists() -> None:
    for name, service in _services().items():
        for target, source in _mounts(service).items():
            assert source.exists(), f"{name}: {source} (mounted at {target}) does not exist"
        if "build" in service:
            context = (DEPLOY / service["build"]["context"]).resolve()
            dockerfile = context / service["build"]["dockerfile"]
            assert dockerfile.is_file(), dockerfile
            for line in dockerfile.read_text(encoding="utf-8").splitlines():
                if line.startswith("COPY "):
                    *sources, _destination = line.split()[1:]
                    for source in sources:
                        assert (context / source).exists(), f"{dockerfile.name}: COPY {source} does not exist"


def test_collector_gets_the_repository_config_and_exposes_its_receivers() -> None:
    collector = _services()["otel-collector"]
    config_path = next(arg.split("=", 1)[1] for arg in collector["command"] if arg.startswith("--config="))
    assert _mounts(collector)[config_path] == ROOT / "collector-config.yaml"
    published = {port.split(":")[1] for port in collector["ports"]}
    assert {"4317", "4318"} <= published


def test_prometheus_scrapes_the_collector_exporter_and_loads_the_rules() -> None:
    services = _services()
    mounts = _mounts(services["prometheus"])
    assert mounts["/etc/prometheus/prometheus.yml"] == DEPLOY / "prometheus.yml"
    prometheus = _yaml(DEPLOY / "prometheus.yml")
    for rule_file in prometheus["rule_files"]:
        # Relative rule paths resolve against the config file's directory in the container too.
        assert mounts[f"/etc/prometheus/{rule_file}"] == DEPLOY / rule_file
    collector = _yaml(ROOT / "collector-config.yaml")
    exporter_port = collector["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1]
    job = next(j for j in prometheus["scrape_configs"] if j["job_name"] == "otel-collector")
    assert job["honor_labels"] is True  # keeps job/instance derived from service.name / service.instance.id
    assert job["static_configs"][0]["targets"] == [f"otel-collector:{exporter_port}"]


def test_collector_exports_traces_to_the_jaeger_service() -> None:
    collector = _yaml(ROOT / "collector-config.yaml")
    host, _port = collector["exporters"]["otlp/jaeger"]["endpoint"].split(":")
    assert host in _services()


def test_grafana_provisioning_matches_the_stack() -> None:
    grafana = _services()["grafana"]
    mounts = _mounts(grafana)
    provisioning = mounts["/etc/grafana/provisioning"]
    datasources = _yaml(provisioning / "datasources" / "datasources.yaml")["datasources"]
    by_type = {d["type"]: d for d in datasources}
    prometheus_url = urlparse(by_type["prometheus"]["url"])
    assert prometheus_url.hostname == "prometheus" and prometheus_url.port == 9090
    assert by_type["prometheus"]["uid"] == "prometheus"  # the dashboard variable's default
    assert urlparse(by_type["jaeger"]["url"]).hostname == "jaeger"
    providers = _yaml(provisioning / "dashboards" / "dashboards.yaml")["providers"]
    dashboards_dir = providers[0]["options"]["path"]
    assert mounts[dashboards_dir] == DEPLOY / "grafana" / "dashboards"
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home.startswith(dashboards_dir + "/")
    assert (mounts[dashboards_dir] / Path(home).name).is_file()


def test_demo_sends_otlp_to_the_collector_and_runs_an_existing_command() -> None:
    demo = _services()["demo"]
    endpoint = urlparse(demo["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert endpoint.hostname == "otel-collector"
    collector = _yaml(ROOT / "collector-config.yaml")
    protocol = demo["environment"]["OTEL_EXPORTER_OTLP_PROTOCOL"]
    receiver = collector["receivers"]["otlp"]["protocols"]["grpc" if protocol == "grpc" else "http"]
    assert str(endpoint.port) == receiver["endpoint"].rsplit(":", 1)[1]
    # The compose command line parses with the real CLI parser (unknown options would exit with status 2).
    args = build_parser().parse_args(demo["command"])
    assert args.command == "demo"
    assert callable(args.func)


def test_demo_ctxutil_settings_exist_and_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    environment = _services()["demo"]["environment"]
    settings_env = {k: v for k, v in environment.items() if k.startswith(ENV_PREFIX)}
    assert settings_env
    for name in settings_env:
        assert name.removeprefix(ENV_PREFIX).lower() in Settings.model_fields, f"{name} is not a setting"
    for name, value in settings_env.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.application_name == environment["CTXUTIL_APPLICATION_NAME"]
