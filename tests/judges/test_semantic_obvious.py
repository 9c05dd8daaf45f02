"""The default judge on the questions a new user tries first: a chunk that states the answer in the query's
words is relevant and used, and a chunk about something else entirely is not relevant.

The seed-style training rows were written with relevant chunks that avoid the query's words and distractors
that repeat them; trained on those alone, the trees learnt that sharing words means irrelevant and called
"Cats sleep a lot." relevant to "What is the capital of France?" (P 0.84, above the Paris chunk's 0.53).
The natural seed-style rows (benchmarks/data/seed_style_train_natural.jsonl) and P(relevant) monotonic in
the query's cosines fix that class (docs/judges-study.md). These cases were written apart from every
training and report file: ``OBVIOUS`` was one of the rules that chose the variant, ``OBVIOUS_HELD_OUT`` was
written after the choice and measured once. The model before failed 2 of the first ten and 6 of the second.
"""

from __future__ import annotations

import pytest

from ctxutil_otel.judges import SemanticJudge

OBVIOUS: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "What is the capital of France?",
        "The capital of France is Paris.",
        [
            ("Paris is the capital of France.", "A"),
            ("Cats sleep a lot.", "X"),
            ("The stock market fell today.", "X"),
            ("Bananas are yellow.", "X"),
        ],
    ),
    (
        "Who wrote Pride and Prejudice?",
        "Jane Austen wrote it.",
        [
            ("Pride and Prejudice was written by Jane Austen and published in 1813.", "A"),
            ("Volcanoes erupt lava.", "X"),
            ("Python is a programming language.", "X"),
        ],
    ),
    (
        "When did World War II end?",
        "It ended in 1945.",
        [
            ("World War II ended in 1945 with the surrender of Japan.", "A"),
            ("Chocolate is made from cocoa beans.", "X"),
        ],
    ),
    (
        "How do I reset my router?",
        "Hold the reset button for 10 seconds.",
        [
            ("To reset the router, press and hold the reset button for 10 seconds.", "A"),
            ("Our office is closed on Sundays.", "X"),
            ("Invoices are sent monthly.", "X"),
        ],
    ),
    (
        "What is the refund policy?",
        "You can get a refund within 30 days of purchase.",
        [
            ("Refunds are available within 30 days of purchase.", "A"),
            ("Our CEO founded the company in 2010.", "X"),
        ],
    ),
    (
        "What is photosynthesis?",
        "Photosynthesis is how plants turn light into chemical energy.",
        [
            ("Photosynthesis is the process by which plants convert light energy into chemical energy.", "A"),
            ("The Roman Empire fell in 476 AD.", "X"),
        ],
    ),
    (
        "How many legs does a spider have?",
        "A spider has eight legs.",
        [
            ("Spiders have eight legs and two body segments.", "A"),
            ("The Amazon is the largest rainforest.", "X"),
            ("Interest rates rose last quarter.", "X"),
        ],
    ),
    (
        "What is the boiling point of water?",
        "Water boils at 100 degrees Celsius at sea level.",
        [
            ("At sea level, water boils at 100 degrees Celsius.", "A"),
            ("The Beatles formed in Liverpool.", "X"),
            ("Tennis is played with a racket.", "X"),
        ],
    ),
    (
        "Who painted the Mona Lisa?",
        "Leonardo da Vinci painted the Mona Lisa.",
        [
            ("The Mona Lisa was painted by Leonardo da Vinci in the early 1500s.", "A"),
            ("Sharks are found in every ocean.", "X"),
            ("Our support line opens at 9 am.", "X"),
        ],
    ),
    (
        "How long is the warranty on the X200 laptop?",
        "The X200 has a two-year warranty.",
        [
            ("The X200 laptop comes with a two-year limited warranty.", "A"),
            ("Mount Everest is 8,849 metres high.", "X"),
            ("Tomatoes need full sun.", "X"),
        ],
    ),
]

OBVIOUS_HELD_OUT: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "What is the capital of Japan?",
        "Tokyo is the capital of Japan.",
        [
            ("Tokyo is the capital of Japan.", "A"),
            ("Dogs like to play fetch.", "X"),
            ("The weather is nice.", "X"),
            ("Apples are red.", "X"),
        ],
    ),
    (
        "What year did the Titanic sink?",
        "The Titanic sank in 1912.",
        [
            ("The Titanic sank in April 1912 after hitting an iceberg.", "A"),
            ("Pizza is popular in Italy.", "X"),
            ("Birds can fly.", "X"),
        ],
    ),
    (
        "Who invented the telephone?",
        "Alexander Graham Bell invented the telephone.",
        [
            ("Alexander Graham Bell is credited with inventing the telephone in 1876.", "A"),
            ("The moon orbits the Earth.", "X"),
            ("Coffee contains caffeine.", "X"),
            ("Snow is cold.", "X"),
        ],
    ),
    (
        "How do I cancel my subscription?",
        "Go to Account settings and click Cancel subscription.",
        [
            ("To cancel your subscription, open Account settings and click Cancel subscription.", "A"),
            ("We are hiring engineers.", "X"),
            ("Our blog has new posts every week.", "X"),
        ],
    ),
    (
        "What is the speed of light?",
        "Light travels at about 300,000 km per second.",
        [
            ("The speed of light in a vacuum is about 300,000 kilometres per second.", "A"),
            ("Horses eat hay.", "X"),
            ("The election is next month.", "X"),
        ],
    ),
    (
        "What is the largest planet in the solar system?",
        "Jupiter is the largest planet.",
        [
            ("Jupiter is the largest planet in the solar system.", "A"),
            ("Roses are red.", "X"),
            ("The train leaves at noon.", "X"),
            ("Milk is white.", "X"),
        ],
    ),
    (
        "What language is spoken in Brazil?",
        "Portuguese is spoken in Brazil.",
        [
            ("The official language of Brazil is Portuguese.", "A"),
            ("Penguins live in Antarctica.", "X"),
            ("Gold is a metal.", "X"),
        ],
    ),
    (
        "How many continents are there?",
        "There are seven continents.",
        [
            ("There are seven continents on Earth.", "A"),
            ("Guitars have six strings.", "X"),
            ("It rained yesterday.", "X"),
        ],
    ),
    (
        "What is the chemical symbol for gold?",
        "The symbol for gold is Au.",
        [
            ("Gold has the chemical symbol Au, from the Latin aurum.", "A"),
            ("The cat is on the mat.", "X"),
            ("Stocks rose sharply.", "X"),
            ("Basketball was invented in 1891.", "X"),
        ],
    ),
    (
        "When is the store open?",
        "The store is open 9 am to 6 pm on weekdays.",
        [
            ("The store is open from 9 am to 6 pm, Monday to Friday.", "A"),
            ("Elephants never forget.", "X"),
            ("Our app is available on iOS.", "X"),
        ],
    ),
]

CASES = OBVIOUS + OBVIOUS_HELD_OUT


@pytest.fixture(scope="module")
def judge() -> SemanticJudge:
    return SemanticJudge()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_answering_chunk_is_relevant_and_used_and_off_topic_chunks_are_not_relevant(
    judge: SemanticJudge, case: tuple[str, str, list[tuple[str, str]]]
) -> None:
    query, answer, labelled = case
    verdicts = judge.judge_sync(query, answer, [chunk for chunk, _ in labelled])
    for (chunk, role), verdict in zip(labelled, verdicts, strict=True):
        if role == "A":
            assert verdict.is_relevant and verdict.is_utilized, (chunk, verdict.reason)
        else:
            assert not verdict.is_relevant, (chunk, verdict.reason)


def test_off_topic_chunks_rank_below_the_answering_chunk(judge: SemanticJudge) -> None:
    """P(relevant) orders them as a reader would, in every case (the model before ranked an off-topic chunk
    at or above the answering one in 2 of the first ten cases and 6 of the second)."""
    for query, answer, labelled in CASES:
        relevance, _ = judge.probabilities(query, answer, [chunk for chunk, _ in labelled])
        top = max(p for p, (_, role) in zip(relevance, labelled, strict=True) if role == "A")
        assert all(p < top for p, (_, role) in zip(relevance, labelled, strict=True) if role == "X"), query
