"""The five reference examples of DESIGN.md reproduce exactly when the judge returns their verdicts."""

from __future__ import annotations

import pytest

from ctxutil_otel import ContextualUtilization, DatasetItem

from .conftest import ScriptedJudge

# (query, [(chunk, marks)], expected utilized, expected relevant) straight from DESIGN.md's table.
REFERENCE = [
    (
        "benefits of green tea",
        [
            ("Green tea contains antioxidants.", "RU"),
            ("Antioxidants reduce inflammation.", "RU"),
            ("Green tea boosts metabolism.", "R"),
            ("Tea originated in China.", ""),
        ],
        2,
        3,
    ),
    (
        "what is Python",
        [
            ("Python is a high-level language.", "RU"),
            ("Guido van Rossum created Python.", "RU"),
            ("Python emphasises readability.", "RU"),
        ],
        3,
        3,
    ),
    (
        "boiling point of water",
        [
            ("Water boils at 100 °C at sea level.", "RU"),
            ("That equals 212 °F.", "RU"),
            ("Ice cream melts quickly.", ""),
        ],
        2,
        2,
    ),
    (
        "benefits of exercise",
        [
            ("Exercise improves cardiovascular health.", "RU"),
            ("Exercise lifts mood and energy.", "RU"),
            ("Exercise helps weight management.", "R"),
            ("Gyms offer memberships.", ""),
        ],
        2,
        3,
    ),
    (
        "causes of WWI",
        [
            ("The assassination of Archduke Franz Ferdinand.", "RU"),
            ("Alliances bound the powers together.", "R"),
            ("Nationalism was rising.", "R"),
            ("The war lasted from 1914 to 1918.", "R"),
        ],
        1,
        4,
    ),
]


@pytest.mark.parametrize(("query", "chunks", "used", "relevant"), REFERENCE, ids=[r[0] for r in REFERENCE])
async def test_reference_example_scores_exactly(
    query: str, chunks: list[tuple[str, str]], used: int, relevant: int
) -> None:
    judge = ScriptedJudge(dict(chunks))
    metric = ContextualUtilization(judge=judge)
    result = await metric.execute(
        DatasetItem(query=query, actual_output="an answer", retrieved_content=[c for c, _ in chunks])
    )
    assert result.score == used / relevant
    assert result.signals.utilization_score == used / relevant
    assert result.signals.utilized_chunks == used
    assert result.signals.total_relevant_chunks == relevant
    assert result.signals.total_chunks == len(chunks)
    assert result.signals.utilization_rate == f"{used / relevant * 100:.1f}%"
    assert result.label == ("pass" if used / relevant >= 0.5 else "fail")
    assert result.passed is (used / relevant >= 0.5)
    # The breakdown lists relevant chunks only, in retrieval order, with their index and text.
    expected = [(i, c, "U" in m) for i, (c, m) in enumerate(chunks) if "R" in m]
    assert [(b.index, b.chunk_text, b.is_utilized) for b in result.signals.chunk_breakdown] == expected


async def test_green_tea_rate_string_and_rounding() -> None:
    chunks = dict(REFERENCE[0][1])
    result = await ContextualUtilization(judge=ScriptedJudge(chunks)).execute(
        DatasetItem(query="benefits of green tea", actual_output="x", retrieved_content=list(chunks))
    )
    assert round(result.score or 0, 2) == 0.67
    assert result.signals.utilization_rate == "66.7%"
    assert "2 of 3" in result.pretty()
