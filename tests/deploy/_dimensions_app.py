"""A LangChain RAG application with two answering models and two prompt versions, evaluated by one
``UtilizationCallbackHandler`` (one evaluator), its metrics served for Prometheus to scrape.

Run by tests/deploy/test_dimensions_end_to_end.py as ``python _dimensions_app.py``. Real parts throughout:
LangChain runnables (a ``BaseRetriever`` named ``docs``, ``ChatPromptTemplate`` s, and chat models built on
``langchain_core``'s ``FakeListChatModel``, which replays fixed answers; a subclass only adds the
``model_name`` that LangChain reports as ``ls_model_name`` and a provider for ``ls_provider``), the
project's callback handler, evaluator and emitter as the handler builds them from settings
(``metric_dimensions=prompt_version``, the offline lexical judge, every interaction evaluated), the
OpenTelemetry SDK ``MeterProvider`` with ``opentelemetry-exporter-prometheus``'s ``PrometheusMetricReader``,
and ``prometheus_client``'s HTTP server on 127.0.0.1 (an OS-assigned port).

The answers, per slice (``ANSWERS``): model-a under prompt v1 uses both relevant chunks; model-a under v2
alternates between using both and using one; model-b ignores the context under both versions. A third
prompt version, v3, comes after v1 and v2 are established, with a bound of ``DIMENSION_MAX_VALUES`` = 2
values per dimension: its results are reported as ``_OTHER`` and counted in ``ctxutil.dimension.overflow``.

Protocol on stdin/stdout (one JSON object per line):

* at start-up ``{"port": N}`` once the metrics endpoint listens;
* ``run`` invokes every chain of v1 and v2 ``TURNS`` times (metadata ``prompt_version`` on the call), waits
  with ``force_flush``, then the v3 chain as often, waits again, and prints
  ``{"flushed": bool, "stats": {...}}`` (the evaluator's cumulative counts);
* ``exit`` (or end of input) shuts down.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnablePassthrough
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import start_http_server

from ctxutil_otel.capture import UtilizationCallbackHandler

SERVICE_NAME = "ctxutil-dims-e2e"
APPLICATION_NAME = "dims-app"
CHAIN_NAME = "rag"
RETRIEVER_NAME = "docs"
QUESTION = "What are the benefits of green tea?"
CHUNKS = (
    "Green tea contains antioxidants called catechins.",
    "The antioxidants in green tea reduce inflammation.",
    "Tea originated in China thousands of years ago.",
    "The museum opens at nine on weekdays.",
)
BOTH = "Green tea contains antioxidants called catechins, and these antioxidants reduce inflammation."
ONE = "Green tea contains antioxidants called catechins; it may help with inflammation."
NONE = "Drink water every day."
#: (model, provider, prompt_version) -> the answers its chat model replays, in turn.
ANSWERS: dict[tuple[str, str, str], tuple[str, ...]] = {
    ("model-a", "provider-a", "v1"): (BOTH,),
    ("model-a", "provider-a", "v2"): (BOTH, ONE),
    ("model-b", "provider-b", "v1"): (NONE,),
    ("model-b", "provider-b", "v2"): (NONE,),
    ("model-a", "provider-a", "v3"): (BOTH,),
}
#: Distinct values kept per dimension: v1 and v2 of prompt_version; v3, seen third, becomes _OTHER.
DIMENSION_MAX_VALUES = 2
OVERFLOW_VERSIONS = ("v3",)
OVERFLOW_VALUE = "_OTHER"
PROMPTS = {
    "v1": "Answer from the context.\nContext: {context}\nQuestion: {question}",
    "v2": "Question: {question}\nUse this context if it helps: {context}",
    "v3": "Context:\n{context}\n\nQ: {question}\nA:",
}
#: Interactions per slice and batch: even (model-a v2 alternates two answers), and enough that model-b's
#: slices (one relevant chunk each) pass the alerts' minimum volume of 20 relevant chunks in one batch.
TURNS = 24


class NamedFakeChatModel(FakeListChatModel):
    """``FakeListChatModel`` with the model name and provider a real integration reports to LangChain:
    ``model_name`` becomes ``ls_model_name`` (LangChain's default ``_get_ls_params``), ``provider`` the
    ``ls_provider``."""

    model_name: str
    provider: str

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = self.provider
        return params


class Docs(BaseRetriever):
    """The same four chunks for every query."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document(page_content=text, metadata={"source": f"doc-{i}"}) for i, text in enumerate(CHUNKS)]


def chain_of(model: str, provider: str, version: str) -> Runnable[str, str]:
    llm = NamedFakeChatModel(
        responses=list(ANSWERS[(model, provider, version)]), model_name=model, provider=provider
    )
    prompt = ChatPromptTemplate.from_template(PROMPTS[version])
    retriever = Docs().with_config(run_name=RETRIEVER_NAME)
    chain = {"context": retriever, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    return chain.with_config(run_name=CHAIN_NAME)


def main() -> int:
    resource = Resource.create({"service.name": SERVICE_NAME})
    meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader()], resource=resource)
    tracer_provider = TracerProvider(resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    server, _thread = start_http_server(0, addr="127.0.0.1")
    handler = UtilizationCallbackHandler(
        judge="lexical",
        metric_dimensions="prompt_version",
        dimension_max_values=DIMENSION_MAX_VALUES,
        application_name=APPLICATION_NAME,
        sample_rate=1.0,
        max_evaluations_per_second=0,
        max_worker_cpu_fraction=0,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
    )
    chains = {key: chain_of(*key) for key in ANSWERS}
    print(json.dumps({"port": server.server_port}), flush=True)
    try:
        for line in sys.stdin:
            command = line.strip()
            if command in {"", "exit"}:
                break
            if command != "run":
                print(json.dumps({"error": f"unknown command {command!r}"}), flush=True)
                continue
            # v1 and v2 are emitted before any v3 (the bound keeps the first values it sees).
            flushed = True
            for late in (False, True):
                for _ in range(TURNS):
                    for (_, _, version), chain in chains.items():
                        if (version in OVERFLOW_VERSIONS) is late:
                            config: Any = {"callbacks": [handler], "metadata": {"prompt_version": version}}
                            chain.invoke(QUESTION, config=config)
                flushed = handler.evaluator.force_flush(30_000) and flushed
            stats = handler.stats()
            print(
                json.dumps(
                    {
                        "flushed": flushed,
                        "stats": {
                            "captured": stats.captured,
                            "evaluated": stats.evaluated,
                            "not_applicable": stats.not_applicable,
                            "dropped": dict(stats.dropped),
                            "failed": dict(stats.failed),
                        },
                    }
                ),
                flush=True,
            )
    finally:
        handler.evaluator.shutdown(5_000)
        meter_provider.shutdown()
        tracer_provider.shutdown()
        logger_provider.shutdown()
        server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
