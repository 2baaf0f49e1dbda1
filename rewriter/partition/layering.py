"""ONNX Runtime's layer-assignment setting: which annotated nodes go to which device.

Syntax (``session.layer_assignment_settings``)::

    gpu(encoder, decoder); cpu(=postprocess)

Each ``device(...)`` lists annotations; a bare annotation matches every ``layer_ann`` that
starts with it, ``=annotation`` only an equal one.  Prefix rules take priority over exact
rules; within each kind, left to right.  Devices are designators (cpu, gpu, cuda, npu,
accelerator, gpu:nvidia, ...) resolved against the provider list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import RewriterError

_ENTRY = re.compile(r"\s*([A-Za-z][\w:.-]*)\s*\(([^()]*)\)\s*")


@dataclass(frozen=True)
class LayerRule:
    device: str
    annotation: str
    exact: bool
    position: int

    @property
    def text(self) -> str:
        return f"{self.device}({'=' if self.exact else ''}{self.annotation})"

    def matches(self, annotation: str) -> bool:
        return annotation == self.annotation if self.exact else annotation.startswith(self.annotation)


def parse_layer_assignment(setting: str | None) -> list[LayerRule]:
    """Parse the setting into rules in priority order (prefix rules first, then exact)."""
    if not setting or not setting.strip():
        return []
    rules: list[LayerRule] = []
    position = 0
    for chunk in setting.split(";"):
        if not chunk.strip():
            continue
        match = _ENTRY.fullmatch(chunk)
        if match is None:
            raise RewriterError(f"layer assignment: expected device(annotation, ...), got '{chunk.strip()}'")
        device, body = match.group(1), match.group(2)
        names = [n.strip() for n in body.split(",")]
        if not any(names):
            raise RewriterError(f"layer assignment: {device}() lists no annotation")
        for name in names:
            if not name:
                raise RewriterError(f"layer assignment: empty annotation in '{chunk.strip()}'")
            exact = name.startswith("=")
            annotation = name[1:].strip() if exact else name
            if not annotation:
                raise RewriterError(f"layer assignment: '=' needs an annotation in '{chunk.strip()}'")
            rules.append(LayerRule(device, annotation, exact, position))
            position += 1
    return sorted(rules, key=lambda r: (r.exact, r.position))


def first_match(rules: list[LayerRule], annotation: str) -> LayerRule | None:
    """The rule that decides an annotation (rules are in priority order)."""
    return next((rule for rule in rules if rule.matches(annotation)), None)
