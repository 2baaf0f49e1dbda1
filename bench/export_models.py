"""Dev-only: export real models with torch.onnx for comparing against ONNX Runtime.

Not a test dependency (tests use tests/models/).  Needs torch and transformers:
    python -m venv /tmp/tv && /tmp/tv/bin/pip install torch==2.13.0 transformers onnx onnxscript
    /tmp/tv/bin/python bench/export_models.py OUT_DIR [resnet bert bert48 distilbert gpt2 vit]
Writes resnet18_bn (TorchScript, BatchNormalization kept), bert variants (TorchScript and
dynamo exporters, static and dynamic axes) with random weights.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + identity)


class ResNet18(nn.Module):
    """torchvision's resnet18 layout, written out so no torchvision is needed."""

    def __init__(self, classes: int = 10, width: int = 64) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], width
        for cout, stride in ((width, 1), (2 * width, 2), (4 * width, 2), (8 * width, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(8 * width, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def randomize_bn(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)


def export_resnet(out: Path, width: int = 64, name: str = "resnet18_bn.onnx") -> None:
    model = ResNet18(width=width).eval()
    randomize_bn(model)
    x = torch.randn(1, 3, 64, 64)
    torch.onnx.export(model, (x,), out / name, dynamo=False, opset_version=17,
                      do_constant_folding=False, input_names=["pixel_values"],
                      training=torch.onnx.TrainingMode.PRESERVE)


def export_variants(model: nn.Module, args: tuple, names: list[str], dynamic: dict, out: Path,
                    prefix: str) -> None:
    """One model in the exporter variants users produce: TorchScript at opset 17 with static
    and dynamic axes, TorchScript at opset 14 (LayerNormalization decomposed), dynamo (opset 18)."""
    model = model.eval()
    torch.onnx.export(model, args, out / f"{prefix}_ts_static.onnx", dynamo=False,
                      opset_version=17, input_names=names)
    torch.onnx.export(model, args, out / f"{prefix}_ts_dynamic.onnx", dynamo=False,
                      opset_version=17, input_names=names, dynamic_axes=dynamic)
    torch.onnx.export(model, args, out / f"{prefix}_ts_opset14.onnx", dynamo=False,
                      opset_version=14, input_names=names)
    try:
        torch.onnx.export(model, args, out / f"{prefix}_dynamo.onnx", dynamo=True,
                          input_names=names)
    except Exception as error:  # the dynamo exporter changes often; report, keep the rest
        print(f"{prefix}: dynamo export failed: {error}")


class HiddenState(nn.Module):
    """Calls a transformers model with keyword arguments (positional order differs across
    versions) and returns last_hidden_state only."""

    def __init__(self, inner: nn.Module, names: list[str]) -> None:
        super().__init__()
        self.inner, self.names = inner, names

    def forward(self, *args):
        return self.inner(**dict(zip(self.names, args))).last_hidden_state


def text_inputs(names: list[str]) -> tuple:
    ids = torch.randint(0, 100, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.int64)
    mask[0, 12:] = 0  # padding, so the mask matters
    types = torch.zeros(1, 16, dtype=torch.int64)
    return tuple({"input_ids": ids, "attention_mask": mask, "token_type_ids": types}[n] for n in names)


def export_text(out: Path, prefix: str, model: nn.Module, names: list[str]) -> None:
    export_variants(HiddenState(model, names), text_inputs(names), names,
                    {n: {0: "batch", 1: "seq"} for n in names}, out, prefix)


def export_bert(out: Path, layers: int = 2, prefix: str = "bert", attention: str = "eager") -> None:
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=64, attn_implementation=attention)
    export_text(out, prefix, BertModel(config), ["input_ids", "attention_mask", "token_type_ids"])


def export_distilbert(out: Path, attention: str = "eager", prefix: str = "distilbert") -> None:
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(vocab_size=100, dim=64, n_layers=2, n_heads=2, hidden_dim=256,
                              max_position_embeddings=64, attn_implementation=attention)
    export_text(out, prefix, DistilBertModel(config), ["input_ids", "attention_mask"])


def export_gpt2(out: Path, attention: str = "eager", prefix: str = "gpt2") -> None:
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=2, n_positions=64,
                        use_cache=False, attn_implementation=attention)
    export_text(out, prefix, GPT2Model(config), ["input_ids", "attention_mask"])


def export_vit(out: Path, attention: str = "eager", prefix: str = "vit") -> None:
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=256, attn_implementation=attention)
    names = ["pixel_values"]
    export_variants(HiddenState(ViTModel(config, add_pooling_layer=False), names),
                    (torch.randn(1, 3, 32, 32),), names, {"pixel_values": {0: "batch"}}, out, prefix)


EXPORTS = {
    "resnet": lambda out: (export_resnet(out), export_resnet(out, width=8, name="resnet18_mini_bn.onnx")),
    "bert": lambda out: (export_bert(out), export_bert(out, attention="sdpa", prefix="bert_sdpa")),
    "bert48": lambda out: export_bert(out, layers=48, prefix="bert48"),  # the speed benchmark's
    "distilbert": lambda out: (export_distilbert(out), export_distilbert(out, "sdpa", "distilbert_sdpa")),
    "gpt2": lambda out: (export_gpt2(out), export_gpt2(out, "sdpa", "gpt2_sdpa")),
    "vit": lambda out: (export_vit(out), export_vit(out, "sdpa", "vit_sdpa")),
}


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "devmodels")
    target.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for family in sys.argv[2:] or list(EXPORTS):
        EXPORTS[family](target)
    print("wrote", sorted(p.name for p in target.glob("*.onnx")))
