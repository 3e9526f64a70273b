"""The BERT forward pass of :mod:`._bert` as an onnxruntime graph, for bulk embedding.

Internal to :mod:`stratamem.embed.local`. No package ships an fp32 ONNX graph
of all-MiniLM-L6-v2, so the graph is written here, at load, from the weights
:class:`~._bert.BertEncoder` already holds (with the same folded biases), and
onnxruntime's fused CPU kernels run it: ``Attention`` (the three projections,
softmax and context in one op), ``BiasGelu`` and ``SkipLayerNormalization``
(bias, residual and layer norm in one pass). The arithmetic is the numpy
pass's; only the order of float32 operations differs, and the vectors agree to
cosine ≥ 0.99999 (``tests/test_embed_engines.py``).

Why it exists (issue 12): the numpy pass spends ~38 % of its time in
element-wise steps that numpy runs as separate passes over memory; the fused
kernels do them inside one pass each. On LoCoMo's turns the whole pass needs
~15 % less CPU (``docs/embeddings.md``).

The weights are handed to onnxruntime as external initializers, pointing at
the numpy arrays: nothing is serialized or copied, and a session is ready in
~0.06 s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._bert import BertEncoder

# ONNX opset of the standard ops used (LayerNormalization needs 17); the fused ops
# are onnxruntime's own ("com.microsoft" domain, version 1).
_OPSET = 17
# Arrays above this many elements go in as external initializers (no copy); the
# small ones (biases, layer norm weights) are written into the graph.
_EXTERNAL_MIN = 4096


class OnnxEncoder:
    """:meth:`BertEncoder.pooled`, computed by onnxruntime.

    Args:
        encoder: The loaded numpy encoder whose weights the graph uses (kept alive
            by this object: onnxruntime reads them in place).

    Raises:
        ImportError: ``onnx`` or ``onnxruntime`` is not installed.
    """

    def __init__(self, encoder: BertEncoder) -> None:
        import onnxruntime as ort

        self._encoder = encoder
        graph, external = _graph(encoder)
        options = ort.SessionOptions()
        # One thread per run: the caller runs batches on its own threads, one per
        # core, as it does for the numpy pass (see LocalMiniLM.embed_batch).
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # warnings about unused inputs are not the user's concern
        self._values = [ort.OrtValue.ortvalue_from_numpy(a) for a in external.values()]
        options.add_external_initializers(list(external), self._values)
        self._session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def pooled(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean-pooled (not yet normalized) last hidden states, as :meth:`BertEncoder.pooled`.

        Thread-safe: onnxruntime runs concurrent calls of one session.
        """
        out = self._session.run(None, {"ids": np.asarray(ids, np.int64), "mask": np.asarray(mask, np.int64)})
        return np.asarray(out[0], dtype=np.float32)


def _graph(enc: BertEncoder) -> tuple[bytes, dict[str, np.ndarray]]:
    """The serialized model (small) and its large weights by initializer name."""
    from onnx import TensorProto, helper, numpy_helper

    d, heads = enc.hidden, enc.heads
    initializers: list[Any] = []
    external: dict[str, np.ndarray] = {}
    nodes: list[Any] = []

    def weight(name: str, array: np.ndarray) -> str:
        array = np.ascontiguousarray(array)
        if array.size < _EXTERNAL_MIN:
            initializers.append(numpy_helper.from_array(array, name))
            return name
        external[name] = array
        t = TensorProto(
            name=name,
            data_type=helper.np_dtype_to_tensor_dtype(array.dtype),
            dims=array.shape,
            data_location=TensorProto.EXTERNAL,
        )
        # The location is never read: add_external_initializers supplies the data by name.
        entry = t.external_data.add()
        entry.key, entry.value = "location", name
        initializers.append(t)
        return name

    def op(kind: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        out = f"v{len(nodes)}"
        nodes.append(helper.make_node(kind, inputs, [out], domain=domain, **attrs))
        return out

    fused = "com.microsoft"
    # Embeddings: word rows plus the first `length` position rows (token type 0 is
    # already folded into them), then layer norm.
    length = op(
        "Slice", [op("Shape", ["ids"]), weight("one", np.array([1], np.int64)), weight("two", np.array([2], np.int64))]
    )
    zero = weight("zero", np.array([0], np.int64))
    positions = op("Slice", [weight("position", enc.position), zero, length, zero])
    x = op("Add", [op("Gather", [weight("word", enc.word), "ids"]), positions])
    x = op(
        "LayerNormalization",
        [x, weight("emb_ln_w", enc.emb_ln[0]), weight("emb_ln_b", enc.emb_ln[1])],
        axis=-1,
        epsilon=enc.eps,
    )
    mask32 = op("Cast", ["mask"], to=TensorProto.INT32)
    for i, layer in enumerate(enc.layers):
        p = f"l{i}."
        # The query weights and bias are pre-scaled by 1/sqrt(head_dim), hence scale 1;
        # the key bias is dropped and the value bias moved into the output bias, as in
        # the numpy pass, so their slots are zero.
        qkv_bias = np.concatenate([layer.q_bias, np.zeros(2 * d, np.float32)])
        ctx = op(
            "Attention",
            [x, weight(p + "qkv", layer.qkv), weight(p + "qkv_b", qkv_bias), mask32],
            domain=fused,
            num_heads=heads,
            scale=1.0,
        )
        x = op(
            "SkipLayerNormalization",
            [
                op("MatMul", [ctx, weight(p + "out", layer.out)]),
                x,
                weight(p + "ln1_w", layer.ln1_w),
                weight(p + "ln1_b", layer.ln1_b),
                weight(p + "out_b", layer.out_bias),
            ],
            domain=fused,
            epsilon=enc.eps,
        )
        up = op(
            "BiasGelu", [op("MatMul", [x, weight(p + "up", layer.up)]), weight(p + "up_b", layer.up_bias)], domain=fused
        )
        x = op(
            "SkipLayerNormalization",
            [
                op("MatMul", [up, weight(p + "down", layer.down)]),
                x,
                weight(p + "ln2_w", layer.ln2_w),
                weight(p + "ln2_b", layer.ln2_b),
                weight(p + "down_b", layer.down_bias),
            ],
            domain=fused,
            epsilon=enc.eps,
        )
    # Mean over real tokens; the count is clamped as sentence-transformers does.
    maskf = op("Cast", ["mask"], to=TensorProto.FLOAT)
    summed = op(
        "ReduceSum",
        [op("Mul", [x, op("Unsqueeze", [maskf, weight("axis2", np.array([2], np.int64))])]), "one"],
        keepdims=0,
    )
    count = op("Max", [op("ReduceSum", [maskf, "one"], keepdims=1), weight("tiny", np.array(1e-9, np.float32))])
    nodes.append(helper.make_node("Div", [summed, count], ["pooled"]))
    graph = helper.make_graph(
        nodes,
        "minilm",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "length"]),
            helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "length"]),
        ],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", d])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET), helper.make_opsetid(fused, 1)])
    # IR 8 is what onnxruntime 1.x reads everywhere; the opset above needs no newer.
    model.ir_version = 8
    return model.SerializeToString(), external
