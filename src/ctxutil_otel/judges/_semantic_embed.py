"""Static word embeddings for the semantic judge: WordLlama's ``l2_supercat`` 256-d token table.

A text's vector is the mean of its tokens' rows in the table, normalised to unit length, so the cosine of
two texts is one dot product. No neural network runs: the cost is tokenising (the ``tokenizers`` library,
Rust) and one table look-up per token, about 0.5 ms for a 4-chunk RAG interaction with its sentences.

The table and tokenizer ship inside the ``wordllama`` wheel (MIT licence; 16 MB of float16 weights);
they are read from its installed files without importing ``wordllama`` itself (whose loader looks for the
tokenizer on the network). Install with the ``semantic`` extra: ``pip install 'ctxutil-otel[semantic]'``.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["EXTRA", "MAX_TOKENS", "SemanticExtraMissingError", "StaticEmbedder"]

EXTRA = "semantic"
MAX_TOKENS = 256
"""Tokens of one text that count toward its vector (a text's first 256 tokens, about 1,000 characters)."""
WEIGHTS = ("weights", "l2_supercat_256.safetensors")
TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
BASE_MODEL = "WordLlama l2_supercat 256-d (wordllama, MIT licence)"


class SemanticExtraMissingError(ImportError):
    """The semantic judge's dependencies are not installed (the message names the extra)."""


def _missing(what: str) -> SemanticExtraMissingError:
    return SemanticExtraMissingError(
        f"the semantic judge needs {what}: pip install 'ctxutil-otel[{EXTRA}]', or choose another judge: "
        "judge='learned', CTXUTIL_JUDGE=learned or --judge learned"
    )


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise _missing(f"the {name!r} package")
    return Path(next(iter(spec.submodule_search_locations)))


class StaticEmbedder:
    """Unit-length mean-of-token vectors (256 float32 values per text).

    Args:
        table: The token table, shape (vocabulary, 256), float32.
        tokenizer: A ``tokenizers.Tokenizer`` for that table.
        max_tokens: Tokens of a text read (its first ``max_tokens``).
    """

    _shared: StaticEmbedder | None = None
    _lock = threading.Lock()

    def __init__(self, table: npt.NDArray[np.float32], tokenizer: Any, max_tokens: int = MAX_TOKENS) -> None:
        self.table = table
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.dim = int(table.shape[1])

    @classmethod
    def load(cls) -> StaticEmbedder:
        """The shared embedder over the installed ``wordllama`` files (loaded once per process, ~0.2 s).

        Raises:
            SemanticExtraMissingError: (an ImportError naming the ``semantic`` extra) when numpy,
                tokenizers, safetensors or wordllama is missing.
        """
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls._load()
            return cls._shared

    @classmethod
    def _load(cls) -> StaticEmbedder:
        try:
            import numpy as np
            from safetensors import safe_open
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise _missing(f"{exc.name or 'numpy, safetensors and tokenizers'}") from exc
        root = _package_dir("wordllama")
        weights, tokenizer_file = root.joinpath(*WEIGHTS), root.joinpath(*TOKENIZER)
        if not weights.is_file() or not tokenizer_file.is_file():
            raise _missing(f"wordllama's shipped files ({weights.name}, {tokenizer_file.name})")
        with safe_open(str(weights), framework="np") as handle:
            table = np.ascontiguousarray(handle.get_tensor("embedding.weight"), dtype=np.float32)
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        return cls(table, tokenizer)

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One unit vector per text, shape (len(texts), 256); a text without tokens gets zeros."""
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        # One text at a time on the calling thread: encode_batch would spread the work over the tokenizers
        # library's own thread pool, whose CPU the worker's budget (its thread's CPU clock) cannot see, and
        # which the library disables, with a warning, in a child after os.fork().
        for k, text in enumerate(texts):
            enc = self.tokenizer.encode(_encodable(text), add_special_tokens=False)
            ids = enc.ids[: self.max_tokens]
            if ids:
                v = self.table[ids].sum(axis=0)
                norm = float(np.linalg.norm(v))
                if norm > 0:
                    out[k] = v / norm
        return out


def _encodable(text: str) -> str:
    """``text`` as the tokenizers library takes it: a lone surrogate (``json.loads`` of ``"\\ud800"``,
    ``os.fsdecode``'s surrogateescape) becomes ``?`` instead of failing the evaluation."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text
