"""Request-path cost of ``UtilizationCallbackHandler`` on a LangGraph ReAct agent whose tools retrieve
(issue 23 item 1: tool results are read from the answering prompt when the root ends).

    .venv/bin/python benchmarks/bench_agent_tools.py [--iterations 300] [--rounds 5] [--passages N]
        [--rates 0.01,1.0] [--json PATH]

The agent is LangGraph's prebuilt ReAct agent over two tools called in parallel (a search tool returning
``--passages`` passages as a list, default 3; ``--passages 2000`` is a large result of about 100 kB, and a
calculator), then an answer: two model calls, two tool calls, about twenty
LangChain runs per invoke. The chat model is a scripted ``BaseChatModel`` (no sleep: the figures are the
callbacks' CPU on top of LangGraph's own). Configurations, interleaved in ``--rounds`` blocks of
``--iterations`` invocations each, in one process:

* ``floor``: a do-nothing ``BaseCallbackHandler`` (LangChain's callback dispatch; the reference);
* ``floor_again``: the same again, an A/A control for this machine's noise;
* ``ctxutil_<rate>``: our handler at each ``--rates`` sample rate, lexical judge, no rate cap: at 0.01
  99% of turns are only asked at the root's end whether a tool result counts (here by the tool's name) and
  counted sampled out, their results never made chunks; at 1.0 every turn's chunks are built and queued
  (with ``--passages 2000`` the worker cannot judge them all within the flush: leave 1.0 out).

Printed (and written with ``--json``): per configuration the median over rounds of the mean milliseconds
per invoke, wall and CPU of the invoking thread, each with its ratio to ``floor``; our handler's
accounting (captured must equal its outcomes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from collections.abc import Sequence
from typing import Any

from _common import Providers
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from ctxutil_otel import UtilizationCallbackHandler

PASSAGES = [
    "Green tea contains antioxidants called catechins.",
    "The antioxidants in green tea reduce inflammation.",
    "Green tea may boost metabolism.",
]
#: What ``search_docs`` returns (``--passages``): PASSAGES repeated to the length asked.
RESULT: list[str] = list(PASSAGES)


@tool
def search_docs(query: str) -> list[str]:
    """Search the documentation."""
    return list(RESULT)


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


class ScriptedAgentModel(BaseChatModel):
    """Calls both tools when the last message is the user's, answers once it has their results."""

    @property
    def _llm_type(self) -> str:
        return "scripted-agent"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedAgentModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kwargs: Any) -> ChatResult:
        if messages[-1].type == "tool":
            message = AIMessage("Green tea has catechins, which reduce inflammation; 2 x 3 = 6.")
        else:
            message = AIMessage(
                "",
                tool_calls=[
                    {"name": "search_docs", "args": {"query": "green tea"}, "id": "call-1"},
                    {"name": "multiply", "args": {"a": 2, "b": 3}, "id": "call-2"},
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


class Nothing(BaseCallbackHandler):
    """LangChain's callback dispatch with a handler that does nothing."""


def _block(agent: Any, handler: BaseCallbackHandler, iterations: int) -> tuple[float, float]:
    """Mean milliseconds per invoke: wall, and CPU of the invoking thread (where the root ends and our
    handler decides; less noisy than wall, which includes LangGraph's tool threads being scheduled)."""
    config: Any = {"callbacks": [handler]}
    start, cpu = time.perf_counter(), time.thread_time()
    for _ in range(iterations):
        agent.invoke({"messages": [("user", "What are the benefits of green tea?")]}, config=config)
    wall, cpu = time.perf_counter() - start, time.thread_time() - cpu
    return wall * 1000 / iterations, cpu * 1000 / iterations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--passages", type=int, default=len(PASSAGES), help="passages the search returns")
    parser.add_argument("--rates", default="0.01,1.0", help="sample rates of our handler, comma-separated")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rates = [float(rate) for rate in args.rates.split(",")]
    RESULT[:] = [PASSAGES[i % len(PASSAGES)] for i in range(args.passages)]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent moved to langchain.agents (not installed)
        from langgraph.prebuilt import create_react_agent

        agent = create_react_agent(ScriptedAgentModel(), [search_docs, multiply])
    providers = Providers.create()  # real SDK providers exporting nowhere: emission is paid as in production
    ours = {
        rate: UtilizationCallbackHandler(
            judge="lexical",
            sample_rate=rate,
            max_evaluations_per_second=0,
            tracer_provider=providers.tracer_provider,
            meter_provider=providers.meter_provider,
            logger_provider=providers.logger_provider,
        )
        for rate in rates
    }
    handlers: dict[str, BaseCallbackHandler] = {"floor": Nothing(), "floor_again": Nothing()}
    handlers.update({f"ctxutil_{rate}": handler for rate, handler in ours.items()})
    for handler in handlers.values():
        _block(agent, handler, 5)  # warm-up
    means: dict[str, list[float]] = {name: [] for name in handlers}
    cpus: dict[str, list[float]] = {name: [] for name in handlers}
    for _ in range(args.rounds):
        for name, handler in handlers.items():
            wall, cpu = _block(agent, handler, args.iterations)
            means[name].append(wall)
            cpus[name].append(cpu)
    floor, floor_cpu = statistics.median(means["floor"]), statistics.median(cpus["floor"])
    figures: dict[str, Any] = {
        name: {
            "mean_ms": statistics.median(m),
            "ratio_to_floor": statistics.median(m) / floor,
            "thread_cpu_ms": statistics.median(cpus[name]),
            "thread_cpu_ratio_to_floor": statistics.median(cpus[name]) / floor_cpu,
        }
        for name, m in means.items()
    }
    for name, handler in ours.items():
        assert handler.force_flush(60_000)
        s = handler.stats()
        outcomes = s.sampled_out + s.not_selected + sum(s.dropped.values())
        outcomes += s.evaluated + s.not_applicable + sum(s.failed.values())
        figures[f"ctxutil_{name}"]["captured"] = s.captured
        figures[f"ctxutil_{name}"]["outcomes"] = outcomes
        handler.shutdown(5_000)
    for name, row in figures.items():
        extra = f"  captured {row['captured']} = outcomes {row['outcomes']}" if "captured" in row else ""
        print(
            f"{name:14s} {row['mean_ms']:7.3f} ms/invoke  x{row['ratio_to_floor']:.3f} of floor; invoking "
            f"thread CPU {row['thread_cpu_ms']:7.3f} ms  x{row['thread_cpu_ratio_to_floor']:.3f}{extra}"
        )
    providers.shutdown()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(figures, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
