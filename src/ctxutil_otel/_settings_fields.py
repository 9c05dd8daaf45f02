"""The settings themselves: each setting's name, type, default, bounds and description (the source of
docs/settings.md's table). How they are resolved and checked is :class:`~ctxutil_otel._settings.Settings`,
which adds nothing but behaviour to these fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, NoDecode

from ._mode import EvaluationMode
from ._selection import SelectionRule

__all__ = ["SettingsFields"]


class SettingsFields(BaseSettings):
    """The fields of :class:`~ctxutil_otel._settings.Settings`, in the order of its docs (sampling and
    admission, worker, judge and metric, emission, capture state, the receiver); never built on its own."""

    # --- sampling and admission -------------------------------------------------------------
    sample_rate: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description=(
            "Share of traces evaluated, 0..1 (CTXUTIL_SAMPLE_RATE, default 1.0). Decided from the trace "
            "id like OpenTelemetry's TraceIdRatioBased, so the same trace gets the same decision in every "
            "process. Lower it for high traffic; the rate cap below bounds the cost either way."
        ),
    )
    selection_rules: Annotated[tuple[SelectionRule, ...], NoDecode] = Field(
        default=(),
        description=(
            "Which interactions are evaluated, before sampling (CTXUTIL_SELECTION_RULES, a JSON list, "
            "empty by default): an ordered list of rules, each with match conditions (root_name glob, tags "
            "any-of, metadata key=value for the LangChain callback; service_name glob, root_name = the "
            "enclosing span's name, attributes equality for spans) and its own sample_rate; the first "
            "matching rule decides, no match falls back to sample_rate. A matching rule's refusal is "
            "counted not_selected. See docs/selection.md."
        ),
    )
    max_evaluations_per_second: float | None = Field(
        default=10.0,
        ge=0.0,
        description=(
            "Rate cap on admitted evaluations, evaluations per second (CTXUTIL_MAX_EVALUATIONS_PER_SECOND, "
            "default 10). Token bucket with a burst of max(1, rate) evaluations. 0 or None = unlimited. "
            "Refusals are counted as dropped, reason rate_limited."
        ),
    )
    judge_token_budget_per_minute: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Judge tokens (input + output, as reported by the judge) that may be spent per minute "
            "(CTXUTIL_JUDGE_TOKEN_BUDGET_PER_MINUTE, default None). 0 or None = unlimited. While spent, "
            "submissions are dropped with reason token_budget."
        ),
    )
    # --- worker -------------------------------------------------------------------------------
    max_queue_size: int = Field(
        default=2048,
        ge=1,
        le=1_000_000,
        description=(
            "Interactions waiting for evaluation, at most (CTXUTIL_MAX_QUEUE_SIZE, default 2048, like "
            "OTEL_BSP_MAX_QUEUE_SIZE). When full the NEWEST interaction is dropped, reason queue_full."
        ),
    )
    max_concurrency: int = Field(
        default=8,
        ge=1,
        le=1024,
        description=(
            "Evaluations in flight at once on the worker's asyncio loop (CTXUTIL_MAX_CONCURRENCY, "
            "default 8). Matters for I/O-bound judges (openai); the lexical judge is CPU-bound."
        ),
    )
    max_worker_cpu_fraction: float | None = Field(
        default=0.03,
        ge=0.0,
        le=1.0,
        description=(
            "CPU budget of the evaluation worker as a share of ONE core, in CPU-seconds per wall second, "
            "0..1 (CTXUTIL_MAX_WORKER_CPU_FRACTION, default 0.03 = 3% of one core; 0 or None = "
            "unlimited). Why CPU and not only evaluations/s: the worker's thread runs all judge and emit "
            "work holding Python's GIL, and the application's threads wait for it, so what the request "
            "path pays follows the worker's CPU share (measured: the chain slows by about twice that "
            "share), and the CPU of one evaluation depends on the judge. "
            "Measured on the worker thread's own CPU clock (time.thread_time, less the full garbage "
            "collections that fall on it: they walk the whole process's heap); while spent (a token "
            "bucket with a 5 ms burst) the worker waits before starting the next evaluation, "
            "interactions wait in the queue, and a full queue drops the newest, reason queue_full. "
            "Set 0 in a dedicated evaluator process or a batch job (the serve and demo commands do when "
            "it is unset)."
        ),
    )
    worker: Literal["thread", "process"] = Field(
        default="thread",
        description=(
            "Where the judge and the metric run (CTXUTIL_WORKER, default thread). thread: on the "
            "evaluator's own thread, sharing the application's interpreter lock (no extra process; the "
            "CPU budget above bounds what the request path pays). process: in a child process started "
            "with multiprocessing's spawn method; the application process only copies the interaction's "
            "strings to it and emits the results, so far more evaluations fit in the same CPU budget, "
            "for the child's memory and start-up time. The child never runs your main module (no "
            "entry-point guard is needed). See docs/worker.md for the figures."
        ),
    )
    evaluation_timeout_s: float = Field(
        default=60.0,
        gt=0.0,
        le=3600.0,
        description=(
            "Deadline of one evaluation in seconds, judge call included (CTXUTIL_EVALUATION_TIMEOUT_S, "
            "default 60; the openai judge retries inside it). Past it: failed, error.type timeout."
        ),
    )
    shutdown_timeout_s: float = Field(
        default=5.0,
        ge=0.0,
        le=3600.0,
        description=(
            "Seconds the interpreter-exit (atexit) shutdown waits for pending evaluations "
            "(CTXUTIL_SHUTDOWN_TIMEOUT_S, default 5); what is left is counted dropped, reason shutdown."
        ),
    )
    # --- judge and metric ---------------------------------------------------------------------
    judge: Literal["semantic", "learned", "lexical", "openai"] = Field(
        default="semantic",
        description=(
            "Which judge decides relevance and utilization (CTXUTIL_JUDGE, default semantic): 'semantic' "
            "(offline trees over word and embedding features, relevance from the query alone; needs the "
            "'semantic' extra, without which it judges with 'learned' and warns once), 'learned' "
            "(offline trees shipped in the package, no extra), 'lexical' "
            "(offline, deterministic, no key) or 'openai' (any OpenAI-compatible chat model)."
        ),
    )
    judge_model: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "Chat model of the openai judge (CTXUTIL_JUDGE_MODEL, default None = the judge's own default, "
            "gpt-4o-mini)."
        ),
    )
    judge_base_url: str | None = Field(
        default=None,
        repr=False,  # may carry credentials: never in repr (errors never echo it either)
        description=(
            "Base URL of the OpenAI-compatible API, http(s)://... (CTXUTIL_JUDGE_BASE_URL, default None = "
            "the openai SDK's OPENAI_BASE_URL or api.openai.com). No user:password@, ?query or #fragment "
            "(rejected: request URLs are logged at INFO level; the key goes in judge_api_key)."
        ),
    )
    judge_api_key: SecretStr | None = Field(
        default=None,
        description=(
            "API key for the openai judge only (CTXUTIL_JUDGE_API_KEY, default None = the judge reads "
            "OPENAI_API_KEY). Never printed, logged or emitted."
        ),
    )
    # The values of judges._negotiate.ResponseFormatSetting (a test pins them equal; not imported: the
    # settings import nothing of the judges).
    judge_response_format: Literal["auto", "json_schema", "json_object_schema", "json_object", "none"] = (
        Field(
            default="auto",
            description=(
                "Structured-output format of the openai judge (CTXUTIL_JUDGE_RESPONSE_FORMAT, default auto): "
                "'auto' negotiates (json_schema, then json_object_schema, json_object, none, as the server "
                "refuses them); any other value is used as is and never stepped down."
            ),
        )
    )
    judge_timeout_s: float | None = Field(
        default=None,
        gt=0.0,
        le=3600.0,
        description=(
            "Seconds one HTTP attempt of the openai judge may take (CTXUTIL_JUDGE_TIMEOUT_S, default None = "
            "the judge's own 30). Raise it for a slow local model: a reply of several hundred tokens at a "
            "few tokens per second takes minutes."
        ),
    )
    judge_deadline_s: float | None = Field(
        default=None,
        gt=0.0,
        le=3600.0,
        description=(
            "Seconds one judge call may take in all, retries included (CTXUTIL_JUDGE_DEADLINE_S, default "
            "None = the judge's own 120); past it the call fails with error.type timeout. In the live "
            "evaluator evaluation_timeout_s bounds the whole evaluation as well."
        ),
    )
    threshold: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description=(
            "Pass threshold of the score, 0..1: pass when score >= threshold (CTXUTIL_THRESHOLD, "
            "default 0.5)."
        ),
    )
    mode: EvaluationMode = Field(
        default=EvaluationMode.GRANULAR,
        description=(
            "Judge explanation mode (CTXUTIL_MODE, default granular): 'granular' (a reason per chunk) or "
            "'fast' (no reasons: fewer judge output tokens, same verdicts)."
        ),
    )
    # --- emission -----------------------------------------------------------------------------
    capture_content: bool = Field(
        default=False,
        description=(
            "Emit query, answer and chunk text (CTXUTIL_CAPTURE_CONTENT, default false; when unset, "
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true also turns it on). Off: only indices, "
            "lengths, verdicts and scores leave the process."
        ),
    )
    max_content_chars: int = Field(
        default=1000,
        ge=1,
        description=(
            "Characters of each emitted text when content capture is on (CTXUTIL_MAX_CONTENT_CHARS, "
            "default 1000)."
        ),
    )
    application_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description=(
            "A low-cardinality application / chain name added to metrics (CTXUTIL_APPLICATION_NAME, "
            "default None)."
        ),
    )
    chunk_metadata_keys: Annotated[tuple[str, ...], NoDecode] = Field(
        default=("source",),
        description=(
            "Which document each chunk was: its id and these metadata keys are emitted per chunk as "
            "ctxutil.chunks.{i}.id / .metadata.{key}, even with content capture off (truncated to 256 "
            "characters, never the chunk text) (CTXUTIL_CHUNK_METADATA_KEYS, comma-separated, default "
            "source). Empty (CTXUTIL_CHUNK_METADATA_KEYS= set to nothing) emits neither ids nor metadata."
        ),
    )
    metric_dimensions: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description=(
            "Metadata keys added as dimensions to every evaluation result's metrics, span and event, as "
            "ctxutil.metadata.<key> (CTXUTIL_METRIC_DIMENSIONS, comma-separated, e.g. prompt_version,tenant; "
            "empty by default): read from the LangChain root run's metadata, or from the span attributes "
            "<key> or metadata.<key>. Keys: letters, digits, _ . - only; refused: keys that become the same "
            "Prometheus label, and keys carrying user content (input.value, gen_ai.*messages ...: values "
            "are emitted whatever capture_content says). The answering model, its provider, "
            "the root chain and the retriever are dimensions without configuration. See docs/slices.md."
        ),
    )
    dimension_max_values: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description=(
            "Distinct values kept per dimension per process (CTXUTIL_DIMENSION_MAX_VALUES, default 100); "
            "later new values are reported as _OTHER, counted in ctxutil.dimension.overflow and warned once "
            "per dimension. Also bounds the evaluated-service identities. See docs/slices.md for sizing."
        ),
    )
    dimension_max_chars: int = Field(
        default=64,
        ge=1,
        le=1024,
        description=(
            "Characters kept of each dimension value (CTXUTIL_DIMENSION_MAX_CHARS, default 64); longer "
            "values are cut before they are counted against dimension_max_values."
        ),
    )
    # --- which tool results are retrieved context (the callback) ----------------------------------
    retrieval_tools: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description=(
            "Tools whose results are retrieved context (CTXUTIL_RETRIEVAL_TOOLS, comma-separated names or "
            "fnmatch globs, e.g. search_*,kb_lookup; empty by default). Empty: a tool result in the "
            "answering model's prompt counts when its artifact holds Documents, its content is a list of "
            "strings, or the tool's name or description says it searches or retrieves (search, retrieve, "
            "lookup, query, docs, wiki, ...). Set: only these tools count. See docs/capture.md."
        ),
    )
    excluded_tools: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description=(
            "Tools whose results are never retrieved context, whatever else says so "
            "(CTXUTIL_EXCLUDED_TOOLS, comma-separated names or fnmatch globs; empty by default)."
        ),
    )
    # --- capture state (used by the capture paths) ----------------------------------------------
    run_ttl_s: float = Field(
        default=300.0,
        gt=0.0,
        description=(
            "Seconds a captured run may stay unfinished before it is evicted and counted dropped, reason "
            "ttl_expired (CTXUTIL_RUN_TTL_S, default 300)."
        ),
    )
    max_pending_runs: int = Field(
        default=10_000,
        ge=1,
        description=(
            "Unfinished runs (or buffered traces) held by a capture path at most; beyond it the oldest is "
            "evicted and counted dropped, reason pending_full (CTXUTIL_MAX_PENDING_RUNS, default 10000). "
            "The callback counts every LangChain run, nested ones included (a retriever, a prompt, a model "
            "each count): size it as concurrent requests x runs per request."
        ),
    )
    # --- the OTLP receiver (``ctxutil-otel serve``; they usually come from mounted secrets) -------------
    serve_token: SecretStr | None = Field(
        default=None,
        description=(
            "Bearer token senders must present to ctxutil-otel serve (CTXUTIL_SERVE_TOKEN, default None = "
            "no token; --token-file wins). Never printed, logged or emitted."
        ),
    )
    serve_tls_cert: Path | None = Field(
        default=None,
        description="PEM certificate of ctxutil-otel serve (CTXUTIL_SERVE_TLS_CERT; --tls-cert wins).",
    )
    serve_tls_key: Path | None = Field(
        default=None,
        description="PEM private key of ctxutil-otel serve (CTXUTIL_SERVE_TLS_KEY; --tls-key wins).",
    )
