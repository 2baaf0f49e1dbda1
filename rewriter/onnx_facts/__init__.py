"""The ground floor: what ONNX and ONNX Runtime say, shared by every package above.

Operator schemas (``schemas``), execution-provider names (``providers``), where a node runs
and how new nodes inherit it (``placement``, on top of ``metadata``), and the NCHWc block
size of this machine (``nchwc``).  Nothing here imports another package of rewriter but
``errors``: the parser, the graph, the matcher, the partitioner and the verifier all speak
this vocabulary, so it must sit below all of them.
"""
