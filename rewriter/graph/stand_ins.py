"""Standard-op stand-ins for contrib ops, so shape inference sees through fused nodes.

onnx's shape inference knows no com.microsoft op: every value after a fused node (Gelu,
SkipLayerNormalization, FusedMatMul, Attention...) would have no type, and a rule further
down that asks for a rank or a shape would refuse.  For inference only, each fused op is
replaced by standard nodes whose outputs have the same types: an elementwise op by an
Identity (RotaryEmbedding and ONNX Runtime's SimplifiedLayerNormalization in the ONNX
domain too), FusedMatMul by MatMul, FusedConv by Conv, FusedGemm by Gemm, MultiHeadAttention
by an Einsum of q and v ([B, S, D] x [B, T, Dv] -> [B, S, Dv]), Attention by a MatMul with a
stub weight of the per-projection width, MatMulNBits (a model quantized to 4-bit weights
before it is optimized) by a MatMul with a stub weight [K, N], the quantized element-wise
ops, global and average pooling, QLinearConcat, QLinearSoftmax and NHWC QLinearConv by
standard ops of their shapes, MatMulIntegerToFloat by MatMulInteger and a Cast,
DynamicQuantizeMatMul by a MatMul with a stub weight of B's shape.  The NCHWc ops
(com.microsoft.nchwc) of the layout level: their Conv and pools by the standard ones,
Upsample by a Resize of its whole factors (a blocked tensor is typed as its padded NCHW
shape), ReorderInput by a Pad of the channels up to the block (after a Transpose from
NHWC), ReorderOutput by a Slice of the logical channels (and a Transpose to NHWC).  An op not
listed, or a form not covered (FusedMatMul moving batch axes, packed or 4-D attention inputs),
is left out: its outputs stay unknown, as before.  The model itself is never changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from onnx import AttributeProto, NodeProto, TensorProto, helper

from ..onnx_facts.nchwc import nchwc_block_size

# ops whose first output has their first input's type and shape
_ELEMENTWISE = {"Gelu", "FastGelu", "BiasGelu", "QuickGelu", "BiasSoftmax", "BiasDropout", "RotaryEmbedding"}
_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
_GEMM_ATTRS = ("alpha", "beta", "transA", "transB")


# ONNX Runtime's ops in the ONNX domain, which onnx's inference does not know either
_ORT_ONNX_DOMAIN_OPS = frozenset({"SimplifiedLayerNormalization"})


def needs_stand_in(node: NodeProto) -> bool:
    """Whether onnx's inference cannot type ``node`` itself (a contrib op, or one of
    ONNX Runtime's ops in the ONNX domain)."""
    return node.domain not in ("", "ai.onnx") or node.op_type in _ORT_ONNX_DOMAIN_OPS


def stand_ins(
    node: NodeProto, type_of: Callable[[str], tuple[int, list] | None]
) -> tuple[list[NodeProto], list[TensorProto]] | None:
    """(standard nodes, stub initializers) typing ``node``'s outputs; None when unknown.

    ``type_of(value)`` gives a value's (element type, dims) when known."""

    if node.domain == "com.microsoft.nchwc":
        return _nchwc_stand_ins(node, type_of)
    op, ins, outs = node.op_type, list(node.input), list(node.output)
    if node.domain in ("", "ai.onnx") and op in _ORT_ONNX_DOMAIN_OPS and ins and outs:
        return [_node("Identity", ins[:1], outs[:1])], []
    if node.domain != "com.microsoft":
        return None
    attrs = {a.name: a for a in node.attribute}
    if op in _ELEMENTWISE:
        return [_node("Identity", ins[:1], outs[:1])], []
    if op in ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization"):
        nodes = [_node("Identity", ins[:1], outs[:1])]
        if len(outs) > 3 and outs[3]:
            nodes.append(_node("Identity", ins[:1], [outs[3]]))
        return nodes, []
    if op == "FusedMatMul":
        return _fused_matmul_stand_ins(ins, outs, attrs)
    if op == "FusedConv":
        return [_node("Conv", ins[:3], outs[:1], [attrs[a] for a in _CONV_ATTRS if a in attrs])], []
    if op == "FusedGemm":
        return [_node("Gemm", ins[:3], outs[:1], [attrs[a] for a in _GEMM_ATTRS if a in attrs])], []
    if op == "MultiHeadAttention" and len(ins) >= 3 and ins[1] and ins[2]:
        # for other than 3-D q and v the Einsum fails to infer: unknown, as without it
        return [_node("Einsum", [ins[0], ins[2]], outs[:1], [helper.make_attribute("equation", "bsd,bth->bsh")])], []
    if op == "MatMulNBits" and ins and "K" in attrs and "N" in attrs:
        # a weight-only quantized linear layer: A [..., K] times a [K, N] of A's type, which
        # its scales have too (asked first where inference has not reached A yet: whole-
        # graph inference knows only initializers and declared types)
        known = type_of(ins[2]) if len(ins) > 2 and ins[2] else None
        known = known or type_of(ins[0])
        if known is None:
            return None
        k, n = (int(helper.get_attribute_value(attrs[a])) for a in ("K", "N"))
        stub = TensorProto(name=f"{outs[0]}__stand_in_weight", data_type=known[0], dims=[k, n])
        return [_node("MatMul", [ins[0], stub.name], outs[:1])], [stub]
    if op in _QLINEAR_STAND_INS and len(ins) > 1:
        return _qlinear_stand_ins(node, type_of)
    if op == "MatMulIntegerToFloat" and len(ins) > 2:
        # the integer product (uint8/int8 operands, as MatMulInteger takes them) in float
        scale = type_of(ins[2])
        if scale is None:
            return None
        product = f"{outs[0]}__stand_in_int32"
        cast = _node("Cast", [product], outs[:1], [helper.make_attribute("to", scale[0])])
        return [_node("MatMulInteger", ins[:2], [product]), cast], []
    if op == "DynamicQuantizeMatMul" and len(ins) > 1:
        # A (float) times B's shape in A's type: a stub weight, as for MatMulNBits
        a, b = type_of(ins[0]), type_of(ins[1])
        if a is None or b is None or not all(isinstance(d, int) for d in b[1]):
            return None
        stub = TensorProto(name=f"{outs[0]}__stand_in_weight", data_type=a[0], dims=b[1])
        return [_node("MatMul", [ins[0], stub.name], outs[:1])], [stub]
    if op == "Attention" and len(ins) >= 2:
        known = type_of(ins[1])
        if known is None or len(known[1]) != 2 or not all(isinstance(d, int) for d in known[1]):
            return None
        elem_type, weight = known
        sizes = helper.get_attribute_value(attrs["qkv_hidden_sizes"]) if "qkv_hidden_sizes" in attrs else None
        width = int(sizes[2]) if sizes else weight[1] // 3
        stub = TensorProto(name=f"{outs[0]}__stand_in_weight", data_type=elem_type, dims=[weight[0], width])
        return [_node("MatMul", [ins[0], stub.name], outs[:1])], [stub]
    return None


# onnxruntime's quantized ops (uint8/int8 in and out, the output typed as its zero point)
_QLINEAR_STAND_INS = frozenset(
    {
        "QLinearSigmoid",
        "QLinearLeakyRelu",
        "QLinearSoftmax",
        "QLinearAdd",
        "QLinearMul",
        "QLinearGlobalAveragePool",
        "QLinearAveragePool",
        "QLinearConcat",
        "QLinearConv",
    }
)


def _qlinear_stand_ins(
    node: NodeProto, type_of: Callable[[str], tuple[int, list] | None]
) -> tuple[list[NodeProto], list[TensorProto]] | None:
    """Quantized element-wise ops keep their (broadcast) input's shape and type: an Identity,
    or an Add of the two operands (onnx's Add takes uint8 and int8).  Global pooling: a Slice
    of the first position of both spatial axes ([N, C, 1, 1], or [N, 1, 1, C] channels-last).
    The NHWC QLinearConv: a ConvInteger of the (transposed) input and weights, cast to the
    output zero point's type."""
    op, ins, outs = node.op_type, list(node.input), list(node.output)
    attrs = {a.name: a for a in node.attribute}
    last = bool(helper.get_attribute_value(attrs["channels_last"])) if "channels_last" in attrs else False
    if op in ("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax"):
        return [_node("Identity", ins[:1], outs[:1])], []
    if op == "QLinearConcat" and "axis" in attrs and len(ins) >= 5 and (len(ins) - 2) % 3 == 0 and all(ins[2::3]):
        # (y scale, y zero point, then (x, scale, zero point) per input): a Concat of the xs
        return [_node("Concat", ins[2::3], outs[:1], [attrs["axis"]])], []
    if op in ("QLinearAdd", "QLinearMul") and len(ins) > 3 and ins[3]:
        return [_node("Add", [ins[0], ins[3]], outs[:1])], []
    if op == "QLinearGlobalAveragePool":
        bounds = [
            helper.make_tensor(f"{outs[0]}__stand_in_{name}", TensorProto.INT64, [2], values)
            for name, values in (("starts", [0, 0]), ("ends", [1, 1]), ("axes", [1, 2] if last else [2, 3]))
        ]
        return [_node("Slice", [ins[0], *(b.name for b in bounds)], outs[:1])], bounds
    if op == "QLinearAveragePool":
        # MaxPool takes (u)int8 and pools to the same shape (count_include_pad aside)
        pool_attrs = [attrs[a] for a in _POOL_ATTRS if a in attrs and a != "count_include_pad"]
        return _channels_last_wrapped(
            ins[0], outs[0], last, lambda src, dst: [_node("MaxPool", [src], [dst], pool_attrs)]
        )
    zero_point = type_of(ins[7]) if op == "QLinearConv" and len(ins) > 7 and ins[7] else None
    if zero_point is None:
        return None
    result = f"{outs[0]}__stand_in_int32"
    conv_attrs = [attrs[a] for a in _CONV_ATTRS if a in attrs]
    to = helper.make_attribute("to", zero_point[0])

    def conv(src: str, dst: str) -> list[NodeProto]:
        return [_node("ConvInteger", [src, ins[3]], [result], conv_attrs), _node("Cast", [result], [dst], [to])]

    return _channels_last_wrapped(ins[0], outs[0], last, conv)


def _channels_last_wrapped(
    source: str, output: str, last: bool, body: Callable[[str, str], list[NodeProto]]
) -> tuple[list[NodeProto], list[TensorProto]]:
    """``body(src, dst)``'s NCHW nodes, between Transposes from and back to NHWC when the op
    runs channels-last."""
    if not last:
        return body(source, output), []
    nchw, result = f"{output}__stand_in_nchw", f"{output}__stand_in_result"
    nodes = [_node("Transpose", [source], [nchw], [helper.make_attribute("perm", [0, 3, 1, 2])])]
    nodes += body(nchw, result)
    nodes.append(_node("Transpose", [result], [output], [helper.make_attribute("perm", [0, 2, 3, 1])]))
    return nodes, []


_POOL_ATTRS = ("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides")


def _nchwc_stand_ins(
    node: NodeProto, type_of: Callable[[str], tuple[int, list] | None]
) -> tuple[list[NodeProto], list[TensorProto]] | None:
    op, ins, outs = node.op_type, list(node.input), list(node.output)
    attrs = {a.name: a for a in node.attribute}
    if op == "Conv":
        return [_node("Conv", ins[:3], outs[:1], [attrs[a] for a in _CONV_ATTRS if a in attrs])], []
    if op in ("MaxPool", "AveragePool"):
        return [_node(op, ins[:1], outs[:1], [attrs[a] for a in _POOL_ATTRS if a in attrs])], []
    if op in ("GlobalAveragePool", "GlobalMaxPool"):
        return [_node(op, ins[:1], outs[:1])], []
    if op == "Upsample" and "scales" in attrs:  # whole factors per axis: a Resize's shape
        factors = [float(f) for f in helper.get_attribute_value(attrs["scales"])]
        scales = helper.make_tensor(f"{outs[0]}__stand_in_scales", TensorProto.FLOAT, [len(factors)], factors)
        return [_node("Resize", [ins[0], "", scales.name], outs[:1])], [scales]
    last = bool(helper.get_attribute_value(attrs["channels_last"])) if "channels_last" in attrs else False
    if op == "ReorderInput":
        known = type_of(ins[0])
        block = nchwc_block_size()
        if known is None or len(known[1]) != 4 or block is None:
            return None
        channels = known[1][3 if last else 1]
        if not isinstance(channels, int):
            return None
        nodes, source = [], ins[0]
        if last:
            source = f"{outs[0]}__stand_in_nchw"
            nodes.append(_node("Transpose", ins[:1], [source], [helper.make_attribute("perm", [0, 3, 1, 2])]))
        padding = [0, 0, 0, 0, 0, -channels % block, 0, 0]
        pads = helper.make_tensor(f"{outs[0]}__stand_in_pads", TensorProto.INT64, [8], padding)
        nodes.append(_node("Pad", [source, pads.name], outs[:1]))
        return nodes, [pads]
    if op == "ReorderOutput" and "channels" in attrs:
        channels = int(helper.get_attribute_value(attrs["channels"]))
        bounds = [
            helper.make_tensor(f"{outs[0]}__stand_in_{name}", TensorProto.INT64, [1], [value])
            for name, value in (("starts", 0), ("ends", channels), ("axes", 1))
        ]
        sliced = f"{outs[0]}__stand_in_nchw" if last else outs[0]
        nodes = [_node("Slice", [ins[0], *(b.name for b in bounds)], [sliced])]
        if last:
            nodes.append(_node("Transpose", [sliced], outs[:1], [helper.make_attribute("perm", [0, 2, 3, 1])]))
        return nodes, bounds
    return None


def _node(op: str, inputs: list[str], outputs: list[str], attrs: Sequence[AttributeProto] = ()) -> NodeProto:
    node = helper.make_node(op, inputs, outputs)
    node.attribute.extend(attrs)
    return node


def _fused_matmul_stand_ins(
    ins: list[str], outs: list[str], attrs: dict
) -> tuple[list[NodeProto], list[TensorProto]] | None:
    """FusedMatMul as MatMul; with transA/transB (the last two axes of an operand swapped,
    as the scores' q x k^T are written once MatMulTransposeBFusion has run) as an Einsum
    that swaps them (``...ji,...kj->...ik``: the batch axes broadcast as MatMul's do, and
    no rank need be known).  transBatchA/transBatchB (the batch axes moved): not covered."""
    flags = {a: bool(helper.get_attribute_value(attrs[a])) for a in attrs}
    if len(ins) < 2 or flags.get("transBatchA") or flags.get("transBatchB"):
        return None
    if not flags.get("transA") and not flags.get("transB"):
        return [_node("MatMul", ins[:2], outs[:1])], []
    a = "...ji" if flags.get("transA") else "...ij"
    b = "...kj" if flags.get("transB") else "...jk"
    return [_node("Einsum", ins[:2], outs[:1], [helper.make_attribute("equation", f"{a},{b}->...ik")])], []
