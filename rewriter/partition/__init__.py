"""Partitioning: assign execution providers to nodes, as ONNX Runtime does."""

from ..onnx_facts.providers import CPU, provider_list, provider_name
from .kernels import KernelTable, kernel_table, register_kernel_file
from .layering import LayerRule, parse_layer_assignment
from .partitioner import LayerDecision, PartitionReport, partition

__all__ = [
    "CPU",
    "KernelTable",
    "LayerDecision",
    "LayerRule",
    "PartitionReport",
    "kernel_table",
    "parse_layer_assignment",
    "partition",
    "provider_list",
    "provider_name",
    "register_kernel_file",
]
