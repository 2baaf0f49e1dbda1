"""Development exports made the way most shipped ONNX models are: Hugging Face optimum.

    python bench/export_optimum.py OUT [FAMILY...]        # default: every family below

optimum pins its own transformers (optimum-onnx 0.1 takes transformers 4.57), so this runs
in a virtualenv of its own: ``pip install torch optimum-onnx onnxruntime``.  Each family is
a random-weight model of the corpus's size (2 layers, hidden 64, 4 heads, 2 key-value heads
where the family groups them) saved with ``save_pretrained`` and exported with optimum's
``main_export`` at its default opset (18): encoders as ``feature-extraction``, decoders as
``text-generation`` and ``text-generation-with-past`` (past key/values as inputs),
seq2seq models with their past (an encoder, a decoder, a decoder with past and the merged
decoder: an If of the two, optimum's format for cached generation), vision models as
``image-classification``.  What they differ in from bench/export_models.py's exports:
transformers 4.x's attention masks (``(1 - mask) * finfo.min`` over an Expand), optimum's
own patches, and weights an If's two branches share from the enclosing graph.  Files:
``OUT/{family}_optimum_{task}_{file}.onnx``, data inside (the models are small); every file
is loaded in onnxruntime, and one that fails is reported and deleted.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

SIZE = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128}
TEXT = {**SIZE, "vocab_size": 1000, "max_position_embeddings": 128}
GROUPED = {"num_key_value_heads": 2, "bos_token_id": 1, "eos_token_id": 2}
IMAGE = {"image_size": 32, "patch_size": 8, "num_channels": 3}
SEQ2SEQ = {"vocab_size": 1000, "d_model": 64, "encoder_layers": 2, "decoder_layers": 2}
HEADS = {"encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128}

# family -> (config class or AutoConfig model type, config arguments, tasks)
ENCODER = ("feature-extraction",)
DECODER = ("text-generation", "text-generation-with-past")
FAMILIES: dict[str, tuple[str, dict, tuple[str, ...]]] = {
    "bert": ("bert", TEXT, ENCODER),
    "roberta": ("roberta", TEXT, ENCODER),
    "mpnet": ("mpnet", TEXT, ENCODER),
    "deberta-v2": ("deberta-v2", TEXT, ENCODER),
    "albert": ("albert", {**TEXT, "embedding_size": 64}, ENCODER),
    "electra": ("electra", {**TEXT, "embedding_size": 64}, ENCODER),
    "distilbert": (
        "DistilBertConfig",
        {"vocab_size": 1000, "dim": 64, "n_layers": 2, "n_heads": 4, "hidden_dim": 128},
        ENCODER,
    ),
    "gpt2": (
        "GPT2Config",
        {"vocab_size": 1000, "n_embd": 64, "n_layer": 2, "n_head": 4, "n_inner": 128}
        | {"bos_token_id": 0, "eos_token_id": 0},
        DECODER,
    ),
    "llama": ("llama", {**TEXT, **GROUPED}, DECODER),
    "mistral": ("mistral", {**TEXT, **GROUPED}, DECODER),
    "qwen2": ("qwen2", {**TEXT, **GROUPED}, DECODER),
    "phi3": ("phi3", {**TEXT, **GROUPED, "pad_token_id": 0}, DECODER),
    "gemma": ("gemma", {**TEXT, **GROUPED, "head_dim": 16}, DECODER),
    "gpt_neox": ("gpt_neox", TEXT, DECODER),
    "opt": (
        "OPTConfig",
        {**TEXT, "ffn_dim": 128, "word_embed_proj_dim": 64},
        DECODER,
    ),
    "bloom": ("BloomConfig", {"vocab_size": 1000, "hidden_size": 64, "n_layer": 2, "n_head": 4}, DECODER),
    "falcon": (
        "FalconConfig",
        {**TEXT, "ffn_hidden_size": 128, "bos_token_id": 1, "eos_token_id": 2},
        DECODER,
    ),
    "t5": (
        "T5Config",
        {"vocab_size": 1000, "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_heads": 4},
        ("text2text-generation-with-past",),
    ),
    "bart": ("BartConfig", {**SEQ2SEQ, **HEADS, "max_position_embeddings": 128}, ("text2text-generation-with-past",)),
    "whisper": (
        "WhisperConfig",
        {**SEQ2SEQ, **HEADS, "num_mel_bins": 80, "max_source_positions": 64, "max_target_positions": 128}
        | {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "decoder_start_token_id": 3}
        | {"suppress_tokens": None, "begin_suppress_tokens": None},
        ("automatic-speech-recognition-with-past",),
    ),
    "vit": ("vit", {**SIZE, **IMAGE, "num_labels": 10}, ("image-classification",)),
    "deit": ("deit", {**SIZE, **IMAGE, "num_labels": 10}, ("image-classification",)),
}
# extra main_export arguments: Whisper's dummy features must match its 64 source positions
EXPORT_ARGUMENTS = {"whisper": {"nb_max_frames": 128}}


def config(family: str):
    import transformers

    source, arguments, _ = FAMILIES[family]
    if source.endswith("Config"):
        return getattr(transformers, source)(**arguments)
    made = transformers.AutoConfig.for_model(source, **arguments)
    if family == "deit":
        made.architectures = ["DeiTForImageClassification"]
    return made


def export(family: str, out: Path) -> list[Path]:
    """The family's files in ``out`` (see the module docstring)."""
    import onnx
    import onnxruntime as ort
    import torch
    import transformers
    from optimum.exporters.onnx import main_export

    torch.manual_seed(0)
    made = config(family)
    tasks = FAMILIES[family][2]
    kind = {
        "feature-extraction": transformers.AutoModel,
        "image-classification": transformers.AutoModelForImageClassification,
        "text2text-generation-with-past": transformers.AutoModelForSeq2SeqLM,
        "automatic-speech-recognition-with-past": transformers.AutoModelForSpeechSeq2Seq,
    }.get(tasks[0], transformers.AutoModelForCausalLM)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / family
        kind.from_config(made).eval().save_pretrained(source)
        for task in tasks:
            target = Path(tmp) / task
            main_export(
                model_name_or_path=str(source),
                output=str(target),
                task=task,
                device="cpu",
                local_files_only=True,
                **EXPORT_ARGUMENTS.get(family, {}),
            )
            short = "".join(word[0] for word in task.replace("-with-past", "-past").split("-"))
            for path in sorted(target.glob("*.onnx")):
                dest = out / f"{family}_optimum_{short}_{path.stem}.onnx"
                onnx.save(onnx.load(str(path)), str(dest), save_as_external_data=False)
                try:
                    ort.InferenceSession(str(dest), providers=["CPUExecutionProvider"])
                except Exception as error:  # report and drop it, as export_models.py does
                    print(f"{dest.name}: does not load in onnxruntime, deleted: {str(error)[:200]}")
                    dest.unlink()
                    continue
                written.append(dest)
    return written


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for family in argv[1:] or list(FAMILIES):
        try:
            for path in export(family, out):
                print(path)
        except Exception as error:  # one family failing does not stop the others
            print(f"{family}: export failed: {str(error).splitlines()[0][:200] if str(error) else type(error)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
