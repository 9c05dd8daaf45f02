"""collector-config.yaml: valid YAML, only otelcol-contrib components, consistent pipelines.

No Collector binary runs here (none is installed and nothing is downloaded at test time), so the checks are
structural: component types against the otelcol-contrib distribution's list, every pipeline reference
against the defined components, and the commented scale-out pipeline (uncommented) against the same rules.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ._promql import ROOT

CONFIG = ROOT / "collector-config.yaml"

# Component *types* (the names used in configuration) of the otelcol-contrib distribution, from
# open-telemetry/opentelemetry-collector-releases distributions/otelcol-contrib/manifest.yaml at commit
# 008cde8ca78cc0286ee3f0de92fa95e1641a445a (component modules v0.136.0, the image tag compose uses). A subset:
# the commonly configured ones; a type outside it fails the test until it is checked and added here.
OTELCOL_CONTRIB_0_136: dict[str, frozenset[str]] = {
    "receivers": frozenset(
        """
        otlp nop jaeger zipkin prometheus prometheus_simple hostmetrics filelog fluentforward kafka
        kafkametrics k8s_cluster k8s_events k8sobjects kubeletstats docker_stats statsd syslog
        journald otlpjsonfile httpcheck redis postgresql mysql receiver_creator
        """.split()
    ),
    "processors": frozenset(
        """
        batch memory_limiter attributes resource resourcedetection transform filter
        k8sattributes tail_sampling probabilistic_sampler groupbytrace groupbyattrs
        cumulativetodelta deltatocumulative deltatorate metricstransform span redaction interval
        logdedup metricsgeneration remotetap geoip schema
        """.split()
    ),
    "exporters": frozenset(
        """
        debug nop otlp otlphttp prometheus prometheusremotewrite loadbalancing kafka file zipkin
        elasticsearch opensearch clickhouse datadog awsxray awsemf googlecloud azuremonitor
        splunk_hec influxdb sentry syslog otelarrow
        """.split()
    ),
    "extensions": frozenset(
        """
        health_check zpages pprof basicauth bearertokenauth headers_setter oauth2client oidc
        file_storage db_storage opamp jaegerremotesampling k8s_observer docker_observer
        host_observer sigv4auth
        """.split()
    ),
    "connectors": frozenset(
        """
        forward count spanmetrics servicegraph routing failover roundrobin exceptions sum
        signaltometrics
        """.split()
    ),
}

# Exporters and receivers that only carry some signals (their READMEs' "Supported pipeline types").
SIGNALS: dict[str, frozenset[str]] = {
    "prometheus": frozenset({"metrics"}),
    "otlp": frozenset({"traces", "metrics", "logs"}),
    "debug": frozenset({"traces", "metrics", "logs"}),
    "loadbalancing": frozenset({"traces", "metrics", "logs"}),
}


def _type(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def _config() -> dict[str, Any]:
    data = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _scale_out_block() -> dict[str, Any]:
    """The commented scale-out configuration, uncommented and parsed."""
    lines = CONFIG.read_text(encoding="utf-8").splitlines()
    start = lines.index("# receivers:")
    block = []
    for line in lines[start:]:
        assert line.startswith("#"), f"the commented block must run to the end of the file: {line!r}"
        block.append(line[2:] if line.startswith("# ") else line[1:])
    data = yaml.safe_load("\n".join(block))
    assert isinstance(data, dict)
    return data


def _check_components(config: dict[str, Any]) -> None:
    for section in ("receivers", "processors", "exporters", "extensions", "connectors"):
        for component_id in config.get(section) or {}:
            assert _type(component_id) in OTELCOL_CONTRIB_0_136[section], (
                f"{section}: {component_id!r} is not an otelcol-contrib component type"
            )


def _check_pipelines(config: dict[str, Any]) -> None:
    service = config["service"]
    connectors = set(config.get("connectors") or {})
    for extension in service.get("extensions", []):
        assert extension in (config.get("extensions") or {}), f"extension {extension!r} is not defined"
    used: dict[str, set[str]] = {"receivers": set(), "processors": set(), "exporters": set()}
    for pipeline_id, pipeline in service["pipelines"].items():
        signal = _type(pipeline_id)
        assert signal in {"traces", "metrics", "logs"}, pipeline_id
        assert pipeline.get("receivers") and pipeline.get("exporters"), (
            f"{pipeline_id}: receivers and exporters"
        )
        for section in ("receivers", "processors", "exporters"):
            for component_id in pipeline.get(section, []):
                defined = set(config.get(section) or {}) | (connectors if section != "processors" else set())
                assert component_id in defined, (
                    f"{pipeline_id}: {section[:-1]} {component_id!r} is not defined"
                )
                used[section].add(component_id)
                allowed = SIGNALS.get(_type(component_id))
                if allowed is not None and section != "processors":
                    assert signal in allowed, f"{pipeline_id}: {component_id!r} does not support {signal}"
        processors = pipeline.get("processors", [])
        assert processors[:1] == ["memory_limiter"], f"{pipeline_id}: memory_limiter must come first"
        assert processors[-1:] == ["batch"], f"{pipeline_id}: batch must come last"
    for section, ids in used.items():
        unused = set(config.get(section) or {}) - ids
        assert not unused, f"{section} defined but in no pipeline: {sorted(unused)}"


def test_collector_config_uses_only_otelcol_contrib_components() -> None:
    _check_components(_config())


def test_collector_pipelines_reference_defined_components() -> None:
    _check_pipelines(_config())


def test_collector_config_routes_each_signal_where_the_stack_expects_it() -> None:
    config = _config()
    pipelines = config["service"]["pipelines"]
    assert pipelines["traces"]["exporters"] == ["otlp/jaeger"]
    assert pipelines["metrics"]["exporters"] == ["prometheus"]
    assert pipelines["logs"]["exporters"] == ["debug"]
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    assert protocols["http"]["endpoint"].endswith(":4318")
    assert config["exporters"]["prometheus"]["endpoint"].endswith(":8889")
    # service.name reaches the metric series as a label (the transform processor copies it).
    statements = config["processors"]["transform/service_name"]["metric_statements"][0]["statements"]
    assert any(
        'attributes["service.name"]' in s and 'resource.attributes["service.name"]' in s for s in statements
    )


def test_every_component_has_an_explaining_comment() -> None:
    """Each component definition is preceded by a comment line (the issue asks for one per component)."""
    lines = CONFIG.read_text(encoding="utf-8").splitlines()
    config = _config()
    for section in ("extensions", "receivers", "processors", "exporters"):
        for component_id in config[section]:
            index = next(
                i for i, line in enumerate(lines) if re.fullmatch(rf"  {re.escape(component_id)}:", line)
            )
            assert lines[index - 1].lstrip().startswith("#"), f"{component_id} has no comment above it"


def test_commented_scale_out_pipeline_is_valid_once_uncommented() -> None:
    block = _scale_out_block()
    loadbalancing = block["exporters"]["loadbalancing"]
    assert loadbalancing["routing_key"] == "traceID"
    assert loadbalancing["resolver"]["dns"]["port"] == 4317  # `ctxutil-otel serve`'s OTLP gRPC port
    merged = _config()
    for section in ("receivers", "exporters"):
        merged[section] = {**merged[section], **block[section]}
    merged["service"] = {**merged["service"], "pipelines": block["service"]["pipelines"]}
    _check_components(merged)
    _check_pipelines(merged)
    pipelines = merged["service"]["pipelines"]
    assert "loadbalancing" in pipelines["traces"]["exporters"]
    # Results from the replicas never go back to them (no evaluation loop).
    for pipeline_id, pipeline in pipelines.items():
        if "otlp/evaluations" in pipeline["receivers"]:
            assert "loadbalancing" not in pipeline["exporters"], pipeline_id


def test_the_comment_on_serves_request_limit_states_its_default() -> None:
    from ctxutil_otel.serve._server import DEFAULT_MAX_REQUEST_BYTES

    stated = re.search(r"--max-request-bytes, (\d+) MiB by", CONFIG.read_text(encoding="utf-8"))
    assert stated is not None
    assert int(stated.group(1)) * 1024 * 1024 == DEFAULT_MAX_REQUEST_BYTES
