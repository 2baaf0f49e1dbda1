"""Dev-only: export real models with torch.onnx for comparing against ONNX Runtime.

Not a test dependency (tests use tests/models/).  Needs torch and transformers:
    python -m venv /tmp/tv && /tmp/tv/bin/pip install torch==2.13.0 transformers onnx onnxscript
    /tmp/tv/bin/python bench/export_models.py OUT_DIR
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


def export_bert(out: Path, layers: int = 2, prefix: str = "bert") -> None:
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=64, attn_implementation="eager")
    bert = BertModel(config).eval()

    class Wrapper(nn.Module):  # keyword arguments: positional order differs across versions
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    model = Wrapper().eval()
    ids = torch.randint(0, 100, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.int64)
    types = torch.zeros(1, 16, dtype=torch.int64)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(model, (ids, mask, types), out / f"{prefix}_ts_static.onnx", dynamo=False,
                      opset_version=17, input_names=names)
    torch.onnx.export(model, (ids, mask, types), out / f"{prefix}_ts_dynamic.onnx", dynamo=False,
                      opset_version=17, input_names=names,
                      dynamic_axes={n: {0: "batch", 1: "seq"} for n in names})
    torch.onnx.export(model, (ids, mask, types), out / f"{prefix}_ts_opset14.onnx", dynamo=False,
                      opset_version=14, input_names=names)
    try:
        torch.onnx.export(model, (ids, mask, types), out / f"{prefix}_dynamo.onnx", dynamo=True,
                          input_names=names)
    except Exception as error:  # the dynamo exporter changes often; report, keep the rest
        print(f"dynamo export failed: {error}")


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "devmodels")
    target.mkdir(parents=True, exist_ok=True)
    export_resnet(target)
    export_resnet(target, width=8, name="resnet18_mini_bn.onnx")  # small enough for tests/
    export_bert(target)
    export_bert(target, layers=48, prefix="bert48")  # the speed benchmark's ~2,500-node BERT
    print("wrote", sorted(p.name for p in target.glob("*.onnx")))
