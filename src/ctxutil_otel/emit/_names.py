"""Every telemetry name the emitter uses, with its source, and how each metric appears in Prometheus.

Sources
-------
* ``gen_ai.*`` and the ``gen_ai.evaluation.result`` event: OpenTelemetry GenAI semantic conventions
  (development stability), maintained in https://github.com/open-telemetry/semantic-conventions-genai.
  ``model/gen-ai/events.yaml``: the event requires ``gen_ai.evaluation.name``, conditionally requires
  ``gen_ai.evaluation.score.value`` and ``gen_ai.evaluation.score.label`` ("if applicable"), recommends
  ``gen_ai.evaluation.explanation`` and ``gen_ai.response.id`` ("when available"), includes the
  ``error.type`` group, and SHOULD be parented to the evaluated span. All of them are emitted (the response
  id when capture saw one). The conventions define no attribute for the evaluator's own model or cost, so
  the judge's go under ``ctxutil.judge.*`` (never ``gen_ai.request.model`` / ``gen_ai.usage.*``, which
  would count as the application's inside its trace). The same constants ship, marked "moved", in
  ``opentelemetry-semantic-conventions``
  (``opentelemetry.semconv._incubating.attributes.gen_ai_attributes``).
* ``error.type``: OpenTelemetry semantic conventions, stable
  (``opentelemetry.semconv.attributes.error_attributes``).
* ``ctxutil.*``: this project's own namespace (DESIGN.md, "Emission (OpenTelemetry)").

Values of ``gen_ai.evaluation.score.label`` (the conventions ask implementations to document them):
``pass`` | ``fail`` | ``not_applicable`` | ``error``.

Metrics and their Prometheus form
---------------------------------
Verified by ``tests/emit/test_prometheus_names.py``: it exports through ``opentelemetry-exporter-prometheus``
(``PrometheusMetricReader``) and parses ``prometheus_client.generate_latest``. The rules (OpenTelemetry
"Prometheus and OpenMetrics compatibility"): dots become underscores in metric and label names; the unit
becomes a suffix (``s`` -> ``_seconds``; ``{...}`` annotations are dropped; ``1`` adds nothing in this
exporter); counters get ``_total``; histograms expand to ``_bucket{le=...}``, ``_sum`` and ``_count``.
Every series also carries ``otel_scope_name="ctxutil_otel"``, ``otel_scope_version`` and
``otel_scope_schema_url``; resource attributes (``service.name``, ...) appear only on ``target_info``.
The Collector's ``prometheus`` exporter follows the same naming rules and derives ``job`` / ``instance``
from ``service.name`` / ``service.instance.id``.

| OpenTelemetry instrument     | kind         | unit          | Prometheus series                           |
|------------------------------|--------------|---------------|---------------------------------------------|
| gen_ai.evaluation.score      | Histogram    | 1             | gen_ai_evaluation_score_bucket,             |
|                              |              |               | gen_ai_evaluation_score_sum, _count         |
| ctxutil.chunks.relevant      | Counter      | {chunk}       | ctxutil_chunks_relevant_total               |
| ctxutil.chunks.utilized      | Counter      | {chunk}       | ctxutil_chunks_utilized_total               |
| ctxutil.chunks.judged        | Counter      | {chunk}       | ctxutil_chunks_judged_total                 |
| ctxutil.evaluation.duration  | Histogram    | s             | ctxutil_evaluation_duration_seconds_bucket, |
|                              |              |               | ctxutil_evaluation_duration_seconds_sum,    |
|                              |              |               | ctxutil_evaluation_duration_seconds_count   |
| ctxutil.judge.tokens         | Counter      | {token}       | ctxutil_judge_tokens_total                  |
| ctxutil.evaluations          | Obs. counter | {evaluation}  | ctxutil_evaluations_total                   |
| ctxutil.queue.size           | Obs. gauge   | {interaction} | ctxutil_queue_size                          |
| ctxutil.worker.cpu_throttled | Obs. counter | s             | ctxutil_worker_cpu_throttled_seconds_total  |
| ctxutil.dimension.overflow   | Counter      | {value}       | ctxutil_dimension_overflow_total            |

(Obs. = Observable.)

Metric attributes (bounded cardinality only: never ids, queries or user data), OpenTelemetry -> Prometheus:

| instruments                          | attributes -> labels                                              |
|--------------------------------------|-------------------------------------------------------------------|
| score, chunks relevant / utilized /  | gen_ai.evaluation.name -> gen_ai_evaluation_name,                 |
| judged, evaluation duration          | gen_ai.evaluation.score.label -> gen_ai_evaluation_score_label,   |
|                                      | [ctxutil.application.name -> ctxutil_application_name], {dims}    |
| judge tokens                         | gen_ai.evaluation.name, gen_ai.token.type -> gen_ai_token_type    |
|                                      | (input / output), [ctxutil.application.name], {dims}              |
| dimension overflow                   | ctxutil.dimension.name -> ctxutil_dimension_name                  |
| evaluations                          | outcome; error.type -> error_type (failed); reason (dropped);     |
|                                      | [ctxutil.application.name]                                        |
| queue size, worker cpu throttled     | [ctxutil.application.name]                                        |

``[...]``: only when an application name is configured. ``{dims}``: the dimensions of the evaluated
interaction, each only when known (docs/slices.md): ``gen_ai.request.model`` -> ``gen_ai_request_model``,
``gen_ai.provider.name`` -> ``gen_ai_provider_name``, ``ctxutil.chain.name`` -> ``ctxutil_chain_name``,
``ctxutil.retriever.name`` -> ``ctxutil_retriever_name``, ``ctxutil.metadata.<key>`` ->
``ctxutil_metadata_<key>`` (``metric_dimensions``), and the evaluated service
(``ctxutil.evaluated.service.name`` -> ``ctxutil_evaluated_service_name``, ...); each bounded to
``dimension_max_values`` values per process (``_OTHER`` beyond). The score histogram holds two evaluations:
``gen_ai_evaluation_name="contextual_utilization"`` and ``"contextual_relevancy"`` (no score label); filter
on the name. One Prometheus family has one label set: the
exporter writes the union of a family's attribute names and leaves absent ones empty
(``ctxutil_evaluations_total{outcome="evaluated",error_type="",reason=""}``), which PromQL treats as absent.
``outcome`` is one of ``sampled_out``, ``dropped``,
``evaluated``, ``not_applicable``, ``failed``. The chunk counters are recorded for every result except
errors (0 for not applicable); the score only when there is one; the duration for every result. Score
bucket ``le`` values as exported: ``0.0``, ``0.1``, ..., ``1.0``, ``+Inf``. Pooled utilization in PromQL:
``sum(rate(ctxutil_chunks_utilized_total[5m])) / sum(rate(ctxutil_chunks_relevant_total[5m]))``.

Judge tokens are a ``ctxutil.judge.tokens`` counter rather than the conventions' ``gen_ai.client.token.usage``
histogram on purpose: judge calls run with instrumentation suppressed, and reusing the application-facing
name would mix evaluation cost into the application's own LLM token dashboards. ``gen_ai.token.type`` and
its values come from the GenAI conventions.

``ctxutil.worker.cpu_throttled`` counts the wall seconds the evaluation worker waited on its CPU budget
(``max_worker_cpu_fraction``) with interactions queued, so
``rate(ctxutil_worker_cpu_throttled_seconds_total[5m])`` is the share of time (0..1 per process) the worker
was held back: why a queue grows while the judge is fast. The name parallels cAdvisor's
``container_cpu_cfs_throttled_seconds_total`` (the same idea for a cgroup's CPU quota); the unit ``s`` is
metadata, not part of the OpenTelemetry name (OpenTelemetry metric naming guidance).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ATTR_ANSWER",
    "ATTR_APPLICATION_NAME",
    "ATTR_CHAIN_NAME",
    "ATTR_CHUNKS_TRUNCATED",
    "ATTR_CHUNK_PREFIX",
    "ATTR_DIMENSION_NAME",
    "ATTR_ERROR_TYPE",
    "ATTR_EVALUATED_DEPLOYMENT_ENVIRONMENT",
    "ATTR_EVALUATED_SERVICE_NAME",
    "ATTR_EVALUATED_SERVICE_NAMESPACE",
    "ATTR_EVALUATION_EXPLANATION",
    "ATTR_EVALUATION_NAME",
    "ATTR_EVALUATION_SCORE_LABEL",
    "ATTR_EVALUATION_SCORE_VALUE",
    "ATTR_INTERACTION_ID",
    "ATTR_INTERACTION_SOURCE",
    "ATTR_JUDGE_FORMAT_FALLBACKS",
    "ATTR_JUDGE_INPUT_TOKENS",
    "ATTR_JUDGE_MODEL",
    "ATTR_JUDGE_NAME",
    "ATTR_JUDGE_OUTPUT_FORMAT",
    "ATTR_JUDGE_OUTPUT_TOKENS",
    "ATTR_NOT_RELEVANT_ID",
    "ATTR_NOT_RELEVANT_INDEX",
    "ATTR_NOT_RELEVANT_REASON",
    "ATTR_NOT_RELEVANT_TEXT",
    "ATTR_OUTCOME",
    "ATTR_PROVIDER_NAME",
    "ATTR_QUERY",
    "ATTR_REASON",
    "ATTR_REQUEST_MODEL",
    "ATTR_RESPONSE_ID",
    "ATTR_RETRIEVER_NAME",
    "ATTR_THRESHOLD",
    "ATTR_TOKEN_TYPE",
    "ATTR_TOTAL_CHUNKS",
    "ATTR_TOTAL_RELEVANT_CHUNKS",
    "ATTR_UTILIZATION_RATE",
    "ATTR_UTILIZATION_SCORE",
    "ATTR_UTILIZED_CHUNKS",
    "CHUNK_ID",
    "CHUNK_INDEX",
    "CHUNK_IS_RELEVANT",
    "CHUNK_IS_UTILIZED",
    "CHUNK_LABEL_MAX_CHARS",
    "CHUNK_METADATA",
    "CHUNK_REASON",
    "CHUNK_TEXT",
    "DIMENSION_METADATA_PREFIX",
    "DIMENSION_OTHER",
    "DURATION_BUCKETS",
    "EVALUATED_SERVICE_FROM_RESOURCE",
    "EVALUATED_SERVICE_OTHER",
    "EVALUATION_CONTEXTUAL_RELEVANCY",
    "EVALUATION_CONTEXTUAL_UTILIZATION",
    "EVENT_EVALUATION_RESULT",
    "INSTRUMENTATION_SCOPE",
    "MAX_EVALUATED_SERVICES",
    "METRIC_CHUNKS_JUDGED",
    "METRIC_CHUNKS_RELEVANT",
    "METRIC_CHUNKS_UTILIZED",
    "METRIC_DIMENSION_OVERFLOW",
    "METRIC_EVALUATIONS",
    "METRIC_EVALUATION_DURATION",
    "METRIC_EVALUATION_SCORE",
    "METRIC_JUDGE_TOKENS",
    "METRIC_QUEUE_SIZE",
    "METRIC_WORKER_CPU_THROTTLED",
    "PROMETHEUS_NAMES",
    "SCORE_BUCKETS",
    "SPAN_EVALUATION",
    "SPAN_INTERACTION",
    "chunk_attribute",
]

INSTRUMENTATION_SCOPE: Final = "ctxutil_otel"
"""Name of the tracer, meter and logger (``otel.scope.name``; ``otel_scope_name`` in Prometheus)."""

# --- spans (ctxutil) --------------------------------------------------------------------------------
SPAN_EVALUATION: Final = "contextual_utilization"
"""The evaluation span: child of (and linked to) the evaluated span. DESIGN.md."""
SPAN_INTERACTION: Final = "rag.interaction"
"""Root span opened for an interaction that had no OpenTelemetry span of its own. DESIGN.md / Interaction."""

# --- event (GenAI semantic conventions) ------------------------------------------------------------
EVENT_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"
"""Log-based event carrying one evaluation result (GenAI conventions, ``events.yaml``)."""

# --- attributes: GenAI semantic conventions --------------------------------------------------------
ATTR_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
"""string, required on the event: the metric's name, ``contextual_utilization``."""
ATTR_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
"""double, conditionally required: the score in [0, 1]; absent when there is no score."""
ATTR_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
"""string, conditionally required: ``pass`` | ``fail`` | ``not_applicable`` | ``error``."""
ATTR_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
"""string, recommended: one human-readable sentence."""
ATTR_RESPONSE_ID: Final = "gen_ai.response.id"
"""string, spans and the event only (never metrics): the evaluated generation's completion id, when capture
saw one (LangChain ``response_metadata["id"]``, a GenAI / OpenLLMetry span's ``gen_ai.response.id``). The
event's conventions recommend it "when available", to correlate where the span id is not available."""
ATTR_TOKEN_TYPE: Final = "gen_ai.token.type"
"""string ``input`` | ``output`` on the judge token counter (GenAI conventions)."""

# --- attributes: general semantic conventions (stable) ---------------------------------------------
ATTR_ERROR_TYPE: Final = "error.type"
"""string: low-cardinality error class of a failed evaluation (``timeout``, ``verdict_mismatch``, ...)."""

# --- attributes: ctxutil ---------------------------------------------------------------------------
ATTR_UTILIZATION_SCORE: Final = "ctxutil.utilization_score"
ATTR_TOTAL_RELEVANT_CHUNKS: Final = "ctxutil.total_relevant_chunks"
ATTR_UTILIZED_CHUNKS: Final = "ctxutil.utilized_chunks"
ATTR_UTILIZATION_RATE: Final = "ctxutil.utilization_rate"
ATTR_TOTAL_CHUNKS: Final = "ctxutil.total_chunks"
ATTR_THRESHOLD: Final = "ctxutil.threshold"
ATTR_JUDGE_NAME: Final = "ctxutil.judge.name"
"""string: the judge (``lexical``, ``openai``, ...)."""
ATTR_JUDGE_MODEL: Final = "ctxutil.judge.model"
"""string: the judge's model, when it has one. Not ``gen_ai.request.model``: the evaluation span and event
live inside the application's trace, where that name means the application's own model (issue 9 item 7)."""
ATTR_JUDGE_INPUT_TOKENS: Final = "ctxutil.judge.usage.input_tokens"
"""int: input tokens the judge spent on this evaluation. Not ``gen_ai.usage.input_tokens``: tools that add
up ``gen_ai.usage.*`` over a trace would count the judge's tokens as the application's."""
ATTR_JUDGE_OUTPUT_TOKENS: Final = "ctxutil.judge.usage.output_tokens"
"""int: output tokens the judge spent on this evaluation (see ``ctxutil.judge.usage.input_tokens``)."""
ATTR_JUDGE_OUTPUT_FORMAT: Final = "ctxutil.judge.output_format"
"""string, spans and log records: the model judge's structured-output format (``json_schema`` |
``json_object_schema`` | ``json_object`` | ``none``), when the judge reports one."""
ATTR_JUDGE_FORMAT_FALLBACKS: Final = "ctxutil.judge.format_fallbacks"
"""int, spans and log records, only when > 0: times this evaluation's judgement stepped the output format
down because the judge's server refused it; each step is counted on one evaluation only."""
ATTR_APPLICATION_NAME: Final = "ctxutil.application.name"
"""string: the configured application / chain name (bounded: set by configuration, not by data)."""
ATTR_EVALUATED_SERVICE_NAME: Final = "ctxutil.evaluated.service.name"
"""string, spans, events and metrics: the ``service.name`` of the application whose spans were evaluated
(their Resource; set on the span-processor path, so ``serve`` names each sender). Bounded: at most
``dimension_max_values`` (default :data:`MAX_EVALUATED_SERVICES`) distinct identities per process, then
``_OTHER``."""
ATTR_EVALUATED_SERVICE_NAMESPACE: Final = "ctxutil.evaluated.service.namespace"
"""string, as ``ctxutil.evaluated.service.name``: the sender's ``service.namespace`` when it has one."""
ATTR_EVALUATED_DEPLOYMENT_ENVIRONMENT: Final = "ctxutil.evaluated.deployment.environment.name"
"""string, as ``ctxutil.evaluated.service.name``: the sender's ``deployment.environment.name`` (or the older
``deployment.environment``) when it has one."""
EVALUATED_SERVICE_FROM_RESOURCE: Final = {
    "service.name": ATTR_EVALUATED_SERVICE_NAME,
    "service.namespace": ATTR_EVALUATED_SERVICE_NAMESPACE,
    "deployment.environment.name": ATTR_EVALUATED_DEPLOYMENT_ENVIRONMENT,
    "deployment.environment": ATTR_EVALUATED_DEPLOYMENT_ENVIRONMENT,
}
"""Sender Resource attribute -> the attribute naming it on results (the first of the two environment keys
present wins)."""
MAX_EVALUATED_SERVICES: Final = 100
"""Distinct evaluated-service identities one emitter labels by default (the default of the setting
``dimension_max_values``, which bounds them with the other dimensions); results of further senders get
``ctxutil.evaluated.service.name=_OTHER`` (and no namespace or environment)."""
DIMENSION_OTHER: Final = "_OTHER"
"""The value of a dimension beyond its bound (``dimension_max_values`` distinct values per process), and of
``ctxutil.evaluated.service.name`` beyond :data:`MAX_EVALUATED_SERVICES` identities."""
EVALUATED_SERVICE_OTHER: Final = DIMENSION_OTHER

# --- dimensions (issue 12, docs/slices.md): spans, events and every metric point of an evaluation ------
ATTR_REQUEST_MODEL: Final = "gen_ai.request.model"
"""string: the ANSWERING model of the evaluated interaction (never the judge's, see ``ctxutil.judge.model``):
LangChain ``ls_model_name`` (else invocation params ``model`` / ``model_name``); on spans
``gen_ai.request.model``, else ``gen_ai.response.model``, else OpenInference ``llm.model_name``."""
ATTR_PROVIDER_NAME: Final = "gen_ai.provider.name"
"""string: the answering model's provider: LangChain ``ls_provider``; on spans ``gen_ai.provider.name``,
else the older ``gen_ai.system``, else OpenInference ``llm.provider`` / ``llm.system``."""
ATTR_CHAIN_NAME: Final = "ctxutil.chain.name"
"""string: the root chain's name (LangChain root run name; on spans the name of the span that closed the
turn: the chain span enclosing retrieval and generation, or the service's local root)."""
ATTR_RETRIEVER_NAME: Final = "ctxutil.retriever.name"
"""string: the first outermost retriever's name (LangChain retriever run name; on spans the retrieval span's
name)."""
DIMENSION_METADATA_PREFIX: Final = "ctxutil.metadata"
"""Prefix of ``ctxutil.metadata.<key>``: the ``metric_dimensions`` keys, from LangChain metadata or span
attributes ``<key>`` / ``metadata.<key>``."""
ATTR_DIMENSION_NAME: Final = "ctxutil.dimension.name"
"""string, on ``ctxutil.dimension.overflow`` only: the attribute whose value overflowed."""
EVALUATION_CONTEXTUAL_UTILIZATION: Final = "contextual_utilization"
"""``gen_ai.evaluation.name`` of the utilization result (the metric's name)."""
EVALUATION_CONTEXTUAL_RELEVANCY: Final = "contextual_relevancy"
"""``gen_ai.evaluation.name`` of the retrieval half: relevant / distinct retrieved chunks, from the same
verdicts (no judge call of its own), emitted as its own ``gen_ai.evaluation.result`` event and
``gen_ai.evaluation.score`` point whenever the result has verdicts for at least one chunk (not on errors,
not without chunks); no score label (it has no threshold)."""

ATTR_INTERACTION_ID: Final = "ctxutil.interaction.id"
"""string, spans and log records only (never metrics): the LangChain root run_id or the span id."""
ATTR_INTERACTION_SOURCE: Final = "ctxutil.interaction.source"
"""string, spans and log records only: which capture path produced the interaction."""
ATTR_QUERY: Final = "ctxutil.query"
"""string, only with content capture: the user's question (truncated)."""
ATTR_ANSWER: Final = "ctxutil.answer"
"""string, only with content capture: the generated answer (truncated)."""
ATTR_CHUNKS_TRUNCATED: Final = "ctxutil.chunks.truncated"
"""bool: ``True`` when fewer per-chunk attribute groups were emitted than ``ctxutil.total_chunks``."""
ATTR_CHUNK_PREFIX: Final = "ctxutil.chunks"
ATTR_NOT_RELEVANT_INDEX: Final = "ctxutil.chunks.not_relevant.index"
"""int[], the evaluation span and its event: the retrieval indices of the chunks judged NOT relevant (not
counted in the score; an identical repeat of one is not listed again), at most ``max_chunk_attributes``
of them; empty when every distinct chunk was relevant. Why a chunk was not counted, without content."""
ATTR_NOT_RELEVANT_ID: Final = "ctxutil.chunks.not_relevant.id"
"""string[], beside ``ctxutil.chunks.not_relevant.index``: their documents' ids (``""`` where a document
has none), when ``chunk_metadata_keys`` is not empty (the switch of ``ctxutil.chunks.{i}.id``) and one has
an id."""
ATTR_NOT_RELEVANT_REASON: Final = "ctxutil.chunks.not_relevant.reason"
"""string[], beside ``ctxutil.chunks.not_relevant.index``, only with content capture: the judge's reasons
(``""`` where it gave none; a reason quotes or paraphrases its chunk)."""
ATTR_NOT_RELEVANT_TEXT: Final = "ctxutil.chunks.not_relevant.text"
"""string[], beside ``ctxutil.chunks.not_relevant.index``, only with content capture: the chunks' text,
each truncated to ``max_content_chars``."""
CHUNK_INDEX: Final = "index"
CHUNK_IS_RELEVANT: Final = "is_relevant"
CHUNK_IS_UTILIZED: Final = "is_utilized"
CHUNK_ID: Final = "id"
"""string, emitted without content capture: the chunk's document id (LangChain ``Document.id``, OpenInference
``retrieval.documents.{i}.document.id``, GenAI retrieval document ``id``), truncated; absent when unknown."""
CHUNK_METADATA: Final = "metadata"
"""Prefix of ``ctxutil.chunks.{i}.metadata.{key}``: the configured metadata keys (``chunk_metadata_keys``,
default ``source``) of the chunk's document, emitted without content capture; scalar values only, strings
truncated, never a value equal to the chunk's text."""
CHUNK_LABEL_MAX_CHARS: Final = 256
"""Characters kept of a chunk id or metadata string value."""
CHUNK_REASON: Final = "reason"
"""Only with content capture: a judge's free-text reason routinely quotes or paraphrases the chunk."""
CHUNK_TEXT: Final = "text"
"""Only with content capture, truncated to ``max_content_chars``."""

ATTR_OUTCOME: Final = "outcome"
"""On ``ctxutil.evaluations``: sampled_out | dropped | evaluated | not_applicable | failed."""
ATTR_REASON: Final = "reason"
"""On ``ctxutil.evaluations`` for ``dropped``: ``rate_limited`` | ``token_budget`` | ``queue_full`` | ..."""


def chunk_attribute(i: int, field: str) -> str:
    """Return ``ctxutil.chunks.{i}.{field}``, e.g. ``chunk_attribute(2, CHUNK_IS_UTILIZED)``."""
    return f"{ATTR_CHUNK_PREFIX}.{i}.{field}"


# --- metrics ---------------------------------------------------------------------------------------
METRIC_EVALUATION_SCORE: Final = "gen_ai.evaluation.score"
"""Histogram, unit ``1``: scores of scored results (named after ``gen_ai.evaluation.score.value``)."""
METRIC_CHUNKS_RELEVANT: Final = "ctxutil.chunks.relevant"
"""Counter, unit ``{chunk}``: distinct relevant chunks per evaluation."""
METRIC_CHUNKS_UTILIZED: Final = "ctxutil.chunks.utilized"
"""Counter, unit ``{chunk}``: distinct relevant chunks the answer used."""
METRIC_CHUNKS_JUDGED: Final = "ctxutil.chunks.judged"
"""Counter, unit ``{chunk}``: distinct retrieved chunks judged (``relevant / judged`` is the share of
retrieved context that was relevant); same attributes and recording rule as ``ctxutil.chunks.relevant``."""
METRIC_DIMENSION_OVERFLOW: Final = "ctxutil.dimension.overflow"
"""Counter, unit ``{value}``: dimension values reported as ``_OTHER`` because their dimension had
``dimension_max_values`` distinct values already, by ``ctxutil.dimension.name``."""
METRIC_EVALUATION_DURATION: Final = "ctxutil.evaluation.duration"
"""Histogram, unit ``s``: wall-clock seconds of one evaluation (judge call included)."""
METRIC_JUDGE_TOKENS: Final = "ctxutil.judge.tokens"
"""Counter, unit ``{token}``: judge tokens, split by ``gen_ai.token.type``."""
METRIC_EVALUATIONS: Final = "ctxutil.evaluations"
"""ObservableCounter, unit ``{evaluation}``: interactions by final ``outcome`` (accounting invariant)."""
METRIC_QUEUE_SIZE: Final = "ctxutil.queue.size"
"""ObservableGauge, unit ``{interaction}``: interactions waiting for the worker."""
METRIC_WORKER_CPU_THROTTLED: Final = "ctxutil.worker.cpu_throttled"
"""ObservableCounter, unit ``s``: cumulative wall seconds the worker waited on its CPU budget
(``EvaluatorStats.cpu_throttled_s``); its rate is the share of time throttled."""

SCORE_BUCKETS: Final[tuple[float, ...]] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""Explicit boundaries of ``gen_ai.evaluation.score`` (DESIGN.md)."""

DURATION_BUCKETS: Final[tuple[float, ...]] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
"""Seconds: the GenAI conventions' advice for ``gen_ai.client.operation.duration`` (0.01 .. 81.92, doubling),
extended down to 1 ms for the offline lexical judge. The SDK's default boundaries (0 .. 10000) assume ms."""

PROMETHEUS_NAMES: Final[dict[str, tuple[str, ...]]] = {
    METRIC_EVALUATION_SCORE: (
        "gen_ai_evaluation_score_bucket",
        "gen_ai_evaluation_score_sum",
        "gen_ai_evaluation_score_count",
    ),
    METRIC_CHUNKS_RELEVANT: ("ctxutil_chunks_relevant_total",),
    METRIC_CHUNKS_UTILIZED: ("ctxutil_chunks_utilized_total",),
    METRIC_CHUNKS_JUDGED: ("ctxutil_chunks_judged_total",),
    METRIC_DIMENSION_OVERFLOW: ("ctxutil_dimension_overflow_total",),
    METRIC_EVALUATION_DURATION: (
        "ctxutil_evaluation_duration_seconds_bucket",
        "ctxutil_evaluation_duration_seconds_sum",
        "ctxutil_evaluation_duration_seconds_count",
    ),
    METRIC_JUDGE_TOKENS: ("ctxutil_judge_tokens_total",),
    METRIC_EVALUATIONS: ("ctxutil_evaluations_total",),
    METRIC_QUEUE_SIZE: ("ctxutil_queue_size",),
    METRIC_WORKER_CPU_THROTTLED: ("ctxutil_worker_cpu_throttled_seconds_total",),
}
"""OpenTelemetry instrument name -> the Prometheus sample names it produces (the table above, as data)."""
