"""Dev-only: export real models with torch.onnx for comparing against ONNX Runtime.

Not a test dependency (tests use tests/models/).  Needs torch, transformers and onnxruntime:
    python -m venv /tmp/tv && /tmp/tv/bin/pip install torch==2.13.0 transformers onnx onnxscript onnxruntime
    /tmp/tv/bin/python bench/export_models.py OUT_DIR [FAMILY ...] [-v]   # default: every family
    /tmp/tv/bin/python bench/export_models.py --corpus INDEX.md DIR ...  # table of what DIRs hold

Every model is built from a config with random weights (nothing is downloaded) and kept tiny
(2 layers, hidden 64).  Families (see EXPORTS):
  resnet bert bert48 distilbert gpt2 vit      the original set: TorchScript opset 17 static and
                                              dynamic axes, opset 14, dynamo; eager and SDPA
  llama qwen2 mistral phi3 gpt_neox falcon    decoders (logits): the same four variants without
                                              a cache, plus {family}_kv_*: one decoding step
                                              with past key/values as plain tensor inputs and
                                              present key/values as outputs (TorchScript with
                                              dynamic axes, dynamo with dynamic batch and past)
  gemma qwen3 gptj phi stablelm olmo granite   more decoders, the same variants (DECODERS)
  starcoder2 gpt_bigcode opt
  whisper_enc t5_enc clip_text bart_enc       encoders
  roberta xlm_roberta electra albert mpnet    transformers encoders (ENCODERS), opset 18 for
  deberta_v2                                  dynamo; roberta and albert also with SDPA
  deit swin                                   vision transformers, 32x32 (deit also with SDPA)
  hf_mobilenetv2 hf_resnet hf_regnet          transformers conv nets, as the conv nets below
  encoders_dyn14                              BERT and DistilBERT, dynamic axes at opset 14
  mobilenetv3 efficientnet convnext           conv nets written out in torch (no torchvision);
                                              also *_ts_bn with BatchNormalization kept
  bloom mpt codegen gpt_neo gemma2 gemma3     decoders added for a held-out style check (ALiBi,
  cohere nemotron persimmon biogpt xglm       sliding windows, soft-capping, squared ReLU,
  olmo2 glm helium smollm3                    q/k norms)
  camembert roformer mobilebert esm           more ENCODERS (rotary encoders, bottlenecks,
  megatron_bert data2vec_text modernbert      pre-LN, GeGLU, span convolutions)
  ernie convbert
  beit dinov2 data2vec_vision siglip_vision   vision transformers, 32x32
  clip_vision yolos swinv2
  convnextv2 poolformer bit segformer         transformers conv and hybrid nets, 64x64, as
  mobilevit levit hf_efficientnet             the conv nets below
  mobilenet_v1
  wav2vec2 wav2vec2_stable hubert             speech encoders over raw audio, dynamic length
  torch_mha                                   torch's nn.MultiheadAttention in a pre-norm block,
                                              batch- and sequence-first, with and without a
                                              key padding mask
  decoders_sdpa                               SDPA attention (transformers' default) in decoders
                                              with grouped-query or multi-query attention: qwen2
                                              mistral qwen3 gemma falcon as {family}_sdpa[_kv]_*,
                                              ts_dynamic, dynamo and dynamo_dynamic (dynamo's k^T
                                              of repeated keys regroups their leading axes;
                                              TorchScript's kv steps with GQA do not run in
                                              onnxruntime past one new token: its enable_gqa view)
  prefill                                     the prompt's step of cached generation: no past inputs, logits and
                                              present keys and values as outputs ({family}_{eager|sdpa}_prefill_*,
                                              ts_dynamic and dynamo) of llama qwen2 mistral phi3 gemma qwen3
                                              gpt_neox falcon stablelm, and gemma2 (eager)
  rope_scaling                                rotary scaling configs: YaRN (llama, qwen2: its attention factor
                                              scales cos and sin), Llama 3, linear, dynamic NTK, LongRoPE (phi3):
                                              {name}[_kv]_{ts_dynamic,dynamo}
  half                                        float16 in torch (model.half(): float16 inputs and outputs, GPU-style
                                              exports) of 8 decoders (llama, qwen2, gemma also with SDPA), BERT,
                                              GPT-2 and ViT: {name}_half_{ts_dynamic,dynamo}
  fp16                                        fp16 copies (keep_io_types) of BERT, GPT-2, ViT,
                                              Llama exports: *_fp16.onnx
  fp16_more                                   the same of Qwen2, Phi-3, Gemma, CLIP text, Whisper
                                              encoder, DeiT, ConvNeXt, T5 encoder exports
  whisper_dec bart_dec mbart_dec marian_dec   seq2seq decoders with cross-attention over
  pegasus_dec t5_dec                          (input_ids, encoder_hidden_states[, encoder mask])
                                              (SEQ2SEQ_DECODERS); whisper, bart and t5 also
                                              {family}_kv_*: one step with self-attention past
                                              and cross-attention keys and values as inputs
  funnel squeezebert xlnet layoutlm rembert   more ENCODERS (pooling, grouped convs, two-stream
                                              relative attention, 2-D boxes, decoupled embeddings)
  wavlm sew sew_d data2vec_audio unispeech    more speech encoders over raw audio
  ast                                         audio spectrogram transformer, (batch, 32, 16)
  vit_mae vit_msn ijepa dpt                   more vision transformers, 32x32
  pvt_v2 glpn cvt focalnet swiftformer        more transformers conv and hybrid nets, 64x64
  mobilevitv2 hiera
  quant                                       QDQ (quantize_static) and dynamic-quantized copies
                                              of BERT and conv nets: *_qdq.onnx, *_qdyn.onnx
  mixtral qwen2_moe qwen3_moe olmoe           mixture-of-experts decoders (4 experts, top 2; the
  granitemoe deepseek_v3                      experts as transformers' batched_mm), the DECODERS
                                              variants; deepseek_v3: multi-head latent attention,
                                              a dense layer then an MoE one
  opset23                                     exporter settings (VARIANTS) on existing models:
                                              *_dynamo_opset23 (dynamo at opset 23: ONNX Attention
                                              from SDPA, RMSNormalization) of llama, qwen2, phi3,
                                              bert, vit, whisper_enc, and llama, qwen2, bert, vit
                                              with SDPA (*_sdpa_dynamo_opset23)
  noopt                                       *_dynamo_noopt (dynamo, optimize=False) of llama,
                                              bert, vit, whisper_enc
  nofold                                      *_ts_dynamic_nofold (TorchScript, dynamic axes,
                                              do_constant_folding=False) of llama, bert, gpt2
  quant_llm                                   4-bit weight-only (MatMulNBits, block 32, symmetric)
                                              copies of llama and qwen2 ts_dynamic and dynamo:
                                              *_q4.onnx; llama_ts_dynamic_qdyn, vit_ts_static_qdq
  detr conditional_detr textnet               detection and conv nets, 64x64, as the conv nets
                                              (DETR: a tiny transformers ResNet, 10 queries)
  depth_anything dinov2_with_registers        ViT-based depth, detection-backbone and pose
  vitdet vitpose                              models, 32x32 (depth_anything: predicted_depth,
                                              vitpose: heatmaps)
  dynamo_dynamic                              exporter setting (VARIANTS): *_dynamo_dynamic, dynamo with
                                              ts_dynamic's dynamic axes (text: batch and sequence;
                                              images: batch) of bert distilbert roberta albert
                                              electra deberta_v2 mpnet gpt2 llama qwen2 mistral phi3
                                              gemma qwen3 gpt_neox whisper_enc t5_enc clip_text
                                              bart_enc vit deit swin beit dinov2 resnet18 (torch-
                                              written) mobilenetv3 convnext hf_resnet whisper_dec
                                              t5_dec bart_dec
  dynamo_dynamic_more                         the same of wav2vec2 hubert speecht5_enc (batch and
                                              samples), olmo3 ernie4_5 cohere2 glm4 gpt_oss llama4
                                              moonshine_dec
  olmo3 exaone4 arcee ernie4_5 seed_oss       newer decoders, the DECODERS variants (sliding-window
  hunyuan_v1_dense ministral cohere2 glm4     and NoPE layers, sandwich norms, ReLU^2, xIELU, dynamic
  apertus doge                                mask attention); interleaved rotary and xIELU ones
                                              export with dynamo only
  gpt_oss phimoe jetmoe dbrx llama4           more mixture-of-experts decoders (gpt_oss: attention
                                              sinks, clamped SwiGLU experts; jetmoe (mixture of
                                              attention heads too) and dbrx loop over experts:
                                              jetmoe dynamo only, dbrx TorchScript only with every
                                              expert on every token so the trace has them all;
                                              llama4 (text): a dense and an MoE layer, chunked
                                              attention, its complex rotary rewritten in real
                                              arithmetic for the export, dynamo only)
  xlm flaubert ibert nystromformer big_bird   more ENCODERS (language embeddings, integer-BERT in
  canine markuplm lilt luke chinese_clip_text float mode, full attention for Nystromformer and
                                              BigBird, hashed characters with downsampling, XPath
                                              and layout streams, LUKE's words); lilt at hidden 48
  mt5_dec umt5_dec m2m100_dec blenderbot_dec  more SEQ2SEQ_DECODERS; umt5, m2m100 and moonshine
  plbart_dec moonshine_dec                    also {family}_kv_*
  owlvit_vision blip_vision                   more vision transformers, 32x32
  chinese_clip_vision
  sam_vision rt_detr upernet                  SAM's image encoder (64x64, windowed and global
                                              attention, a conv neck), RT-DETR (ResNet-D, hybrid
                                              encoder, deformable attention, 10 queries) and
                                              UperNet (ConvNeXt, pyramid pooling) as the conv nets
  moonshine_enc speecht5_enc clap_audio       audio: Moonshine's encoder (4000 samples, dynamic
                                              batch), SpeechT5's encoder with its speech prenet
                                              (batch and samples), CLAP's HTSAT audio tower over a
                                              (batch, 1, 256, 16) spectrogram
  phi4_mini stablelm2 bitnet vaultgemma       corpus 8 (2025-2026) decoders, the DECODERS variants: Phi-4-mini and
  ministral3 gemma3n gemma4                   StableLM 2 12B settings, BitNet's sub-norms, YaRN with query scaling,
  modernbert_decoder nanochat jais2           AltUp and per-layer embeddings (gemma3n: TorchScript only), differential
  diffllama minicpm3                          attention (diffllama: dynamo only), MLA
  qwen2_5_vl qwen3_vl                         vision-language models' language side over text only (M-RoPE, interleaved
                                              for Qwen3-VL)
  dots1 glm4_moe hunyuan_moe ernie4_5_moe     more mixture-of-experts decoders (4 experts, top 2, batched_mm);
  flex_olmo afmoe deepseek_v2 minimax_m2      deepseek_v2: its complex rotary in real arithmetic for the export, as
  gemma4_moe granitemoeshared cohere2_moe     llama4's; mistral4, deepseek_v32 (a top-k key indexer) and glm4_moe_lite:
  exaone_moe hy_v3 mimo_v2_flash solar_open   MLA; ernie4_5_moe, cohere2_moe (interleaved rotary) and deepseek_v32:
  laguna mistral4 deepseek_v32 glm4_moe_lite  dynamo only
  qwen3_next qwen3_5 olmo_hybrid kimi_linear  hybrid and recurrent decoders (RECURRENT: no {family}_kv_*, their caches
  falcon_h1 bamba granite4 jamba zamba2       hold recurrent states): gated DeltaNet, Mamba and Mamba-2 (transformers'
  nemotron_h lfm2 lfm2_moe minimax            torch scans), short convolutions, lightning attention, RG-LRU, RWKV,
  recurrent_gemma mamba falcon_mamba mamba2   mLSTM; TorchScript unrolls the scans over the example's 16 tokens, so
  rwkv xlstm                                  mostly ts_static and dynamo
  longformer splinter roc_bert yoso mra xmod  more ENCODERS (sliding-window chunks, shape and pronunciation embeddings,
  eurobert                                    LSH and multi-resolution attention, language adapters, a bidirectional
                                              Llama)
  led_dec prophetnet_dec musicgen_dec         more SEQ2SEQ_DECODERS (n-gram streams, one codebook); led and musicgen
                                              also {family}_kv_*
  videomae timesformer vivit                  video transformers over (batch, 4 frames, 3, 32, 32) clips
  aimv2_vision dinov3_vit metaclip2_vision    vision towers of 2025 multimodal models, 32x32 (qwen2_5_vl_vision:
  internvl_vision smolvlm_vision              (patches, 384) rows and grid_thw, windowed and full attention)
  qwen2_5_vl_vision
  dinov3_convnext hgnet_v2 dab_detr           conv nets and detection, 64x64, as the conv nets (deformable_detr: one
  deformable_detr                             feature level, grid_sample)
  wav2vec2_conformer                          speech: conformers over raw audio (relative and rotary positions),
  wav2vec2_conformer_rotary wav2vec2_bert     w2v-BERT 2.0 over (batch, frames, 32) features, Parakeet (FastConformer)
  parakeet_enc perceiver                      over (batch, frames, 16) mels; Perceiver's latents over (batch, 16, 32)
                                              inputs
  encodec_enc dac_enc                         neural audio codecs' encode (encoder and residual vector quantizer) over
                                              (batch, 1, samples): codes (DAC: the quantized latents)
  dynamo_dynamic_8                            dynamo_dynamic of phi4_mini ministral3 gemma4 dots1 glm4_moe ernie4_5_moe
                                              afmoe mistral4 qwen2_5_vl qwen3_next qwen3_5 falcon_h1 granite4 nemotron_h
                                              lfm2 mamba2 eurobert roc_bert xmod dinov3_vit aimv2_vision internvl_vision
                                              videomae vivit timesformer wav2vec2_conformer wav2vec2_bert parakeet_enc
                                              dac_enc led_dec musicgen_dec
  internlm3 hyperclovax granite_swa cwm       corpus 10 (held-out style: families not developed against) decoders, the
  youtu mellum longcat_flash hy_v4            DECODERS variants: Peri-LN post-norms, Llama 3 rotary scaling, MLA (youtu;
  deepseek_v4 lfm3 zaya                       longcat_flash: two attentions per layer, zero experts; hy_v4: a top-k
                                              indexer); deepseek_v4 (compressed attention), lfm3 (short convolutions)
                                              and zaya (convolutional attention) keep states in their caches: RECURRENT,
                                              no {family}_kv_*
  gte nomic_bert jina_embeddings_v3           corpus 10 ENCODERS (rotary BERTs, pre-LN RoBERTas, Fourier mixing, DeBERTa
  xlm_roberta_xl roberta_prelayernorm         v1, ESM C, a bidirectional Gemma, a bidirectional gpt-oss with experts)
  bert_generation fnet ultrabert deberta
  esmc embedding_gemma2_text
  openai_privacy_filter
  mlcd_vision radio tipsv2_vision pixio       corpus 10 vision towers, 32x32; PVT v1 and PP-LCNet (its backbone's last
  sapiens2 pvt pp_lcnet                       feature map) at 64x64 as the conv nets
  dynamo_dynamic_10                           dynamo_dynamic of internlm3 hyperclovax youtu mellum longcat_flash hy_v4
                                              deepseek_v4 lfm3 zaya gte nomic_bert jina_embeddings_v3 xlm_roberta_xl
                                              deberta esmc embedding_gemma2_text openai_privacy_filter fnet mlcd_vision
                                              radio sapiens2 pvt pp_lcnet
  ctrl                                        CTRL (sinusoidal positions, pre-LN) as an ENCODER
  exaone gpt_neox_japanese openai_gpt zamba   corpus 12 (transformers 5.25 families not exported before) decoders,
  sarvam_mla sarvam_moe glm_moe_dsa           the DECODERS variants: EXAONE 3 and Sarvam under Llama's, DeepSeek-V3's
  minicpm5_moe lara_mini kolibri1             and GLM-4.5's model classes (sarvam_mla: MLA without a low-rank query),
  bailing_hybrid qwen4_exp_text               GPT-1 (no cache: no {family}_kv_*), DeepSeek sparse attention
  apertus1p5_text hrm_text inkling2_text      (glm_moe_dsa), Zamba's shared attention block, gated DeltaNet, Kimi
                                              delta attention, hyper-connections and n-gram embeddings, nested
                                              reasoning cycles (hrm_text), short convolutions and a relative position
                                              bias (inkling2_text); zamba, lara_mini, bailing_hybrid, qwen4_exp_text
                                              and inkling2_text are RECURRENT
  bros tapas layoutlmv3 neomme longt5_enc     corpus 12 ENCODERS (2-D boxes, table token types, layout relative
  switch_transformers_enc                     biases, exclusive self-attention, transient-global attention, a top-1
                                              expert layer)
  dpr mvp_enc                                 DPR's question encoder (pooler_output), MVP's encoder with its prompts
  groupvit_vision swin2sr lw_detr_vit         corpus 12 vision: 32x32 transformers (grouping tokens, super-resolution
  zoedepth superpoint rt_detr_v2 d_fine       features, LW-DETR's windowed ViT, metric depth bins); SuperPoint's
  vitmatte                                    keypoints, RT-DETRv2 (discrete sampling), D-FINE and ViTMatte (RGB +
                                              trimap) at 64x64 as the conv nets
  lasr_enc qwen2_audio_enc glmasr_enc         corpus 12 audio encoders: LASR's conformer over (batch, 64 frames, 16)
  granite_speech_enc                          mels and Whisper-like Qwen2-Audio and GLM-ASR over (batch, 16, 64), both
                                              dynamic batch only; Granite Speech's block-attention conformer over
                                              (batch, frames, 32)
  dynamo_dynamic_12                           dynamo_dynamic of exaone gpt_neox_japanese openai_gpt sarvam_mla
                                              sarvam_moe glm_moe_dsa minicpm5_moe lara_mini kolibri1 qwen4_exp_text
                                              apertus1p5_text hrm_text inkling2_text bros layoutlmv3 neomme dpr mvp_enc
                                              groupvit_vision swin2sr lw_detr_vit superpoint vitmatte lasr_enc
                                              qwen2_audio_enc glmasr_enc
  fp16_12                                     fp16 copies (keep_io_types) of the ts_dynamic and dynamo exports of
                                              exaone, sarvam_mla, kolibri1, bros, layoutlmv3 and lw_detr_vit
The decoder wrapper also runs under transformers 4.4x-4.57 (its cache built from the legacy tuple
of pairs), another exporter setting users have: with 4.46, `pip install 'transformers==4.46.*'` in
a venv of its own, the original families export in TorchScript too (4.57's masks do not trace
there: "unordered_map::at"); families newer than the installed version fail to build, reported.
EXPORT_SIZES='{"hidden_size": 128, "intermediate_size": 192}' (JSON, the environment) builds the
families that tiny_transformer makes (DECODERS, ENCODERS) at other sizes: a check that no rule
depends on the corpus's (head size 32 instead of 16 with the sizes above).
Names: {family}[_kv]_{ts_static|ts_dynamic|ts_opset14|ts_dynamic_opset14|ts_bn|dynamo}[_fp16|_qdq|_qdyn|_q4].onnx,
and {family}_{ts_dynamic_nofold|dynamo_opset23|dynamo_noopt|dynamo_dynamic|ts_opset20}.onnx for the exporter settings.
Dynamo exports of the original set use the exporter's default opset, the newer families opset 18.
An export that fails is reported (-v: with its traceback) and skipped; every model written is
loaded in onnxruntime and run once on bench/snapshot.py's feeds, and deleted (with its
external data) when it does not load or run.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import tempfile
import traceback
from contextlib import contextmanager
from functools import partial
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
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
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
    torch.onnx.export(
        model,
        (x,),
        out / name,
        dynamo=False,
        opset_version=17,
        do_constant_folding=False,
        input_names=["pixel_values"],
        training=torch.onnx.TrainingMode.PRESERVE,
    )


# the variants export_variants writes unless told: {prefix}_{variant}.onnx
STANDARD = ("ts_static", "ts_dynamic", "ts_opset14", "dynamo")
# variant -> torch.onnx.export arguments; "dynamic_axes": True takes the model's dynamic axes, a
# dynamo variant without an opset_version gets export_variants' dynamo_opset (else the exporter's
# default).  The last five are exporter settings users also pick: constant folding off, ONNX's
# newest opset (its Attention and RMSNormalization ops), the onnxscript optimizer off, dynamo
# with the dynamic axes of ts_dynamic (passed as dynamic_shapes, see dynamo_shapes), and the
# TorchScript exporter's newest opset (ReduceMean's axes as an input, Split's num_outputs, Gelu).
VARIANTS = {
    "ts_static": {"dynamo": False, "opset_version": 17},
    "ts_dynamic": {"dynamo": False, "opset_version": 17, "dynamic_axes": True},
    "ts_opset14": {"dynamo": False, "opset_version": 14},
    "dynamo": {"dynamo": True},
    "ts_dynamic_nofold": {"dynamo": False, "opset_version": 17, "dynamic_axes": True, "do_constant_folding": False},
    "dynamo_opset23": {"dynamo": True, "opset_version": 23},
    "dynamo_noopt": {"dynamo": True, "optimize": False},
    "dynamo_dynamic": {"dynamo": True, "dynamic_axes": True},
    "ts_opset20": {"dynamo": False, "opset_version": 20, "dynamic_axes": True},
}


def dynamo_shapes(model: nn.Module, names: list[str], dynamic: dict) -> dict:
    """The dynamic_axes ``dynamic`` (input name -> {axis: name}) as the dynamo exporter's
    dynamic_shapes, keyed by the parameters of model.forward: torch.onnx's own conversion of
    dynamic_axes keeps only the first input of a forward(*args) (HiddenState's).  Axis names
    stay strings: torch.onnx makes them Dim.DYNAMIC and names the ONNX dims after them."""
    bound = inspect.signature(model.forward).bind(*(dynamic.get(n) for n in names))
    return dict(bound.arguments)


def export_variants(
    model: nn.Module,
    args: tuple,
    names: list[str],
    dynamic: dict,
    out: Path,
    prefix: str,
    dynamo_opset: int | None = None,
    variants: tuple[str, ...] = STANDARD,
) -> None:
    """One model in the exporter variants users produce (VARIANTS; by default TorchScript at
    opset 17 with static and dynamic axes, TorchScript at opset 14 (LayerNormalization
    decomposed), dynamo at dynamo_opset, else the exporter's default).  A failing export is
    reported, not raised.  Parameters stop requiring grad: TorchScript refuses to fold a
    cached tensor that does."""
    model = model.eval().requires_grad_(False)
    for variant in variants:
        arguments = dict(VARIANTS[variant])
        if arguments.pop("dynamic_axes", False):
            if arguments["dynamo"]:
                arguments["dynamic_shapes"] = dynamo_shapes(model, names, dynamic)
            else:
                arguments["dynamic_axes"] = dynamic
        if arguments["dynamo"] and dynamo_opset:  # the dynamo exporter changes often
            arguments.setdefault("opset_version", dynamo_opset)
        attempt(
            f"{prefix}_{variant}",
            lambda: torch.onnx.export(model, args, out / f"{prefix}_{variant}.onnx", input_names=names, **arguments),
        )


FAILURES: list[str] = []


def attempt(name: str, export) -> None:
    """Run one export; a failure is printed and remembered, not raised."""
    try:
        export()
    except Exception as error:
        message = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
        FAILURES.append(f"{name}: {type(error).__name__}: {message}")
        print(f"{name}: export failed: {type(error).__name__}: {message}")
        if "-v" in sys.argv:
            traceback.print_exc()


class HiddenState(nn.Module):
    """Calls a transformers model with keyword arguments (positional order differs across
    versions) and returns one of its outputs only (last_hidden_state unless told)."""

    def __init__(self, inner: nn.Module, names: list[str], output: str = "last_hidden_state") -> None:
        super().__init__()
        self.inner, self.names, self.output = inner, names, output

    def forward(self, *args):
        return getattr(self.inner(**dict(zip(self.names, args))), self.output)


def text_inputs(names: list[str]) -> tuple:
    ids = torch.randint(0, 100, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.int64)
    mask[0, 12:] = 0  # padding, so the mask matters
    types = torch.zeros(1, 16, dtype=torch.int64)
    boxes = torch.arange(16).view(1, 16, 1) * torch.tensor([1, 2, 3, 4])  # LayoutLM's (x0, y0, x1, y1), no RNG
    xpath = torch.arange(64).view(1, 16, 4)  # MarkupLM's tag and subscript ids at 4 depths, no RNG
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "bbox": boxes}
    inputs.update(xpath_tags_seq=xpath % 15, xpath_subs_seq=xpath % 7)
    return tuple(inputs[n] for n in names)


def export_text(
    out: Path,
    prefix: str,
    model: nn.Module,
    names: list[str],
    dynamo_opset: int | None = None,
    variants: tuple[str, ...] = STANDARD,
) -> None:
    export_variants(
        HiddenState(model, names),
        text_inputs(names),
        names,
        {n: {0: "batch", 1: "seq"} for n in names},
        out,
        prefix,
        dynamo_opset,
        variants,
    )


def export_bert(
    out: Path,
    layers: int = 2,
    prefix: str = "bert",
    attention: str = "eager",
    variants: tuple[str, ...] = STANDARD,
    half: bool = False,
) -> None:
    """BERT (half: float16 in torch, ``model.half()``, as export_decoder's half)."""
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=100,
        hidden_size=64,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=256,
        max_position_embeddings=64,
        attn_implementation=attention,
    )
    model = BertModel(config).half() if half else BertModel(config)
    export_text(out, prefix, model, ["input_ids", "attention_mask", "token_type_ids"], variants=variants)


def export_distilbert(
    out: Path, attention: str = "eager", prefix: str = "distilbert", variants: tuple[str, ...] = STANDARD
) -> None:
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(
        vocab_size=100,
        dim=64,
        n_layers=2,
        n_heads=2,
        hidden_dim=256,
        max_position_embeddings=64,
        attn_implementation=attention,
    )
    export_text(out, prefix, DistilBertModel(config), ["input_ids", "attention_mask"], variants=variants)


def export_gpt2(
    out: Path, attention: str = "eager", prefix: str = "gpt2", variants: tuple[str, ...] = STANDARD, half: bool = False
) -> None:
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(
        vocab_size=100, n_embd=64, n_layer=2, n_head=2, n_positions=64, use_cache=False, attn_implementation=attention
    )
    model = GPT2Model(config).half() if half else GPT2Model(config)
    export_text(out, prefix, model, ["input_ids", "attention_mask"], variants=variants)


def export_vit(
    out: Path, attention: str = "eager", prefix: str = "vit", variants: tuple[str, ...] = STANDARD, half: bool = False
) -> None:
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=256,
        attn_implementation=attention,
    )
    names = ["pixel_values"]
    model = ViTModel(config, add_pooling_layer=False)
    export_variants(
        HiddenState(model.half() if half else model, names),
        (torch.randn(1, 3, 32, 32).half() if half else torch.randn(1, 3, 32, 32),),
        names,
        {"pixel_values": {0: "batch"}},
        out,
        prefix,
        variants=variants,
    )


# ---- LLM decoders ----------------------------------------------------------------------------


class Decoder(nn.Module):
    """A causal LM over plain tensors: (input_ids, attention_mask, past key and value of each
    layer ...) -> logits, or (logits, present key and value of each layer ...) with a cache.
    transformers 5 takes and returns a Cache object; it is built from the tensors here."""

    def __init__(self, inner: nn.Module, cache: bool, positions: bool = False) -> None:
        super().__init__()
        self.inner, self.cache, self.positions = inner, cache, positions

    def forward(self, input_ids, attention_mask, *past):
        from transformers import DynamicCache

        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": self.cache}
        if self.positions:  # position_ids as an input (optimum's exports), before the past
            kwargs["position_ids"], past = past[0], past[1:]
        if past:
            pairs = [(past[i], past[i + 1]) for i in range(0, len(past), 2)]
            # transformers 4.x builds its cache from the legacy tuple of (key, value) pairs
            legacy = getattr(DynamicCache, "from_legacy_cache", None)
            kwargs["past_key_values"] = legacy(tuple(pairs)) if legacy else DynamicCache(ddp_cache_data=pairs)
        out = self.inner(**kwargs)
        if not self.cache:
            return out.logits
        cache = out.past_key_values
        if hasattr(cache, "layers"):
            pairs = [(layer.keys, layer.values) for layer in cache.layers]
        else:  # transformers 4.x: a tuple of pairs, or a cache that gives one
            pairs = cache.to_legacy_cache() if hasattr(cache, "to_legacy_cache") else cache
        return (out.logits, *(t for pair in pairs for t in pair))


MOE = {"num_experts_per_tok": 2, "experts_implementation": "batched_mm"}
ROPE = {"rope_type": "default", "rope_theta": 10000.0}  # for configs whose default has no rope_theta
# a vision-language model's arguments: its text_config (VL_TEXT) takes the corpus's sizes
VL = {
    **dict.fromkeys(("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")),
    **dict.fromkeys(("max_position_embeddings", "pad_token_id", "bos_token_id", "eos_token_id")),
    "vision_config": {
        "depth": 1,
        "hidden_size": 32,
        "out_hidden_size": 64,
        "num_heads": 2,
        "intermediate_size": 64,
        "patch_size": 8,
    },
    "image_token_id": 120,
    "video_token_id": 121,
    "vision_start_token_id": 122,
}
VL_TEXT = {
    "vocab_size": 128,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "max_position_embeddings": 128,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
}
# multi-head latent attention at the corpus's size (low-rank q and kv, a decoupled rotary part)
MLA = {"q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16}

# family -> (config class, model class, config arguments beyond the common ones; None drops one)
DECODERS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {"num_key_value_heads": 2}),  # GQA
    "mistral": ("MistralConfig", "MistralForCausalLM", {"num_key_value_heads": 2}),  # GQA
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {}),  # fused qkv and gate_up
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {}),  # partial rotary (0.25)
    "falcon": (
        "FalconConfig",
        "FalconForCausalLM",  # multi-query, parallel attn
        {"intermediate_size": None, "ffn_hidden_size": 128},
    ),
    "gemma": (
        "GemmaConfig",
        "GemmaForCausalLM",  # (1 + w) RMSNorm, scaled embeddings, multi-query as gemma-2b
        {"head_dim": 16, "num_key_value_heads": 1},
    ),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"num_key_value_heads": 2, "head_dim": 16}),  # q/k RMSNorm, GQA
    "gptj": (
        "GPTJConfig",
        "GPTJForCausalLM",  # interleaved rotary on the first rotary_dim, parallel attn; n_* via attribute_map
        {"intermediate_size": None, "n_inner": 128, "rotary_dim": 8},
    ),
    "phi": ("PhiConfig", "PhiForCausalLM", {"partial_rotary_factor": 0.5}),  # Phi-2: LayerNorm, gelu_new, parallel
    "stablelm": (
        "StableLmConfig",
        "StableLmForCausalLM",  # LayerNorm, partial rotary
        {"partial_rotary_factor": 0.25, "num_key_value_heads": 4},
    ),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", {}),  # LayerNorm without weights
    "granite": ("GraniteConfig", "GraniteForCausalLM", {"num_key_value_heads": 2}),  # multipliers, GQA
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", {"num_key_value_heads": 2}),  # biases, GQA
    "gpt_bigcode": (
        "GPTBigCodeConfig",
        "GPTBigCodeForCausalLM",  # multi-query, learned positions, no rotary
        {"intermediate_size": None, "n_inner": 128, "multi_query": True},
    ),
    "opt": (
        "OPTConfig",
        "OPTForCausalLM",  # learned positions offset by 2, ReLU
        {"intermediate_size": None, "ffn_dim": 128, "word_embed_proj_dim": 64},
    ),
    "bloom": ("BloomConfig", "BloomForCausalLM", {"intermediate_size": None}),  # ALiBi, embedding LayerNorm
    "mpt": (
        "MptConfig",
        "MptForCausalLM",  # ALiBi, LayerNorm without bias
        {"intermediate_size": None, "expansion_ratio": 2, "max_seq_len": 128},
    ),
    "codegen": (
        "CodeGenConfig",
        "CodeGenForCausalLM",  # interleaved partial rotary, qkv in one mixed projection
        {"intermediate_size": None, "n_inner": 128, "rotary_dim": 8, "n_ctx": 128},
    ),
    "gpt_neo": (
        "GPTNeoConfig",
        "GPTNeoForCausalLM",  # alternating global and local (windowed) attention, unscaled scores
        {"attention_types": [[["global", "local"], 1]], "window_size": 8},
    ),
    "gemma2": (
        "Gemma2Config",
        "Gemma2ForCausalLM",  # sandwich norms, logit soft-capping, sliding window
        {"head_dim": 16, "num_key_value_heads": 2, "sliding_window": 8},
    ),
    "gemma3": (
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",  # q/k RMSNorm, local and global layers
        {"head_dim": 16, "num_key_value_heads": 2, "sliding_window": 8},
    ),
    "cohere": ("CohereConfig", "CohereForCausalLM", {"num_key_value_heads": 2}),  # LayerNorm without bias, parallel
    "nemotron": (
        "NemotronConfig",
        "NemotronForCausalLM",  # LayerNorm1P, squared ReLU, partial rotary
        {"num_key_value_heads": 2, "head_dim": 16, "partial_rotary_factor": 0.5},
    ),
    "persimmon": ("PersimmonConfig", "PersimmonForCausalLM", {}),  # q/k LayerNorm, squared ReLU, partial rotary
    "biogpt": ("BioGptConfig", "BioGptForCausalLM", {}),  # learned positions, scaled embeddings
    "xglm": (
        "XGLMConfig",
        "XGLMForCausalLM",  # sinusoidal positions; d_model/ffn_dim via attribute_map
        {"intermediate_size": None, "ffn_dim": 128},
    ),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {}),  # post-norm residuals, q/k RMSNorm over all heads
    "glm": ("GlmConfig", "GlmForCausalLM", {"num_key_value_heads": 2, "head_dim": 16}),  # interleaved partial rotary
    "helium": ("HeliumConfig", "HeliumForCausalLM", {"num_key_value_heads": 2, "head_dim": 16}),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", {"num_key_value_heads": 2}),  # some layers without rotary
    # mixture-of-experts decoders: 4 experts, 2 per token.  Their experts run as batched_mm
    # (each token's experts' weights gathered by the router's top-k, then batched MatMuls):
    # the default grouped_mm exports with neither exporter (aten::histc, no ONNX translation),
    # eager loops over the experts hit (dynamo: data-dependent; TorchScript: traced for the
    # example's routing, failing on other inputs)
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", {**MOE, "num_key_value_heads": 2, "num_local_experts": 4}),
    "qwen2_moe": (
        "Qwen2MoeConfig",
        "Qwen2MoeForCausalLM",  # a sigmoid-gated shared expert beside the routed ones, qkv biases
        {
            **MOE,
            "num_experts": 4,
            "num_key_value_heads": 2,
            "moe_intermediate_size": 64,
            "shared_expert_intermediate_size": 128,
        },
    ),
    "qwen3_moe": (
        "Qwen3MoeConfig",
        "Qwen3MoeForCausalLM",  # q/k RMSNorm, renormalized top-k weights
        {
            **MOE,
            "num_experts": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "moe_intermediate_size": 64,
            "norm_topk_prob": True,
        },
    ),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", {**MOE, "num_experts": 4, "intermediate_size": 64}),  # q/k RMSNorm
    "granitemoe": (
        "GraniteMoeConfig",
        "GraniteMoeForCausalLM",  # Granite's multipliers
        {**MOE, "num_key_value_heads": 2, "num_local_experts": 4, "intermediate_size": 64},
    ),
    "deepseek_v3": (
        "DeepseekV3Config",
        "DeepseekV3ForCausalLM",  # multi-head latent attention (low-rank q and kv, a decoupled rotary
        # part, the cache holding the kv latent and the rotary key), sigmoid routing with a
        # bias, a shared expert; layer 0 dense, layer 1 MoE
        {
            **MOE,
            "num_key_value_heads": 4,  # defaults to 128, not to num_attention_heads
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
            "q_lora_rank": 32,
            "kv_lora_rank": 16,
            "qk_rope_head_dim": 8,
            "qk_nope_head_dim": 8,
            "v_head_dim": 16,
        },
    ),
    # newer decoders (transformers 5)
    "olmo3": (
        "Olmo3Config",
        "Olmo3ForCausalLM",  # Olmo2's post-norm and q/k norms, a sliding-window layer then a full one
        {"sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"]},
    ),
    "exaone4": (
        "Exaone4Config",
        "Exaone4ForCausalLM",  # post-norm, q/k RMSNorm, sliding-window and global (no rotary) layers
        {"num_key_value_heads": 2, "sliding_window": 8, "sliding_window_pattern": 2},
    ),
    "arcee": ("ArceeConfig", "ArceeForCausalLM", {"num_key_value_heads": 2}),  # ReLU^2 MLP without a gate
    "ernie4_5": (
        "Ernie4_5Config",
        "Ernie4_5ForCausalLM",  # interleaved rotary
        {"num_key_value_heads": 2, "head_dim": 16},
    ),
    "hunyuan_v1_dense": (
        "HunYuanDenseV1Config",
        "HunYuanDenseV1ForCausalLM",  # q/k RMSNorm after rotary
        {"num_key_value_heads": 2, "head_dim": 16},  # head_dim's default is None
    ),
    "seed_oss": (
        "SeedOssConfig",
        "SeedOssForCausalLM",  # qkv biases, no output bias
        {"num_key_value_heads": 2, "head_dim": 16},
    ),
    "ministral": (
        "MinistralConfig",
        "MinistralForCausalLM",  # Mistral with sliding-window and full layers
        {
            "num_key_value_heads": 2,
            "head_dim": 16,  # the default is None
            "sliding_window": 8,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
    "cohere2": (
        "Cohere2Config",
        "Cohere2ForCausalLM",  # parallel block, LayerNorm, a sliding-window rotary layer, a global NoPE one
        {"num_key_value_heads": 2, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"]},
    ),
    "glm4": (
        "Glm4Config",
        "Glm4ForCausalLM",  # sandwich norms, interleaved partial rotary, fused gate_up
        {"num_key_value_heads": 2, "head_dim": 16},
    ),
    "apertus": ("ApertusConfig", "ApertusForCausalLM", {"num_key_value_heads": 2}),  # xIELU, q/k RMSNorm, no gate
    "doge": (
        "DogeConfig",
        "DogeForCausalLM",  # dynamic mask attention (a learned bias per key), residual scaling
        {"num_key_value_heads": 2, "keep_window_size": 8},
    ),
    "gpt_oss": (
        "GptOssConfig",
        "GptOssForCausalLM",  # attention sinks, alternating sliding and full, clamped SwiGLU experts with biases
        {
            **MOE,
            "num_local_experts": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "intermediate_size": 64,
            "sliding_window": 8,
        },
    ),
    "phimoe": (
        "PhimoeConfig",
        "PhimoeForCausalLM",  # sparsemixer routing, LayerNorm
        {**MOE, "num_local_experts": 4, "num_key_value_heads": 2, "intermediate_size": 64},
    ),
    "jetmoe": (
        "JetMoeConfig",
        "JetMoeForCausalLM",  # mixture of attention heads and of MLP experts (its own loop over experts)
        {
            "num_attention_heads": None,  # num_key_value_heads * num_experts_per_tok
            "num_key_value_heads": 2,
            "kv_channels": 16,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "intermediate_size": 64,
        },
    ),
    "dbrx": (
        "DbrxConfig",
        "DbrxForCausalLM",  # clipped fused qkv, LayerNorm without bias, experts looped over (dynamo: data-dependent)
        {
            "hidden_size": None,
            "num_hidden_layers": None,
            "num_attention_heads": None,
            "intermediate_size": None,
            "max_position_embeddings": None,
            "d_model": 64,
            "n_heads": 4,
            "n_layers": 2,
            "max_seq_len": 128,
            "attn_config": {"kv_n_heads": 2, "clip_qkv": 8.0, "rope_theta": 10000.0},
            "rope_parameters": ROPE,
            # every expert for every token: TorchScript traces its loop over the experts the
            # example routes to, so all of them (the router's weights still differ per token)
            "ffn_config": {"ffn_hidden_size": 64, "moe_num_experts": 4, "moe_top_k": 4},
        },
    ),
    "llama4": (
        "Llama4TextConfig",
        "Llama4ForCausalLM",  # a dense layer with chunked rotary attention, an MoE NoPE layer (top-1
        # sigmoid router over all experts, a shared expert), q/k L2 norm, attention temperature tuning
        {
            "num_key_value_heads": 2,
            "head_dim": 16,
            "intermediate_size": 64,
            "intermediate_size_mlp": 128,
            "num_local_experts": 4,
            "num_experts_per_tok": 1,
            "interleave_moe_layer_step": 2,
            "no_rope_layer_interval": 2,
            "attention_chunk_size": 8,
        },
    ),
    # corpus 8 (2025-2026 decoders).  The hybrids with a recurrent state (RECURRENT: Mamba,
    # gated DeltaNet, lightning attention, short convolutions, RG-LRU layers) keep it in their
    # own cache classes, not key/value tensors: no {family}_kv_*; their scans run as
    # transformers' torch fallbacks (no mamba_ssm / causal_conv1d kernels)
    "phi4_mini": (
        "Phi3Config",
        "Phi3ForCausalLM",  # Phi-4-mini's settings: partial rotary (0.75), GQA, tied embeddings
        {"partial_rotary_factor": 0.75, "num_key_value_heads": 2, "tie_word_embeddings": True},
    ),
    "stablelm2": (
        "StableLmConfig",
        "StableLmForCausalLM",  # StableLM 2 12B's: qkv biases, per-head q/k LayerNorm, parallel residual
        {
            "partial_rotary_factor": 0.25,
            "num_key_value_heads": 2,
            "use_qkv_bias": True,
            "qk_layernorm": True,
            "use_parallel_residual": True,
        },
    ),
    "bitnet": ("BitNetConfig", "BitNetForCausalLM", {"num_key_value_heads": 2}),  # sub-norms before o/down, ReLU^2
    "vaultgemma": (
        "VaultGemmaConfig",
        "VaultGemmaForCausalLM",  # Gemma 2 without sandwich norms, soft-capping
        {"head_dim": 16, "num_key_value_heads": 2, "sliding_window": 8},
    ),
    "ministral3": (
        "Ministral3Config",
        "Ministral3ForCausalLM",  # YaRN rotary with Llama 4's position-dependent query scaling
        {
            "num_key_value_heads": 2,
            "head_dim": 16,
            "rope_parameters": {
                "rope_type": "yarn",
                "rope_theta": 1000000.0,
                "factor": 16.0,
                "original_max_position_embeddings": 8,  # 128 positions / 16
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
                "llama_4_scaling_beta": 0.1,
            },
        },
    ),
    "gemma3n": (
        "Gemma3nTextConfig",
        "Gemma3nForCausalLM",  # AltUp streams, LAuReL, per-layer embeddings, activation sparsity (erfinv)
        {
            "head_dim": 16,
            "num_key_value_heads": 2,
            "sliding_window": 8,
            "layer_types": ["sliding_attention", "full_attention"],
            "vocab_size_per_layer_input": 128,
            "hidden_size_per_layer_input": 16,
            "laurel_rank": 8,
            "num_kv_shared_layers": 0,
            "activation_sparsity_pattern": [0.95, 0.0],
        },
    ),
    "dots1": (
        "Dots1Config",
        "Dots1ForCausalLM",  # DeepSeek-V3 routing over Qwen3 attention (q/k RMSNorm); a dense then an MoE layer
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
        },
    ),
    "glm4_moe": (
        "Glm4MoeConfig",
        "Glm4MoeForCausalLM",  # partial rotary, q/k norm, sigmoid routing with a bias, a dense then an MoE layer
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
            "use_qk_norm": True,
        },
    ),
    "hunyuan_moe": (
        "HunYuanMoEV1Config",
        "HunYuanMoEV1ForCausalLM",  # Hunyuan's q/k norms after rotary, softmax top-k, a shared MLP
        {**MOE, "num_experts_per_tok": None, "num_experts": 4, "moe_topk": 2, "num_key_value_heads": 2, "head_dim": 16},
    ),
    "ernie4_5_moe": (
        "Ernie4_5_MoeConfig",
        "Ernie4_5_MoeForCausalLM",  # interleaved rotary, a shared expert, experts from layer 1
        {
            **MOE,
            "num_experts_per_tok": None,
            "num_key_value_heads": 2,
            "moe_k": 2,
            "moe_num_experts": 4,
            "moe_num_shared_experts": 1,
            "moe_intermediate_size": 32,
            "moe_layer_start_index": 1,
        },
    ),
    "flex_olmo": ("FlexOlmoConfig", "FlexOlmoForCausalLM", {**MOE, "num_experts": 4}),  # OLMo 2 blocks, MoE
    "afmoe": (
        "AfmoeConfig",
        "AfmoeForCausalLM",  # gated attention, sliding and global layers, sigmoid routing, a dense layer first
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "num_experts": 4,
            "num_shared_experts": 1,
            "num_dense_layers": 1,
            "moe_intermediate_size": 32,
            "sliding_window": 8,
            "global_attn_every_n_layers": 2,
        },
    ),
    "deepseek_v2": (
        "DeepseekV2Config",
        "DeepseekV2ForCausalLM",  # multi-head latent attention, greedy top-k routing, a dense then an MoE layer
        {
            **MOE,
            "num_key_value_heads": 4,
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
            "q_lora_rank": 32,
            "kv_lora_rank": 16,
            "qk_rope_head_dim": 8,
            "qk_nope_head_dim": 8,
            "v_head_dim": 16,
        },
    ),
    "minimax_m2": (
        "MiniMaxM2Config",
        "MiniMaxM2ForCausalLM",  # q/k RMSNorm over all heads, partial rotary, sigmoid routing with a bias
        {**MOE, "num_key_value_heads": 2, "head_dim": 16, "num_local_experts": 4, "intermediate_size": 64},
    ),
    "gemma4": (
        "Gemma4TextConfig",
        "Gemma4ForCausalLM",  # Gemma 3n's per-layer embeddings without AltUp, sliding and global layers
        {
            "head_dim": 16,
            "num_key_value_heads": 2,
            "sliding_window": 8,
            "layer_types": ["sliding_attention", "full_attention"],
            "vocab_size_per_layer_input": 128,
            "hidden_size_per_layer_input": 16,
            "num_kv_shared_layers": 0,
        },
    ),
    "gemma4_moe": (
        "Gemma4TextConfig",
        "Gemma4ForCausalLM",  # Gemma 4's MoE block beside the dense MLP
        {
            **MOE,
            "num_experts_per_tok": None,
            "head_dim": 16,
            "num_key_value_heads": 2,
            "sliding_window": 8,
            "layer_types": ["sliding_attention", "full_attention"],
            "vocab_size_per_layer_input": 128,
            "hidden_size_per_layer_input": 16,
            "num_kv_shared_layers": 0,
            "enable_moe_block": True,
            "num_experts": 4,
            "top_k_experts": 2,
            "moe_intermediate_size": 32,
        },
    ),
    "modernbert_decoder": (
        "ModernBertDecoderConfig",
        "ModernBertDecoderForCausalLM",  # ModernBERT's blocks, causal: global and local layers
        {"cls_token_id": 1, "sep_token_id": 2},
    ),
    "nanochat": (
        "NanoChatConfig",
        "NanoChatForCausalLM",  # RMSNorm without weights, ReLU^2
        {"num_key_value_heads": 2},
    ),
    "jais2": ("Jais2Config", "Jais2ForCausalLM", {"num_key_value_heads": 2}),
    "diffllama": ("DiffLlamaConfig", "DiffLlamaForCausalLM", {"num_key_value_heads": 2}),  # differential attention
    "minicpm3": ("MiniCPM3Config", "MiniCPM3ForCausalLM", {**MLA, "num_key_value_heads": 4}),  # MLA, muP scaling
    "granitemoeshared": (
        "GraniteMoeSharedConfig",
        "GraniteMoeSharedForCausalLM",  # Granite 3 MoE with a shared MLP
        {
            **MOE,
            "num_key_value_heads": 2,
            "num_local_experts": 4,
            "intermediate_size": 64,
            "shared_intermediate_size": 64,
        },
    ),
    "cohere2_moe": (
        "Cohere2MoeConfig",
        "Cohere2MoeForCausalLM",  # Cohere 2's parallel block with experts
        {
            **MOE,
            "num_key_value_heads": 2,
            "num_experts": 4,
            "head_dim": 16,
            "sliding_window": 8,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
    "exaone_moe": (
        "ExaoneMoeConfig",
        "ExaoneMoeForCausalLM",  # EXAONE 4's attention, a dense then an MoE layer with a shared expert
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "num_experts": 4,
            "num_shared_experts": 1,
            "moe_intermediate_size": 32,
            "sliding_window": 8,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
    "hy_v3": (
        "HYV3Config",
        "HYV3ForCausalLM",
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "num_experts": 4,
            "num_shared_experts": 1,
            "moe_intermediate_size": 32,
        },
    ),
    "mimo_v2_flash": (
        "MiMoV2FlashConfig",
        "MiMoV2FlashForCausalLM",  # sliding and full layers with different value widths, attention sinks, MoE
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "v_head_dim": 16,
            "n_routed_experts": 4,
            "moe_intermediate_size": 32,
            "n_group": 1,
            "topk_group": 1,
            "sliding_window": 8,
        },
    ),
    "solar_open": (
        "SolarOpenConfig",
        "SolarOpenForCausalLM",
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "n_group": 1,
            "topk_group": 1,
        },
    ),
    "laguna": (
        "LagunaConfig",
        "LagunaForCausalLM",
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "num_experts": 4,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 32,
        },
    ),
    "mistral4": (
        "Mistral4Config",
        "Mistral4ForCausalLM",  # MLA with DeepSeek-V3 routing, a dense then an MoE layer
        {
            **MOE,
            **MLA,
            "num_key_value_heads": 4,
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
        },
    ),
    "deepseek_v32": (
        "DeepseekV32Config",
        "DeepseekV32ForCausalLM",  # MLA with a lightning indexer choosing the top-k keys (sparse attention)
        {
            **MOE,
            **MLA,
            "num_key_value_heads": 4,
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
            "index_topk": 8,
            "index_head_dim": 16,
            "index_n_heads": 2,
        },
    ),
    "glm4_moe_lite": (
        "Glm4MoeLiteConfig",
        "Glm4MoeLiteForCausalLM",  # GLM-4.7-Flash: MLA, sigmoid routing, a dense then an MoE layer
        {
            **MOE,
            **MLA,
            "num_key_value_heads": 4,
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "mlp_layer_types": ["dense", "sparse"],
            "n_group": 1,
            "topk_group": 1,
        },
    ),
    # vision-language models' language side over text only (a tiny vision tower unused): multimodal
    # rotary (M-RoPE) with positions from get_rope_index
    "qwen2_5_vl": ("Qwen2_5_VLConfig", "Qwen2_5_VLForConditionalGeneration", {**VL, "text_config": VL_TEXT}),
    "qwen3_vl": (
        "Qwen3VLConfig",
        "Qwen3VLForConditionalGeneration",  # interleaved M-RoPE, q/k RMSNorm
        {
            **VL,
            "text_config": {**VL_TEXT, "head_dim": 16},
            "vision_config": {**VL["vision_config"], "deepstack_visual_indexes": [0]},
        },
    ),
    # hybrids and recurrent models (RECURRENT)
    "qwen3_5": (
        "Qwen3_5TextConfig",
        "Qwen3_5ForCausalLM",  # Qwen3.5: gated DeltaNet then gated full attention, dense
        {
            "num_key_value_heads": 2,
            "head_dim": 16,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_conv_kernel_dim": 4,
            "layer_types": ["linear_attention", "full_attention"],
        },
    ),
    "olmo_hybrid": ("OlmoHybridConfig", "OlmoHybridForCausalLM", {"num_key_value_heads": 2}),  # DeltaNet + attention
    "kimi_linear": (
        "KimiLinearConfig",
        "KimiLinearForCausalLM",  # Kimi delta attention, then MLA; a dense then an MoE layer
        {
            **MOE,
            **MLA,
            "q_lora_rank": None,
            "num_key_value_heads": 4,
            "num_local_experts": 4,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "n_group": 1,
            "topk_group": 1,
            "layer_types": ["linear_attention", "full_attention"],
            "mlp_layer_types": ["dense", "sparse"],
            "linear_head_dim": 16,
            "linear_num_heads": 4,
            "linear_conv_kernel_dim": 4,
        },
    ),
    "nemotron_h": (
        "NemotronHConfig",
        "NemotronHForCausalLM",  # Nemotron 3: Mamba-2, MoE (with a latent-free shared expert) and attention blocks
        {
            "num_hidden_layers": None,
            "layers_block_type": ["linear_attention", "moe", "full_attention", "moe"],
            "num_key_value_heads": 2,
            "head_dim": 16,
            "mamba_num_heads": 8,
            "mamba_head_dim": 16,
            "ssm_state_size": 16,
            "n_groups": 1,
            "chunk_size": 8,
            **MOE,
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "moe_shared_expert_intermediate_size": 64,
            "n_group": 1,
            "topk_group": 1,
        },
    ),
    "lfm2_moe": (
        "Lfm2MoeConfig",
        "Lfm2MoeForCausalLM",  # LFM2's short convolutions and attention, a dense then an MoE layer
        {
            **MOE,
            "num_key_value_heads": 2,
            "num_experts": 4,
            "moe_intermediate_size": 32,
            "num_dense_layers": 1,
            "layer_types": ["conv", "full_attention"],
        },
    ),
    "rwkv": (
        "RwkvConfig",
        "RwkvForCausalLM",  # RWKV-4 time mixing (a WKV loop over the sequence), channel mixing
        {"num_attention_heads": None, "intermediate_size": None, "attention_hidden_size": 64, "context_length": 128},
    ),
    "xlstm": ("xLSTMConfig", "xLSTMForCausalLM", {}),  # mLSTM blocks (chunked matrix memory)
    "qwen3_next": (
        "Qwen3NextConfig",
        "Qwen3NextForCausalLM",  # gated DeltaNet (chunked delta rule, causal conv) then gated full attention; MoE
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "num_experts": 4,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 64,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_conv_kernel_dim": 4,
            "layer_types": ["linear_attention", "full_attention"],
        },
    ),
    "falcon_h1": (
        "FalconH1Config",
        "FalconH1ForCausalLM",  # attention and Mamba-2 side by side in every layer, muP multipliers
        {
            "num_key_value_heads": 2,
            "mamba_d_ssm": 64,
            "mamba_n_heads": 4,
            "mamba_d_head": 16,
            "mamba_n_groups": 1,
            "mamba_d_state": 16,
            "mamba_chunk_size": 8,
        },
    ),
    "bamba": (
        "BambaConfig",
        "BambaForCausalLM",  # a Mamba-2 layer then an attention one
        {
            "num_key_value_heads": 2,
            "attn_layer_indices": [1],
            "mamba_n_heads": 8,
            "mamba_d_head": 16,
            "mamba_n_groups": 1,
            "mamba_d_state": 16,
            "mamba_chunk_size": 8,
        },
    ),
    "granite4": (
        "GraniteMoeHybridConfig",
        "GraniteMoeHybridForCausalLM",  # Granite 4.0-H: a Mamba-2 layer, an attention one (NoPE), MoE and shared MLP
        {
            **MOE,
            "num_key_value_heads": 2,
            "num_local_experts": 4,
            "intermediate_size": 64,
            "shared_intermediate_size": 64,
            "layer_types": ["mamba", "attention"],
            "mamba_n_heads": 8,
            "mamba_d_head": 16,
            "mamba_n_groups": 1,
            "mamba_d_state": 16,
            "mamba_chunk_size": 8,
        },
    ),
    "jamba": (
        "JambaConfig",
        "JambaForCausalLM",  # a Mamba layer then an attention one with MoE
        {
            **MOE,
            "num_key_value_heads": 2,
            "num_experts": 4,
            "expert_layer_period": 2,
            "expert_layer_offset": 1,
            "attn_layer_period": 2,
            "attn_layer_offset": 1,
            "mamba_d_state": 8,
            "mamba_dt_rank": 8,
        },
    ),
    "zamba2": (
        "Zamba2Config",
        "Zamba2ForCausalLM",  # Mamba-2 layers with a shared attention block (LoRA adapters) in the hybrid one
        {
            "num_key_value_heads": 4,
            "layers_block_type": ["mamba", "hybrid"],
            "mamba_d_state": 16,
            "n_mamba_heads": 8,
            "mamba_ngroups": 1,
            "chunk_size": 8,
            "num_mem_blocks": 1,
            "adapter_rank": 8,
        },
    ),
    "lfm2": (
        "Lfm2Config",
        "Lfm2ForCausalLM",  # LFM2: gated short convolutions, then an attention layer (q/k RMSNorm)
        {"num_key_value_heads": 2, "layer_types": ["conv", "full_attention"], "block_auto_adjust_ff_dim": False},
    ),
    "minimax": (
        "MiniMaxConfig",
        "MiniMaxForCausalLM",  # lightning (linear) attention in blocks, then softmax attention; MoE
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "num_local_experts": 4,
            "block_size": 8,
            "layer_types": ["linear_attention", "full_attention"],
        },
    ),
    "recurrent_gemma": (
        "RecurrentGemmaConfig",
        "RecurrentGemmaForCausalLM",  # Griffin: RG-LRU recurrent block (a scan), then local attention
        {
            "num_key_value_heads": 1,
            "lru_width": 64,
            "attention_window_size": 8,
            "conv1d_width": 4,
            "block_types": ["recurrent", "attention"],
        },
    ),
    "mamba": (
        "MambaConfig",
        "MambaForCausalLM",  # selective scan (a loop over the sequence)
        {"intermediate_size": None, "num_attention_heads": None, "state_size": 8, "time_step_rank": 8},
    ),
    "falcon_mamba": (
        "FalconMambaConfig",
        "FalconMambaForCausalLM",  # Mamba with RMSNorm on B, C and dt
        {"intermediate_size": None, "num_attention_heads": None, "state_size": 8, "time_step_rank": 8},
    ),
    "mamba2": (
        "Mamba2Config",
        "Mamba2ForCausalLM",  # chunked SSD scan, gated RMSNorm
        {
            "intermediate_size": None,
            "num_attention_heads": None,
            "num_heads": 8,
            "head_dim": 16,
            "state_size": 16,
            "n_groups": 1,
            "chunk_size": 8,
        },
    ),
    # corpus 10 (held-out style: families not developed against)
    "internlm3": ("InternLM3Config", "LlamaForCausalLM", {"num_key_value_heads": 2, "head_dim": 16}),  # Llama's layout
    "hyperclovax": (
        "HyperCLOVAXConfig",
        "HyperCLOVAXForCausalLM",  # post-norms after attention and MLP (Peri-LN), muP multipliers
        {"num_key_value_heads": 2, "head_dim": 16},
    ),
    "granite_swa": (
        "GraniteSWAConfig",
        "GraniteSWAForCausalLM",  # Granite's multipliers, full and sliding-window layers
        {"num_key_value_heads": 2, "sliding_window": 8},
    ),
    "cwm": (
        "CwmConfig",
        "CwmForCausalLM",  # Llama 3 rotary scaling, full then sliding-window layers
        {
            "num_key_value_heads": 2,
            "head_dim": 16,
            "sliding_window": 8,
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 1000000.0,
                "factor": 16.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8,  # 128 positions / 16
            },
        },
    ),
    "youtu": (
        "YoutuConfig",
        "YoutuForCausalLM",  # multi-head latent attention (interleaved rotary), a dense MLP
        {**MLA, "num_key_value_heads": 4, "head_dim": 8, "qk_head_dim": 16},
    ),
    "mellum": (
        "MellumConfig",
        "MellumForCausalLM",  # q/k RMSNorm, sparse MoE in every layer
        {**MOE, "num_key_value_heads": 2, "head_dim": 16, "num_local_experts": 4, "moe_intermediate_size": 32},
    ),
    "longcat_flash": (
        "LongcatFlashConfig",
        "LongcatFlashForCausalLM",  # two MLA attentions and two MLPs per layer, MoE with zero (identity) experts
        {
            **MOE,
            **MLA,
            "num_experts_per_tok": None,
            "num_hidden_layers": None,
            "intermediate_size": None,
            "num_layers": 2,
            "ffn_hidden_size": 128,
            "num_key_value_heads": 4,
            "head_dim": 8,
            "qk_head_dim": 16,
            "n_routed_experts": 4,
            "zero_expert_num": 2,
            "moe_topk": 2,
            "expert_ffn_hidden_size": 32,
        },
    ),
    "hy_v4": (
        "HYV4Config",
        "HYV4ForCausalLM",  # MLA with an indexer choosing the top-k keys, a dense then an MoE layer
        {
            **MOE,
            **MLA,
            "num_key_value_heads": 4,
            "head_dim": 16,
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "index_topk": 8,
            "index_head_dim": 16,
            "index_n_heads": 2,
        },
    ),
    "deepseek_v4": (
        "DeepseekV4Config",
        "DeepseekV4ForCausalLM",  # compressed (heavily, and sparse with an indexer) attention, grouped low-rank
        # output, hash-routed then learned-routed MoE; its cache holds compressor states
        {
            **MOE,
            "num_key_value_heads": 1,
            "head_dim": 16,
            "q_lora_rank": 32,
            "qk_rope_head_dim": 8,
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "moe_intermediate_size": 32,
            "sliding_window": 8,
            "o_groups": 2,
            "o_lora_rank": 16,
            "index_n_heads": 2,
            "index_head_dim": 16,
            "index_topk": 8,
            "num_nextn_predict_layers": 0,
        },
    ),
    "lfm3": (
        "Lfm3Config",
        "Lfm3ForCausalLM",  # LFM2's short convolutions, full and sliding-window attention, sandwich norms
        {
            "num_hidden_layers": 3,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "sliding_window": 8,
            "layer_types": ["conv", "full_attention", "sliding_attention"],
        },
    ),
    "zaya": (
        "ZayaConfig",
        "ZayaForCausalLM",  # compressed convolutional attention (its cache holds conv states), top-1 MoE
        {
            **MOE,
            "num_experts_per_tok": 1,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "num_experts": 4,
            "moe_intermediate_size": 32,
            "router_hidden_size": 16,
        },
    ),
    # corpus 12 (transformers 5.25 families not exported before)
    "exaone": ("ExaoneConfig", "LlamaForCausalLM", {"num_key_value_heads": 2, "head_dim": 16}),  # Llama layout
    "gpt_neox_japanese": (
        "GPTNeoXJapaneseConfig",
        "GPTNeoXJapaneseForCausalLM",  # fused qkv, no biases but the last layer's attention one (added to the residual)
        {"intermediate_size": None, "intermediate_multiple_size": 2},
    ),
    "openai_gpt": ("OpenAIGPTConfig", "OpenAIGPTLMHeadModel", {"intermediate_size": None}),  # GPT-1: post-LN, no cache
    "zamba": (
        "ZambaConfig",
        "ZambaForCausalLM",  # Mamba layers, one attention + MLP block shared by the hybrid layers over [h, embeddings]
        {
            "attention_hidden_size": 128,
            "attention_head_dim": 32,
            "num_key_value_heads": 4,
            "mamba_dt_rank": 8,
            "layers_block_type": ["hybrid", "hybrid"],  # the shared block's weights are tied across two layers
            "use_mamba_kernels": False,
        },
    ),
    "sarvam_mla": (
        "SarvamMLAConfig",
        "DeepseekV3ForCausalLM",  # MLA without a low-rank query (q_lora_rank None), interleaved rotary, MoE
        {
            **MOE,
            **MLA,
            "q_lora_rank": None,
            "num_key_value_heads": 4,
            "n_routed_experts": 4,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
        },
    ),
    "sarvam_moe": (
        "SarvamMoEConfig",
        "Glm4MoeForCausalLM",  # q/k RMSNorm, full rotary, sigmoid routing with a bias, a dense then an MoE layer
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "n_routed_experts": 4,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
        },
    ),
    "glm_moe_dsa": (
        "GlmMoeDsaConfig",
        "GlmMoeDsaForCausalLM",  # MLA, DeepSeek sparse attention (an indexer's top-k keys), a dense then an MoE layer
        {
            **MOE,
            **MLA,
            "num_key_value_heads": 4,
            "n_routed_experts": 4,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "mlp_layer_types": None,  # the defaults list the 78 layers of the released model
            "layer_types": None,
            "indexer_types": None,
            "index_topk": 8,
            "index_head_dim": 16,
            "index_n_heads": 2,
        },
    ),
    "minicpm5_moe": (
        "MiniCPM5MoeConfig",
        "MiniCPM5MoeForCausalLM",  # Llama attention, DeepSeek-V3 routing (sigmoid, a bias), a dense then an MoE layer
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "n_routed_experts": 4,
            "moe_intermediate_size": 32,
            "mlp_layer_types": ["dense", "sparse"],
        },
    ),
    "lara_mini": (
        "LaraMiniConfig",
        "LaraMiniForCausalLM",  # a gated DeltaNet layer, a sliding-window attention one, MoE with a shared expert
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
            "num_experts": 4,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 32,
            "sliding_window": 8,
            "layer_types": ["linear_attention", "sliding_attention"],
        },
    ),
    "kolibri1": (
        "Kolibri1Config",
        "Kolibri1ForCausalLM",  # a sliding-window and a full layer, MoE (top-k not renormalized), a shared expert
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "num_local_experts": 4,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 32,
            "sliding_window": 8,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
    "bailing_hybrid": (
        "BailingHybridConfig",
        "BailingHybridForCausalLM",  # Kimi delta attention (short convs, chunked delta rule), an MLA layer, MoE
        {
            **MLA,
            "q_lora_rank": None,
            "num_key_value_heads": 4,
            "num_experts_per_tok": None,
            "num_experts_per_token": 2,
            "experts_implementation": "batched_mm",
            "num_experts": 4,
            "moe_intermediate_size": 32,
            "num_shared_experts": 1,
            "num_expert_group": 1,
            "topk_group": 1,
            "first_k_dense_replace": 1,
            "num_nextn_predict_layers": 0,
            "layer_group_size": 2,
            "linear_head_dim": 16,
            "linear_num_heads": 4,
            "layer_types": None,  # the defaults list the 42 layers of the released model
            "mlp_layer_types": None,
            "expert_swiglu_limit_list": None,
            "share_expert_swiglu_limit_list": None,
        },
    ),
    "qwen4_exp_text": (
        "Qwen4ExpTextConfig",
        "Qwen4ExpForCausalLM",  # hyper-connections (4 residual streams), n-gram embeddings, gated DeltaNet, MoE with a
        # shared expert; no attention layer (its QSA indexer loops over queries: export_models' notes)
        {
            **MOE,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
            "num_experts": 4,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 32,
            "layer_types": ["linear_attention", "linear_attention"],
            "hc_lowrank": 16,
            "ple_embed_dim": 64,
            "ngram_vocab_size_base": 512,
            "split_ngram_parts": 4,
            "heads_per_ngram": 2,
        },
    ),
    "apertus1p5_text": (
        "Apertus1p5TextConfig",
        "Apertus1p5TextForCausalLM",  # xIELU MLP without a gate, q/k RMSNorm, Llama 3 rotary scaling
        {
            "num_key_value_heads": 2,
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 12000000.0,
                "factor": 8.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 16,  # 128 positions / 8
            },
        },
    ),
    "hrm_text": (
        "HrmTextConfig",
        "HrmTextForCausalLM",  # hierarchical reasoning: a low- and a high-level stack of one layer each, run in
        # nested cycles (H 2 x (L 1 + 1)), each run with its own cache slot
        {"head_dim": 16, "num_hidden_layers": 1, "H_cycles": 2, "L_cycles": 1, "L_bp_cycles": [1]},
    ),
    "inkling2_text": (
        "Inkling2TextConfig",
        "Inkling2ForCausalLM",  # a sliding-window and a full layer: short convolutions on q/k/v (their states in the
        # cache), a relative position bias, L2-clipped log-scaled queries, softcapped SwiGLU experts, block residuals
        {
            **MOE,
            "unpadded_vocab_size": 120,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "swa_num_attention_heads": 4,
            "swa_num_key_value_heads": 2,
            "swa_head_dim": 16,
            "sliding_window_size": 8,
            "d_rel": 8,
            "rel_extent": 16,
            "layer_types": ["hybrid_sliding", "hybrid"],
            "n_routed_experts": 4,
            "moe_intermediate_size": 32,
            "n_layers_per_attn_res_block": 1,
        },
    ),
}
# DECODERS whose cache holds a recurrent state (no {family}_kv_*)
RECURRENT = (
    "qwen3_next",
    "falcon_h1",
    "bamba",
    "granite4",
    "jamba",
    "zamba2",
    "lfm2",
    "minimax",
    "recurrent_gemma",
    "mamba",
    "falcon_mamba",
    "mamba2",
    "qwen3_5",
    "olmo_hybrid",
    "kimi_linear",
    "nemotron_h",
    "lfm2_moe",
    "rwkv",
    "xlstm",
    "lfm3",
    "zaya",
    "deepseek_v4",
    "zamba",
    "lara_mini",
    "bailing_hybrid",
    "qwen4_exp_text",
    "inkling2_text",
)


def decoder_model(family: str, attention: str = "eager") -> nn.Module:

    config_name, model_name, extra = DECODERS[family]
    return tiny_transformer(
        config_name,
        model_name,
        extra,
        attention,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    ).eval()


def export_decoder(
    out: Path,
    family: str,
    attention: str = "eager",
    prefix: str | None = None,
    kv: bool = True,
    variants: tuple[str, ...] = STANDARD,
    positions: bool = False,
    half: bool = False,
) -> None:
    """{prefix}_{variants}: the whole sequence, no cache (by default ts_static, ts_dynamic,
    ts_opset14, dynamo); {prefix}_kv_{ts_dynamic,dynamo}: one decoding step over a past of 4
    tokens.  With positions, position_ids is an input too (after the mask, as optimum's
    exports take it: the cumulative sum of the mask, so each row of a left-padded batch has
    its own positions).  With half, the model is float16 in torch (``model.half()``): float16
    inputs and outputs, as exported for GPUs, not a converted copy."""
    from torch.export import Dim

    prefix = prefix or family
    model = decoder_model(family, attention)
    if half:
        model = model.half()
    names = ["input_ids", "attention_mask"] + ["position_ids"] * positions
    arguments = text_inputs(names[:2])
    if positions:
        arguments = (*arguments, (arguments[1].cumsum(-1) - 1).clamp(min=0))
    export_variants(
        Decoder(model, cache=False, positions=positions),
        arguments,
        names,
        {n: {0: "batch", 1: "seq"} for n in names},
        out,
        prefix,
        dynamo_opset=18,
        variants=variants,
    )
    if not kv:
        return
    step = Decoder(model, cache=True, positions=positions).eval()
    with torch.no_grad():  # the past: a prefill of 4 tokens, batch 2
        prefill = [torch.randint(0, 128, (2, 4)), torch.ones(2, 4, dtype=torch.int64)]
        past = step(*prefill, *[torch.arange(4).expand(2, 4)] * positions)[1:]
    if any(t.shape[2] != 4 for t in past):
        raise RuntimeError(
            f"{family}: past tensors are {[tuple(t.shape) for t in past]}, expected (batch, heads, 4, head_dim)"
        )
    ids = torch.randint(0, 128, (2, 1))
    mask = torch.ones(2, 5, dtype=torch.int64)
    mask[1, 0] = 0  # one row left-padded
    step_positions = [torch.tensor([[4], [3]])] * positions  # the left-padded row is one behind
    layers = len(past) // 2
    past_names = [f"past_key_values.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    output_names = ["logits"] + [f"present.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    axes = {
        "input_ids": {0: "batch", 1: "sequence_length"},
        "attention_mask": {0: "batch", 1: "total_sequence_length"},
        "position_ids": {0: "batch", 1: "sequence_length"},
        "logits": {0: "batch", 1: "sequence_length"},
    }
    axes.update({n: {0: "batch", 2: "past_sequence_length"} for n in past_names})
    axes.update({n: {0: "batch", 2: "total_sequence_length"} for n in output_names[1:]})
    # dynamo: dynamic batch and past; the step is one token (the mask is past + 1 long)
    batch, past_length = Dim("batch", min=1, max=64), Dim("past_sequence_length", min=1, max=100)
    shapes = {
        "input_ids": {0: batch},
        "attention_mask": {0: batch, 1: past_length + 1},
        # forward's *past holds position_ids first
        "past": tuple([{0: batch}] * positions + [{0: batch, 2: past_length} for _ in past]),
    }
    export_step(
        out, f"{prefix}_kv", step, (ids, mask, *step_positions, *past), names + past_names, output_names, axes, shapes
    )


@contextmanager
def real_rotary(model_type: str = "llama4", rotary: str = "Llama4TextRotaryEmbedding", heads_first: bool = False):
    """A rotary embedding computed in complex numbers (Llama 4's, DeepSeek-V2's: torch.polar,
    view_as_complex), which neither exporter translates (TorchScript: no aten::polar; dynamo:
    no complex aten::unsqueeze), in real arithmetic while exporting: the same rotation of
    interleaved pairs, (cos, sin) stacked in a last axis in place of a complex tensor.  q and k
    are (batch, seq, heads, dim) unless heads_first."""
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    embedding = getattr(module, rotary)

    def forward(self, x, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
        return torch.stack([freqs.cos(), freqs.sin()], -1) * self.attention_scaling

    def apply(xq, xk, freqs):
        freqs = freqs[:, None] if heads_first else freqs[:, :, None]
        cos, sin = freqs[..., 0], freqs[..., 1]

        def rotate(x):
            pairs = x.float().reshape(*x.shape[:-1], -1, 2)
            real, imag = pairs[..., 0], pairs[..., 1]
            return torch.stack([real * cos - imag * sin, real * sin + imag * cos], -1).flatten(3).type_as(x)

        return rotate(xq), rotate(xk)

    saved = embedding.forward, module.apply_rotary_emb
    embedding.forward, module.apply_rotary_emb = forward, apply
    try:
        yield
    finally:
        embedding.forward, module.apply_rotary_emb = saved


def export_llama4(out: Path, **arguments) -> None:
    with real_rotary():
        export_decoder(out, "llama4", **arguments)


def export_deepseek_v2(out: Path, **arguments) -> None:
    with real_rotary("deepseek_v2", "DeepseekV2RotaryEmbedding", heads_first=True):
        export_decoder(out, "deepseek_v2", **arguments)


def export_step(
    out: Path, prefix: str, step: nn.Module, args: tuple, names: list, output_names: list, axes: dict, shapes: dict
) -> None:
    """One decoding step with a cache: {prefix}_ts_dynamic (TorchScript, dynamic_axes ``axes``)
    and {prefix}_dynamo (opset 18, dynamic_shapes ``shapes``)."""
    attempt(
        f"{prefix}_ts_dynamic",
        lambda: torch.onnx.export(
            step,
            args,
            out / f"{prefix}_ts_dynamic.onnx",
            dynamo=False,
            opset_version=17,
            input_names=names,
            output_names=output_names,
            dynamic_axes=axes,
        ),
    )
    attempt(
        f"{prefix}_dynamo",
        lambda: torch.onnx.export(
            step,
            args,
            out / f"{prefix}_dynamo.onnx",
            dynamo=True,
            opset_version=18,
            input_names=names,
            output_names=output_names,
            dynamic_shapes=shapes,
        ),
    )


# ---- seq2seq decoders (cross-attention) ----------------------------------------------------------


class CrossDecoderStep(nn.Module):
    """One step of a seq2seq decoder over plain tensors: (input_ids, the encoder's attention
    mask where the family takes one, then per layer the self-attention past key and value and
    the cross-attention key and value) -> (last_hidden_state, present self-attention key and
    value of each layer), as optimum's decoder_with_past.  The cross-attention reads its cached
    keys and values; the encoder's hidden states are no input (the decoder gets zeros shaped
    like them: it runs cross-attention only when given some)."""

    def __init__(self, inner: nn.Module, names: list[str], hidden: int) -> None:
        super().__init__()
        self.inner, self.names, self.hidden = inner, names, hidden

    def forward(self, *args):
        from transformers import EncoderDecoderCache

        kwargs = dict(zip(self.names, args))
        past = args[len(self.names) :]
        cross = past[2]  # (batch, heads, encoder length, head dim)
        kwargs["encoder_hidden_states"] = cross.new_zeros(cross.shape[0], cross.shape[2], self.hidden)
        cache = EncoderDecoderCache([past[i : i + 4] for i in range(0, len(past), 4)])
        out = self.inner(**kwargs, past_key_values=cache, use_cache=True)
        presents = []
        for layer in out.past_key_values.self_attention_cache.layers:
            presents += [layer.keys, layer.values]
        return (out.last_hidden_state, *presents)


BART_SIZE = dict(
    vocab_size=128,
    d_model=64,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=128,
    decoder_ffn_dim=128,
    max_position_embeddings=64,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
    decoder_start_token_id=1,
)
CROSS = ["input_ids", "encoder_hidden_states", "encoder_attention_mask"]
T5_SIZE = dict(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, pad_token_id=0)
MOONSHINE_SIZE = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    encoder_num_hidden_layers=2,
    decoder_num_hidden_layers=2,
    encoder_num_attention_heads=4,
    decoder_num_attention_heads=4,
    max_position_embeddings=64,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
    decoder_start_token_id=1,
)

# family -> (config class, encoder-decoder model class, decoder inputs, config arguments; None drops one)
SEQ2SEQ_DECODERS = {
    "whisper_dec": (
        "WhisperConfig",
        "WhisperModel",  # learned positions, pre-LN, GELU; no encoder mask
        CROSS[:2],
        # use_cache: without a cache (even an empty one) the causal mask looks for packed
        # sequences with aten::diff, which TorchScript cannot export
        {
            **BART_SIZE,
            "max_position_embeddings": None,
            "max_target_positions": 64,
            "num_mel_bins": 16,
            "use_cache": True,
        },
    ),
    "bart_dec": ("BartConfig", "BartModel", CROSS, BART_SIZE),  # post-LN, positions offset by 2
    "mbart_dec": ("MBartConfig", "MBartModel", CROSS, BART_SIZE),  # pre-LN, final LayerNorm
    "marian_dec": (
        "MarianConfig",
        "MarianModel",  # sinusoidal positions, scaled embeddings, SiLU
        CROSS,
        {**BART_SIZE, "scale_embedding": True, "activation_function": "swish"},
    ),
    "pegasus_dec": ("PegasusConfig", "PegasusModel", CROSS, {**BART_SIZE, "scale_embedding": True}),  # sinusoidal
    "t5_dec": (
        "T5Config",
        "T5Model",  # RMSNorm, relative position bias, no scaling of scores
        CROSS,
        T5_SIZE,
    ),
    "mt5_dec": ("MT5Config", "MT5Model", CROSS, T5_SIZE),  # T5 with gated-GELU feed-forward
    "umt5_dec": ("UMT5Config", "UMT5Model", CROSS, T5_SIZE),  # a relative position bias in every layer
    "m2m100_dec": ("M2M100Config", "M2M100Model", CROSS, BART_SIZE),  # sinusoidal positions, pre-LN, scaled
    "blenderbot_dec": ("BlenderbotConfig", "BlenderbotModel", CROSS, BART_SIZE),  # pre-LN, learned positions
    "plbart_dec": ("PLBartConfig", "PLBartModel", CROSS, BART_SIZE),  # BART with scaled embeddings
    "moonshine_dec": (
        "MoonshineConfig",
        "MoonshineModel",  # partial rotary, SwiGLU, LayerNorm
        CROSS,
        {**MOONSHINE_SIZE, "use_cache": True},  # as Whisper's: no aten::diff
    ),
    # corpus 8
    "led_dec": (
        "LEDConfig",
        "LEDModel",  # BART's decoder (the Longformer attention is the encoder's)
        CROSS,
        {
            **BART_SIZE,
            "max_position_embeddings": None,
            "max_encoder_position_embeddings": 64,
            "max_decoder_position_embeddings": 64,
            "attention_window": 8,
        },
    ),
    "prophetnet_dec": (
        "ProphetNetConfig",
        "ProphetNetModel",  # n-gram (2) streams, bucketed relative positions in both streams
        CROSS,
        {
            "vocab_size": 128,
            "hidden_size": 64,
            "encoder_ffn_dim": 128,
            "decoder_ffn_dim": 128,
            "num_encoder_layers": 2,
            "num_decoder_layers": 2,
            "num_encoder_attention_heads": 4,
            "num_decoder_attention_heads": 4,
            "max_position_embeddings": 64,
            "ngram": 2,
            "num_buckets": 8,
            "relative_max_distance": 16,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "decoder_start_token_id": 1,
        },
    ),
    "musicgen_dec": (
        "MusicgenDecoderConfig",
        "MusicgenModel",  # sinusoidal positions, summed codebook embeddings (1 codebook here), GELU
        CROSS,
        {
            "vocab_size": 128,
            "hidden_size": 64,
            "ffn_dim": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": 64,
            "num_codebooks": 1,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "use_cache": True,
        },
    ),
}
# the SEQ2SEQ_DECODERS also exported as {family}_kv_*
SEQ2SEQ_KV = ("whisper_dec", "bart_dec", "t5_dec", "umt5_dec", "m2m100_dec", "moonshine_dec", "led_dec", "musicgen_dec")


def export_seq2seq_decoder(out: Path, family: str, kv: bool = False, variants: tuple[str, ...] = STANDARD) -> None:
    """The decoder of an encoder-decoder model over (input_ids, encoder_hidden_states
    [, encoder_attention_mask]) -> last_hidden_state in export_variants' variants; with kv
    also {family}_kv_{ts_dynamic,dynamo}: one step over a self-attention past of 4 tokens and
    cross-attention keys and values of 6 encoder positions."""
    import transformers
    from torch.export import Dim

    config_name, model_name, names, arguments = SEQ2SEQ_DECODERS[family]
    arguments = {"use_cache": False, "attn_implementation": "eager", **arguments}
    config = getattr(transformers, config_name)(**{k: v for k, v in arguments.items() if v is not None})
    decoder = getattr(transformers, model_name)(config).get_decoder().eval().requires_grad_(False)
    width = config.d_model if hasattr(config, "d_model") else config.hidden_size  # Moonshine: hidden_size
    hidden = torch.randn(2, 6, width)
    mask = torch.ones(2, 6, dtype=torch.int64)
    mask[1, 4:] = 0  # padding, so the mask matters
    inputs = {
        "input_ids": torch.randint(3, 128, (2, 8)),
        "encoder_hidden_states": hidden,
        "encoder_attention_mask": mask,
    }
    axes = {"input_ids": {0: "batch", 1: "sequence_length"}}
    axes.update({n: {0: "batch", 1: "encoder_sequence_length"} for n in names[1:]})
    args = tuple(inputs[n][:1] for n in names)
    export_variants(HiddenState(decoder, names), args, names, axes, out, family, 18, variants)
    if not kv:
        return
    with torch.no_grad():  # the past: a prefill of 4 tokens over the 6 encoder positions
        prefill = {**inputs, "input_ids": inputs["input_ids"][:, :4]}
        cache = decoder(**{n: prefill[n] for n in names}, use_cache=True).past_key_values
    past = []
    for own, cross in zip(cache.self_attention_cache.layers, cache.cross_attention_cache.layers):
        past += [own.keys, own.values, cross.keys, cross.values]
    layers = len(past) // 4
    step_names = [n for n in names if n != "encoder_hidden_states"]
    past_names = [
        f"past_key_values.{i}.{side}.{kind}"
        for i in range(layers)
        for side in ("decoder", "encoder")
        for kind in ("key", "value")
    ]
    output_names = ["last_hidden_state"] + [
        f"present.{i}.decoder.{kind}" for i in range(layers) for kind in ("key", "value")
    ]
    lengths = {"decoder": "past_sequence_length", "encoder": "encoder_sequence_length"}  # by past_names' side
    step_axes = {n: axes[n] for n in step_names}
    step_axes.update({n: {0: "batch", 2: lengths[n.split(".")[2]]} for n in past_names})
    step_axes.update({n: {0: "batch", 2: "total_sequence_length"} for n in output_names[1:]})
    batch, dims = Dim("batch", min=1, max=64), {k: Dim(v, min=1, max=100) for k, v in lengths.items()}
    shapes = [{0: batch}] + [{0: batch, 1: dims["encoder"]}] * (len(step_names) - 1)
    shapes += [{0: batch, 2: dims[n.split(".")[2]]} for n in past_names]
    step = CrossDecoderStep(decoder, step_names, width).eval()
    step_args = (inputs["input_ids"][:, 4:5], *(inputs[n] for n in step_names[1:]), *past)
    export_step(
        out, f"{family}_kv", step, step_args, step_names + past_names, output_names, step_axes, {"args": tuple(shapes)}
    )


# ---- encoders ----------------------------------------------------------------------------------


def export_whisper_encoder(out: Path, variants: tuple[str, ...] = STANDARD) -> None:
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    config = WhisperConfig(
        vocab_size=100,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        num_mel_bins=16,
        max_source_positions=32,
        max_target_positions=32,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        attn_implementation="eager",
    )
    names = ["input_features"]  # (batch, mel bins, 2 * max_source_positions frames)
    export_variants(
        HiddenState(WhisperEncoder(config), names),
        (torch.randn(1, 16, 64),),
        names,
        {"input_features": {0: "batch"}},
        out,
        "whisper_enc",
        dynamo_opset=18,
        variants=variants,
    )


def export_t5_encoder(out: Path, variants: tuple[str, ...] = STANDARD) -> None:
    from transformers import T5Config, T5EncoderModel

    config = T5Config(
        vocab_size=100, d_model=64, d_kv=32, d_ff=128, num_layers=2, num_heads=2, attn_implementation="eager"
    )
    export_text(out, "t5_enc", T5EncoderModel(config), ["input_ids", "attention_mask"], 18, variants)


def export_clip_text(out: Path, variants: tuple[str, ...] = STANDARD) -> None:
    from transformers import CLIPTextConfig, CLIPTextModel

    config = CLIPTextConfig(
        vocab_size=100,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=32,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="eager",
    )
    export_text(out, "clip_text", CLIPTextModel(config), ["input_ids", "attention_mask"], 18, variants)


def export_bart_encoder(out: Path, variants: tuple[str, ...] = STANDARD) -> None:
    from transformers import BartConfig
    from transformers.models.bart.modeling_bart import BartEncoder

    config = BartConfig(
        vocab_size=100,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    export_text(out, "bart_enc", BartEncoder(config), ["input_ids", "attention_mask"], 18, variants)


def export_encoders_dyn14(out: Path) -> None:
    """BERT and DistilBERT with dynamic axes at opset 14 (LayerNormalization decomposed)."""
    from transformers import BertConfig, BertModel, DistilBertConfig, DistilBertModel

    bert = BertModel(
        BertConfig(
            vocab_size=100,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=256,
            max_position_embeddings=64,
            attn_implementation="eager",
        )
    )
    distilbert = DistilBertModel(
        DistilBertConfig(
            vocab_size=100,
            dim=64,
            n_layers=2,
            n_heads=2,
            hidden_dim=256,
            max_position_embeddings=64,
            attn_implementation="eager",
        )
    )
    for prefix, model, names in (
        ("bert", bert, ["input_ids", "attention_mask", "token_type_ids"]),
        ("distilbert", distilbert, ["input_ids", "attention_mask"]),
    ):
        wrapped = HiddenState(model, names).eval()
        attempt(
            f"{prefix}_ts_dynamic_opset14",
            lambda: torch.onnx.export(
                wrapped,
                text_inputs(names),
                out / f"{prefix}_ts_dynamic_opset14.onnx",
                dynamo=False,
                opset_version=14,
                input_names=names,
                dynamic_axes={n: {0: "batch", 1: "seq"} for n in names},
            ),
        )


TEXT3 = ["input_ids", "attention_mask", "token_type_ids"]
XLM_SIZE = dict(  # XLM's and FlauBERT's own names (the attribute_map's would lose to the defaults)
    hidden_size=None,
    num_hidden_layers=None,
    num_attention_heads=None,
    intermediate_size=None,
    emb_dim=64,
    n_layers=2,
    n_heads=4,
)

# family -> (config class, model class, inputs, config arguments beyond the common ones; None drops one)
ENCODERS = {
    "roberta": ("RobertaConfig", "RobertaModel", TEXT3, {}),  # positions from the padding mask
    "xlm_roberta": ("XLMRobertaConfig", "XLMRobertaModel", TEXT3, {}),
    "electra": ("ElectraConfig", "ElectraModel", TEXT3, {"embedding_size": 32}),  # embeddings_project
    "albert": ("AlbertConfig", "AlbertModel", TEXT3, {"embedding_size": 32}),  # shared layer, projection
    "mpnet": ("MPNetConfig", "MPNetModel", ["input_ids", "attention_mask"], {}),  # relative position bias
    "deberta_v2": (
        "DebertaV2Config",
        "DebertaV2Model",  # disentangled attention (relative c2p and p2c)
        TEXT3,
        {"type_vocab_size": 2, "relative_attention": True, "pos_att_type": ["c2p", "p2c"], "position_buckets": 8},
    ),
    "camembert": ("CamembertConfig", "CamembertModel", TEXT3, {}),
    "ctrl": ("CTRLConfig", "CTRLModel", ["input_ids", "attention_mask"], {"n_embd": 64, "n_head": 4, "dff": 128}),
    "roformer": ("RoFormerConfig", "RoFormerModel", TEXT3, {"embedding_size": 64}),  # rotary in an encoder
    "mobilebert": (
        "MobileBertConfig",
        "MobileBertModel",  # bottlenecks, NoNorm (elementwise affine), stacked FFNs
        TEXT3,
        {"embedding_size": 32, "intra_bottleneck_size": 32, "true_hidden_size": 32},
    ),
    "esm": (
        "EsmConfig",
        "EsmModel",  # rotary, pre-LN
        ["input_ids", "attention_mask"],
        {"position_embedding_type": "rotary", "pad_token_id": 1, "mask_token_id": 2, "token_dropout": False},
    ),
    "megatron_bert": ("MegatronBertConfig", "MegatronBertModel", TEXT3, {}),  # pre-LN BERT
    "data2vec_text": ("Data2VecTextConfig", "Data2VecTextModel", TEXT3, {}),
    "modernbert": (
        "ModernBertConfig",
        "ModernBertModel",  # rotary, GeGLU, alternating local attention, no biases
        ["input_ids", "attention_mask"],
        {
            "local_attention": 8,
            "global_attn_every_n_layers": 2,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "cls_token_id": 1,
            "sep_token_id": 2,
        },
    ),
    "ernie": ("ErnieConfig", "ErnieModel", TEXT3, {}),
    "convbert": ("ConvBertConfig", "ConvBertModel", TEXT3, {"embedding_size": 64}),  # span-based dynamic conv
    "funnel": (
        "FunnelConfig",
        "FunnelModel",  # pooled (funnel) blocks, relative attention, upsampling decoder
        TEXT3,
        {"num_hidden_layers": None, "intermediate_size": None, "block_sizes": [1, 1], "d_head": 16, "d_inner": 128},
    ),
    "squeezebert": ("SqueezeBertConfig", "SqueezeBertModel", TEXT3, {"embedding_size": 64}),  # grouped 1x1 convs
    "xlnet": (
        "XLNetConfig",
        "XLNetModel",  # two-stream relative attention (content stream only without a target mapping)
        TEXT3,
        {"intermediate_size": None, "d_inner": 128, "d_head": 16, "max_position_embeddings": None},
    ),
    "layoutlm": ("LayoutLMConfig", "LayoutLMModel", ["input_ids", "bbox", "attention_mask", "token_type_ids"], {}),
    "rembert": (
        "RemBertConfig",
        "RemBertModel",  # decoupled input embeddings, projected up
        TEXT3,
        {"input_embedding_size": 32, "output_embedding_size": 32},
    ),
    "xlm": (
        "XLMConfig",
        "XLMModel",  # sinusoidal-free learned positions, language embeddings, lengths from the padding
        ["input_ids", "attention_mask"],
        {**XLM_SIZE, "n_langs": 2},
    ),
    # FlauBERT: XLM with layerdrop; pre_norm=True fails in transformers 5 (indexes its EncoderDecoderCache)
    "flaubert": ("FlaubertConfig", "FlaubertModel", ["input_ids", "attention_mask"], XLM_SIZE),
    "ibert": ("IBertConfig", "IBertModel", TEXT3, {}),  # RoBERTa (quant_mode off: float ops)
    "nystromformer": (
        "NystromformerConfig",
        "NystromformerModel",  # full attention plus a conv over the values: as many landmarks as
        # segment_means_seq_len; with fewer (landmark attention) transformers 5 adds a (batch, 1,
        # seq, seq) mask to (batch, heads, landmarks, seq) scores and fails
        TEXT3,
        {"num_landmarks": 64, "segment_means_seq_len": 64, "conv_kernel_size": 3},
    ),
    "big_bird": ("BigBirdConfig", "BigBirdModel", TEXT3, {"attention_type": "original_full", "sep_token_id": 3}),
    "canine": (
        "CanineConfig",
        "CanineModel",  # hashed character embeddings, local attention, strided downsampling conv, upsampling
        TEXT3,
        {"num_hash_buckets": 64, "local_transformer_stride": 8, "downsampling_rate": 4, "type_vocab_size": 2},
    ),
    "markuplm": (
        "MarkupLMConfig",
        "MarkupLMModel",  # XPath tag and subscript embeddings summed into the tokens'
        ["input_ids", "xpath_tags_seq", "xpath_subs_seq", "attention_mask", "token_type_ids"],
        {
            "max_depth": 4,
            "max_xpath_tag_unit_embeddings": 16,
            "max_xpath_subs_unit_embeddings": 16,
            "tag_pad_id": 15,
            "subs_pad_id": 15,
            "xpath_unit_hidden_size": 8,
        },
    ),
    "lilt": (
        "LiltConfig",
        "LiltModel",  # a layout stream beside the text one, attention scores shared across them
        ["input_ids", "bbox", "attention_mask", "token_type_ids"],
        {"hidden_size": 48},  # its box embeddings are 6 of hidden_size // 6: 64 does not divide
    ),
    "chinese_clip_text": ("ChineseCLIPTextConfig", "ChineseCLIPTextModel", TEXT3, {}),  # BERT
    "luke": (
        "LukeConfig",
        "LukeModel",  # RoBERTa words; no entity inputs
        TEXT3,
        {"entity_vocab_size": 16, "entity_emb_size": 32},
    ),
    # corpus 8
    "longformer": (
        "LongformerConfig",
        "LongformerModel",  # sliding-window (8) attention over chunks, global attention from the mask
        TEXT3,
        {"attention_window": 8, "pad_token_id": 1, "sep_token_id": 2},
    ),
    "splinter": ("SplinterConfig", "SplinterModel", TEXT3, {}),  # BERT
    "roc_bert": (
        "RoCBertConfig",
        "RoCBertModel",  # shape and pronunciation embeddings concatenated and mapped (ids default to the tokens')
        TEXT3,
        {
            "pronunciation_vocab_size": 128,
            "shape_vocab_size": 128,
            "pronunciation_embed_dim": 16,
            "shape_embed_dim": 16,
        },
    ),
    "yoso": (
        "YosoConfig",
        "YosoModel",  # LSH-expected attention (acos of normalized scores), a conv over the values
        TEXT3,
        {"use_expectation": True, "conv_window": 3, "type_vocab_size": 2},  # the default 1 refuses type id 1
    ),
    "mra": (
        "MraConfig",
        "MraModel",  # multi-resolution attention (at 16 tokens: its full-attention path)
        TEXT3,
        {"block_per_row": 2, "type_vocab_size": 2},
    ),
    "xmod": (
        "XmodConfig",
        "XmodModel",  # per-language bottleneck adapters (the default language's)
        TEXT3,
        {"languages": ["en_XX", "de_DE"], "default_language": "en_XX", "adapter_reduction_factor": 4},
    ),
    "eurobert": (
        "EuroBertConfig",
        "EuroBertModel",  # a bidirectional Llama: RMSNorm, rotary, SwiGLU, GQA
        ["input_ids", "attention_mask"],
        {"num_key_value_heads": 2, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "mask_token_id": 3},
    ),
    # corpus 10 (held-out style)
    "gte": ("GteConfig", "GteModel", TEXT3, {"type_vocab_size": 2}),  # rotary, GLU feed-forward, post-LN
    "nomic_bert": ("NomicBertConfig", "NomicBertModel", TEXT3, {}),  # rotary, SwiGLU, no biases
    "jina_embeddings_v3": ("JinaEmbeddingsV3Config", "JinaEmbeddingsV3Model", TEXT3, {"type_vocab_size": 2}),  # rotary
    "xlm_roberta_xl": ("XLMRobertaXLConfig", "XLMRobertaXLModel", TEXT3, {"type_vocab_size": 2}),  # pre-LN
    "roberta_prelayernorm": ("RobertaPreLayerNormConfig", "RobertaPreLayerNormModel", TEXT3, {}),
    "bert_generation": ("BertGenerationConfig", "BertGenerationEncoder", ["input_ids", "attention_mask"], {}),
    "fnet": ("FNetConfig", "FNetModel", ["input_ids", "token_type_ids"], {}),  # Fourier mixing (FFT), no attention
    "ultrabert": ("UltrabertConfig", "UltrabertModel", ["input_ids", "attention_mask"], {}),  # RMSNorm, rotary
    "deberta": (
        "DebertaConfig",
        "DebertaModel",  # DeBERTa v1: disentangled attention, fused in_proj, relative positions unbucketed
        TEXT3,
        {"relative_attention": True, "pos_att_type": ["c2p", "p2c"], "max_relative_positions": 16},
    ),
    "esmc": ("EsmcConfig", "EsmcModel", ["input_ids", "attention_mask"], {}),  # ESM C: rotary, q/k LayerNorm
    "embedding_gemma2_text": (
        "EmbeddingGemma2TextConfig",
        "EmbeddingGemma2TextModel",  # bidirectional Gemma: sliding and full layers (per-layer head sizes), pooling
        ["input_ids", "attention_mask"],
        {
            "num_key_value_heads": 2,
            "head_dim": 16,
            "sliding_window": 8,
            "layer_types": ["sliding_attention", "full_attention"],
            "per_layer_config": {"01": {"head_dim": 32, "num_key_value_heads": 1}},
            "hidden_size_per_layer_input": 16,
            "embedding_dim": 32,
            "pad_token_id": 0,
            "eos_token_id": 1,
            "bos_token_id": 2,
        },
    ),
    "openai_privacy_filter": (
        "OpenAIPrivacyFilterConfig",
        "OpenAIPrivacyFilterModel",  # a bidirectional gpt-oss: attention sinks, sliding window, YaRN, clamped MoE
        ["input_ids", "attention_mask"],
        {
            **MOE,
            "num_local_experts": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "sliding_window": 8,
            "pad_token_id": 0,
            "eos_token_id": 2,
            "rope_parameters": {
                "rope_type": "yarn",
                "rope_theta": 150000.0,
                "factor": 8.0,
                "original_max_position_embeddings": 8,  # 64 positions / 8
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
            },
        },
    ),
    # corpus 12
    "bros": ("BrosConfig", "BrosModel", ["input_ids", "bbox", "attention_mask"], {}),  # box coordinates as sinusoids
    "tapas": (
        "TapasConfig",
        "TapasModel",  # 7 token-type tables (left at their zero default), positions restarting in each cell
        # (a segment minimum: scatter_reduce)
        ["input_ids", "attention_mask"],
        {},
    ),
    "layoutlmv3": (
        "LayoutLMv3Config",
        "LayoutLMv3Model",  # text and 2-D layout without the image: 1-D and 2-D relative position biases
        ["input_ids", "bbox", "attention_mask"],
        {"visual_embed": False, "coordinate_size": 8, "shape_size": 16},  # 4 * 8 + 2 * 16 = hidden 64
    ),
    "neomme": (
        "NeoMMEConfig",
        "NeoMMEModel",  # exclusive self-attention, sigmoid-gated projections, ReLU^2, low-rank embeddings,
        # a sliding-window then a full layer (partial rotary)
        ["input_ids", "attention_mask"],
        {
            "num_key_value_heads": 2,
            "head_dim": 16,
            "embedding_rank": 32,
            "sliding_window": 8,
            "layer_types": ["sliding_attention", "full_attention"],
            "per_layer_config": {},
            "patch_size": 8,
        },
    ),
    "longt5_enc": (
        "LongT5Config",
        "LongT5EncoderModel",  # transient-global attention: local blocks of radius 4 plus block-summary tokens
        ["input_ids", "attention_mask"],
        {
            "d_kv": 16,
            "d_ff": 128,
            "local_radius": 4,
            "encoder_attention_type": "transient-global",
            "global_block_size": 4,
        },
    ),
    "switch_transformers_enc": (
        "SwitchTransformersConfig",
        "SwitchTransformersEncoderModel",  # T5 with a top-1 routed expert layer (4 experts) after a dense one
        ["input_ids", "attention_mask"],
        {"d_kv": 16, "d_ff": 128, "num_experts": 4, "num_sparse_encoder_layers": 1},
    ),
}


def export_encoder(
    out: Path, family: str, attention: str = "eager", prefix: str | None = None, variants: tuple[str, ...] = STANDARD
) -> None:
    """A transformers encoder from ENCODERS in export_text's variants (last_hidden_state)."""

    config_name, model_name, names, extra = ENCODERS[family]
    model = tiny_transformer(config_name, model_name, extra, attention, max_position_embeddings=64)
    export_text(out, prefix or family, model, names, 18, variants)


# EXPORT_SIZES='{"hidden_size": 128, "intermediate_size": 192}' (JSON) exports the families
# that tiny_transformer builds at other sizes than the corpus's: rules must not depend on them
SIZES = json.loads(os.environ.get("EXPORT_SIZES", "{}"))


def tiny_transformer(config_name: str, model_name: str, extra: dict, attention: str, **arguments):
    """A random-weight transformers model of the corpus's size (2 layers, hidden 64, 4 heads,
    vocabulary 128; SIZES overrides them): ``arguments`` then the family's ``extra`` (a None
    there drops the key)."""
    import transformers

    arguments = dict(
        vocab_size=128,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        attn_implementation=attention,
        **arguments,
    )
    arguments.update(SIZES)
    arguments.update(extra)
    config = getattr(transformers, config_name)(**{k: v for k, v in arguments.items() if v is not None})
    return getattr(transformers, model_name)(config)


# ---- transformers vision models --------------------------------------------------------------------


def transformers_config(config_name: str, **arguments):
    """A transformers config (a backbone_config of another model), a None argument dropped."""
    import transformers

    return getattr(transformers, config_name)(**{k: v for k, v in arguments.items() if v is not None})


def vision_model(
    config_name: str,
    model_name: str,
    inputs: tuple = ("pixel_values",),
    output: str = "last_hidden_state",
    **arguments,
) -> nn.Module:
    """A transformers model of ``inputs`` (pixel_values unless told) returning ``output`` only
    (last_hidden_state unless told); a None argument is dropped."""
    import transformers

    model = getattr(transformers, model_name)(transformers_config(config_name, **arguments))
    return HiddenState(model, list(inputs), output).eval()


def export_vision(
    out: Path, prefix: str, model: nn.Module, size: int, variants: tuple[str, ...] = STANDARD, **inputs: torch.Tensor
) -> None:
    """A transformer over (batch, 3, size, size) images (and ``inputs``: name -> example) in
    export_variants' variants (dynamic batch)."""
    inputs = {"pixel_values": torch.randn(1, 3, size, size), **inputs}
    axes = {n: {0: "batch"} for n in inputs}
    export_variants(model, tuple(inputs.values()), list(inputs), axes, out, prefix, 18, variants)


VIT_SIZE = dict(
    image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128
)
SWIN_SIZE = dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=4)
# the Mix Transformer encoder of SegFormer, GLPN and PVT v2: two stages, the first with its
# keys and values spatially reduced by 2
MIT_SIZE = dict(
    num_encoder_blocks=2,
    depths=[1, 1],
    sr_ratios=[2, 1],
    hidden_sizes=[16, 32],
    num_attention_heads=[1, 2],
    patch_sizes=[7, 3],
    strides=[4, 2],
)


# DETR and Conditional DETR: a two-stage ResNet backbone (its last stage's map), 2 encoder and
# 2 decoder layers of width 64, 10 object queries; nothing from timm, nothing pretrained
DETR_SIZE = dict(
    use_timm_backbone=False,
    use_pretrained_backbone=False,
    backbone_config={
        "model_type": "resnet",
        "embedding_size": 16,
        "hidden_sizes": [16, 32],
        "depths": [1, 1],
        "out_features": ["stage2"],
    },
    encoder_layers=2,
    decoder_layers=2,
    d_model=64,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=128,
    decoder_ffn_dim=128,
    num_queries=10,
)


def export_audio(
    out: Path, prefix: str, config_name: str, model_name: str, variants: tuple[str, ...] = STANDARD, **arguments
) -> None:
    """A speech encoder over (batch, samples) of raw audio: two feature-extractor convs, the
    corpus's transformer size, dynamic batch and length."""
    model = vision_model(
        config_name,
        model_name,
        ("input_values",),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        conv_dim=(16, 16),
        conv_stride=(5, 2),
        conv_kernel=(10, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
        **arguments,
    )
    names = ["input_values"]
    axes = {"input_values": {0: "batch", 1: "samples"}}
    export_variants(model, (torch.randn(1, 1600),), names, axes, out, prefix, 18, variants)


def export_moonshine_encoder(out: Path) -> None:
    """Moonshine's encoder over (batch, 4000 samples) of raw audio: three strided convs (their
    kernels and strides fixed: 127/64, 7/3, 3/2; 9 frames), GroupNorm, partial rotary.  Dynamic
    batch only: the benchmarks' 800 samples leave the last conv no frame."""
    import transformers

    config = transformers.MoonshineConfig(**MOONSHINE_SIZE, attn_implementation="eager")
    names = ["input_values"]
    encoder = HiddenState(transformers.MoonshineModel(config).get_encoder(), names)
    export_variants(encoder, (torch.randn(1, 4000),), names, {"input_values": {0: "batch"}}, out, "moonshine_enc", 18)


def export_speecht5_encoder(out: Path, variants: tuple[str, ...] = STANDARD) -> None:
    """SpeechT5's encoder with its speech prenet over raw audio (as export_audio: two
    feature-extractor convs, a conv position embedding, dynamic batch and length), then
    sinusoidal positions and a relative position bias in attention."""
    from transformers import SpeechT5Config
    from transformers.models.speecht5.modeling_speecht5 import SpeechT5EncoderWithSpeechPrenet

    config = SpeechT5Config(
        vocab_size=128,
        hidden_size=64,
        encoder_layers=2,
        encoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_layers=2,
        decoder_attention_heads=4,
        decoder_ffn_dim=128,
        conv_dim=(16, 16),
        conv_stride=(5, 2),
        conv_kernel=(10, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
        apply_spec_augment=False,
        max_speech_positions=512,
        encoder_max_relative_position=16,
        speech_decoder_prenet_units=32,
        speaker_embedding_dim=16,
        speech_decoder_postnet_units=32,
    )
    names = ["input_values"]
    encoder = HiddenState(SpeechT5EncoderWithSpeechPrenet(config), names)
    axes = {"input_values": {0: "batch", 1: "samples"}}
    export_variants(encoder, (torch.randn(1, 1600),), names, axes, out, "speecht5_enc", 18, variants)


def export_clap_audio(out: Path) -> None:
    """CLAP's audio tower (HTSAT): a Swin transformer over a (batch, 1, 256 frames, 16 mel bins)
    spectrogram folded into a 64x64 image; dynamic batch."""
    model = vision_model(
        "ClapAudioConfig",
        "ClapAudioModel",
        ("input_features",),
        spec_size=64,
        num_mel_bins=16,
        window_size=4,
        patch_size=4,
        patch_stride=[4, 4],
        depths=[1, 1],
        num_attention_heads=[2, 4],
        patch_embeds_hidden_size=16,
        hidden_size=32,
        projection_dim=32,
        enable_fusion=False,
    )
    names = ["input_features"]
    axes = {"input_features": {0: "batch"}}
    export_variants(model, (torch.randn(1, 1, 256, 16),), names, axes, out, "clap_audio", 18)


def export_deit(
    out: Path, attention: str = "eager", prefix: str = "deit", variants: tuple[str, ...] = STANDARD
) -> None:
    """DeiT: ViT with a distillation token next to the class token."""
    model = vision_model("DeiTConfig", "DeiTModel", **VIT_SIZE, attn_implementation=attention)
    export_vision(out, prefix, model, 32, variants)


def export_swin(out: Path, variants: tuple[str, ...] = STANDARD) -> None:
    """Swin: shifted-window attention with a relative position bias, patch merging."""
    model = vision_model("SwinConfig", "SwinModel", **SWIN_SIZE, attn_implementation="eager")
    export_vision(out, "swin", model, 32, variants)


# ---- conv nets (torchvision's layouts, small) ----------------------------------------------------


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int, act: type, gate: type) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(channels, squeezed, 1), nn.Conv2d(squeezed, channels, 1)
        self.act, self.gate = act(), gate()

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: type | None = None) -> nn.Sequential:
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, *([act()] if act else []))


class InvertedResidual(nn.Module):
    """MobileNetV3 / EfficientNet MBConv: 1x1 expand, depthwise kxk, squeeze-excite, 1x1 project."""

    def __init__(self, cin: int, expanded: int, cout: int, k: int, stride: int, act: type, se: tuple | None) -> None:
        super().__init__()
        layers = [] if expanded == cin else [conv_bn(cin, expanded, 1, act=act)]
        layers.append(conv_bn(expanded, expanded, k, stride, groups=expanded, act=act))
        if se:
            squeezed, se_act, gate = se
            layers.append(SqueezeExcite(expanded, squeezed, se_act, gate))
        layers.append(conv_bn(expanded, cout, 1))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


class MobileNetV3(nn.Module):
    """mobilenet_v3_small's first blocks: HardSwish/ReLU, Hardsigmoid-gated SE, depthwise convs."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        hs, relu = nn.Hardswish, nn.ReLU
        blocks = [
            (16, 16, 16, 3, 2, relu, True),
            (16, 64, 24, 3, 2, relu, False),
            (24, 72, 24, 3, 1, relu, False),
            (24, 96, 40, 5, 2, hs, True),
            (40, 120, 40, 5, 1, hs, True),
        ]
        self.features = nn.Sequential(
            conv_bn(3, 16, 3, 2, act=hs),
            *[
                InvertedResidual(cin, e, cout, k, s, act, (max(8, e // 4), nn.ReLU, nn.Hardsigmoid) if se else None)
                for cin, e, cout, k, s, act, se in blocks
            ],
            conv_bn(40, 96, 1, act=hs),
        )
        self.classifier = nn.Sequential(nn.Linear(96, 128), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(128, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


class EfficientNet(nn.Module):
    """efficientnet_b0's first stages: SiLU, MBConv with Sigmoid-gated SE, depthwise convs."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        blocks = [(32, 32, 16, 3, 1), (16, 96, 24, 3, 2), (24, 144, 24, 3, 1), (24, 144, 40, 5, 2), (40, 240, 40, 5, 1)]
        self.features = nn.Sequential(
            conv_bn(3, 32, 3, 2, act=nn.SiLU),
            *[
                InvertedResidual(cin, e, cout, k, s, nn.SiLU, (max(4, cin // 4), nn.SiLU, nn.Sigmoid))
                for cin, e, cout, k, s in blocks
            ],
            conv_bn(40, 128, 1, act=nn.SiLU),
        )
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(128, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


class LayerNorm2d(nn.LayerNorm):
    """torchvision's: LayerNorm over channels of an NCHW tensor."""

    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.layer_scale = nn.Parameter(torch.empty(dim, 1, 1).uniform_(0.5, 1.5))  # not 1e-6: keep it visible

    def forward(self, x):
        y = self.mlp(self.norm(self.dwconv(x).permute(0, 2, 3, 1))).permute(0, 3, 1, 2)
        return x + self.layer_scale * y


class ConvNeXt(nn.Module):
    """convnext_tiny's layout, two stages of two blocks: depthwise 7x7, LayerNorm, GELU."""

    def __init__(self, classes: int = 10, dims: tuple = (32, 64)) -> None:
        super().__init__()
        layers = [nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0], eps=1e-6))]
        for i, dim in enumerate(dims):
            if i:
                layers.append(nn.Sequential(LayerNorm2d(dims[i - 1], eps=1e-6), nn.Conv2d(dims[i - 1], dim, 2, 2)))
            layers += [CNBlock(dim), CNBlock(dim)]
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(LayerNorm2d(dims[-1], eps=1e-6), nn.Flatten(1), nn.Linear(dims[-1], classes))

    def forward(self, x):
        return self.head(nn.functional.adaptive_avg_pool2d(self.features(x), 1))


def export_convnet(out: Path, prefix: str, model: nn.Module, variants: tuple[str, ...] = STANDARD) -> None:
    """The four variants (both exporters fold BatchNormalization into the convolutions) and
    {prefix}_ts_bn: TorchScript with BatchNormalization kept, as export_resnet does (when the
    model has any; with the standard variants only)."""
    model = model.eval()
    randomize_bn(model)
    names, x = ["pixel_values"], torch.randn(1, 3, 64, 64)
    export_variants(model, (x,), names, {"pixel_values": {0: "batch"}}, out, prefix, 18, variants)
    if variants != STANDARD or not any(isinstance(m, nn.BatchNorm2d) for m in model.modules()):
        return
    attempt(
        f"{prefix}_ts_bn",
        lambda: torch.onnx.export(
            model,
            (x,),
            out / f"{prefix}_ts_bn.onnx",
            dynamo=False,
            opset_version=17,
            do_constant_folding=False,
            input_names=names,
            training=torch.onnx.TrainingMode.PRESERVE,
        ),
    )


# ---- torch's own attention -------------------------------------------------------------------------


class TorchAttentionBlock(nn.Module):
    """A pre-norm block around torch's nn.MultiheadAttention (hidden 64, 4 heads), as
    torchvision's ViT and non-transformers models use it: one packed in_proj, sequence-first
    inside (batch_first transposes around it), an optional key padding mask (True = padding)."""

    def __init__(self, batch_first: bool, masked: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(64)
        self.attn = nn.MultiheadAttention(64, 4, batch_first=batch_first)
        self.masked = masked

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.norm(x)
        out, _ = self.attn(h, h, h, need_weights=False, key_padding_mask=mask if self.masked else None)
        return x + out


def export_torch_mha(out: Path) -> None:
    """torch_mha_{bf,sf}[_mask]_*: the block batch-first ([B, S, 64]) and sequence-first
    ([S, B, 64]), with and without a key padding mask, in the four variants."""
    for batch_first in (True, False):
        for masked in (False, True):
            model = TorchAttentionBlock(batch_first, masked)
            x = torch.randn(2, 10, 64) if batch_first else torch.randn(10, 2, 64)
            axes = {0: "batch", 1: "sequence"} if batch_first else {0: "sequence", 1: "batch"}
            args, names, dynamic = (x,), ["x"], {"x": axes}
            if masked:
                args, names = (x, torch.zeros(2, 10, dtype=torch.bool)), ["x", "key_padding_mask"]
                dynamic["key_padding_mask"] = {0: "batch", 1: "sequence"}
            prefix = f"torch_mha_{'bf' if batch_first else 'sf'}{'_mask' if masked else ''}"
            export_variants(model, args, names, dynamic, out, prefix, 18)


# ---- fp16 and quantized copies ---------------------------------------------------------------------


def export_fp16(out: Path, sources: list[tuple] | None = None) -> None:
    """fp16 copies (inputs and outputs stay fp32) of fresh exports: ``sources`` pairs an
    export function (out -> None) with the names of its exports to convert (FP16_SOURCES:
    BERT, GPT-2, ViT and Llama)."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp)
        for export, names in sources or FP16_SOURCES:
            export(source)
            for name in names:
                if (source / f"{name}.onnx").exists():
                    attempt(
                        f"{name}_fp16",
                        lambda: onnx.save(
                            convert_float_to_float16(onnx.load(source / f"{name}.onnx"), keep_io_types=True),
                            out / f"{name}_fp16.onnx",
                        ),
                    )


FP16_SOURCES = [
    (export_bert, ["bert_ts_static", "bert_ts_dynamic", "bert_dynamo"]),
    (export_gpt2, ["gpt2_ts_static", "gpt2_ts_dynamic"]),
    (export_vit, ["vit_ts_static", "vit_dynamo"]),
    (
        partial(export_decoder, family="llama"),
        ["llama_ts_static", "llama_ts_dynamic", "llama_dynamo", "llama_kv_ts_dynamic"],
    ),
]
FP16_MORE_SOURCES = [
    (partial(export_decoder, family="qwen2"), ["qwen2_ts_dynamic", "qwen2_kv_dynamo"]),
    (partial(export_decoder, family="phi3", kv=False), ["phi3_dynamo"]),
    (partial(export_decoder, family="gemma", kv=False), ["gemma_ts_dynamic"]),
    (export_clip_text, ["clip_text_ts_dynamic"]),
    (export_whisper_encoder, ["whisper_enc_dynamo"]),
    (export_deit, ["deit_ts_static"]),
    (lambda out: export_convnet(out, "convnext", ConvNeXt()), ["convnext_ts_static"]),
    (export_t5_encoder, ["t5_enc_ts_dynamic"]),
]


class RandomReader:
    """Calibration data for quantize_static: a few random batches shaped like the inputs
    (dynamic dims 1 for batch, 16 otherwise; ids < 100, masks 1, type ids 0)."""

    def __init__(self, path: Path, batches: int = 4) -> None:
        import numpy as np
        import onnx

        model = onnx.load(path, load_external_data=False)
        rng, self.feeds = np.random.default_rng(0), []
        initializers = {t.name for t in model.graph.initializer}
        inputs = [vi for vi in model.graph.input if vi.name not in initializers]
        for _ in range(batches):
            feed = {}
            for vi in inputs:
                dims = vi.type.tensor_type.shape.dim
                shape = [d.dim_value if d.HasField("dim_value") else (1 if i == 0 else 16) for i, d in enumerate(dims)]
                if vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
                    feed[vi.name] = rng.standard_normal(shape).astype(np.float32)
                elif "mask" in vi.name:
                    feed[vi.name] = np.ones(shape, np.int64)
                elif "type" in vi.name:
                    feed[vi.name] = np.zeros(shape, np.int64)
                else:
                    feed[vi.name] = rng.integers(0, 100, shape).astype(np.int64)
            self.feeds.append(feed)
        self.iterator = iter(self.feeds)

    def get_next(self):
        return next(self.iterator, None)

    def rewind(self):
        self.iterator = iter(self.feeds)


QUANT_SOURCES = [
    "bert_ts_static",
    "bert_ts_dynamic",
    "bert_dynamo",
    "resnet18_mini_bn",
    "mobilenetv3_ts_static",
    "efficientnet_ts_static",
]


def quantize(kind: str, source: Path, target: Path) -> None:
    """A quantized copy of the model at ``source``: qdq (quantize_static, random calibration,
    uint8 activations and int8 weights as QuantizeLinear/DequantizeLinear pairs), qdyn
    (quantize_dynamic, int8 weights) or q4 (MatMulNBitsQuantizer: 4-bit weight-only MatMulNBits,
    block 32, symmetric)."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static

    if kind == "qdq":
        quantize_static(
            source,
            target,
            RandomReader(source),
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
        )
    elif kind == "qdyn":
        quantize_dynamic(source, target, weight_type=QuantType.QInt8)
    elif kind == "q4":
        import onnx
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        quantizer = MatMulNBitsQuantizer(onnx.load(source), block_size=32, is_symmetric=True)
        quantizer.process()
        quantizer.model.save_model_to_file(str(target))
    else:
        raise ValueError(kind)


def quantized_copies(source: Path, out: Path, sources: dict[str, tuple[str, ...]]) -> None:
    """{name}_{kind}.onnx in ``out`` for each name -> kinds of ``sources`` exported in ``source``."""
    for name, kinds in sources.items():
        path = source / f"{name}.onnx"
        if path.exists():
            for kind in kinds:
                attempt(f"{name}_{kind}", lambda: quantize(kind, path, out / f"{name}_{kind}.onnx"))


def export_quant(out: Path) -> None:
    """QDQ (quantize_static, random calibration) and dynamic-quantized (quantize_dynamic)
    copies of fresh BERT and conv-net exports."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp)
        export_bert(source)
        export_resnet(source, width=8, name="resnet18_mini_bn.onnx")
        export_convnet(source, "mobilenetv3", MobileNetV3())
        export_convnet(source, "efficientnet", EfficientNet())
        quantized_copies(source, out, dict.fromkeys(QUANT_SOURCES, ("qdq", "qdyn")))


# name -> the quantized copies quant_llm makes of it
QUANT_LLM_SOURCES = {
    "llama_ts_dynamic": ("q4", "qdyn"),
    "llama_dynamo": ("q4",),
    "qwen2_ts_dynamic": ("q4",),
    "qwen2_dynamo": ("q4",),
    "vit_ts_static": ("qdq",),
}


def export_quant_llm(out: Path) -> None:
    """4-bit weight-only copies (MatMulNBits) of fresh Llama and Qwen2 exports, an int8
    dynamic-quantized Llama and a QDQ ViT (QUANT_LLM_SOURCES)."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp)
        for family in ("llama", "qwen2"):
            export_decoder(source, family, kv=False, variants=("ts_dynamic", "dynamo"))
        export_vit(source, variants=("ts_static",))
        quantized_copies(source, out, QUANT_LLM_SOURCES)


def beit() -> nn.Module:
    return vision_model("BeitConfig", "BeitModel", **VIT_SIZE, use_relative_position_bias=True)


def dinov2() -> nn.Module:
    return vision_model("Dinov2Config", "Dinov2Model", **VIT_SIZE)


def hf_resnet() -> nn.Module:  # bottleneck blocks
    return vision_model("ResNetConfig", "ResNetModel", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1])


# exporter settings: name -> a model's export (out, variants= -> None)
SETTING_SOURCES = {
    "llama": partial(export_decoder, family="llama", kv=False),
    "llama_sdpa": partial(export_decoder, family="llama", attention="sdpa", prefix="llama_sdpa", kv=False),
    "qwen2": partial(export_decoder, family="qwen2", kv=False),
    "qwen2_sdpa": partial(export_decoder, family="qwen2", attention="sdpa", prefix="qwen2_sdpa", kv=False),
    "phi3": partial(export_decoder, family="phi3", kv=False),
    "bert": export_bert,
    "bert_sdpa": partial(export_bert, attention="sdpa", prefix="bert_sdpa"),
    "gpt2": export_gpt2,
    "vit": export_vit,
    "vit_sdpa": partial(export_vit, attention="sdpa", prefix="vit_sdpa"),
    "whisper_enc": export_whisper_encoder,
    # dynamo_dynamic's
    "distilbert": export_distilbert,
    **{f: partial(export_encoder, family=f) for f in ("roberta", "albert", "electra", "deberta_v2", "mpnet")},
    **{f: partial(export_decoder, family=f, kv=False) for f in ("mistral", "gemma", "qwen3", "gpt_neox")},
    "t5_enc": export_t5_encoder,
    "clip_text": export_clip_text,
    "bart_enc": export_bart_encoder,
    "deit": export_deit,
    "swin": export_swin,
    "beit": lambda out, variants: export_vision(out, "beit", beit(), 32, variants),
    "dinov2": lambda out, variants: export_vision(out, "dinov2", dinov2(), 32, variants),
    "resnet18": lambda out, variants: export_convnet(out, "resnet18", ResNet18(), variants),
    "mobilenetv3": lambda out, variants: export_convnet(out, "mobilenetv3", MobileNetV3(), variants),
    "convnext": lambda out, variants: export_convnet(out, "convnext", ConvNeXt(), variants),
    "hf_resnet": lambda out, variants: export_convnet(out, "hf_resnet", hf_resnet(), variants),
    **{f: partial(export_seq2seq_decoder, family=f) for f in ("whisper_dec", "t5_dec", "bart_dec", "moonshine_dec")},
    # dynamo_dynamic_more's
    "wav2vec2": lambda out, variants: export_audio(
        out, "wav2vec2", "Wav2Vec2Config", "Wav2Vec2Model", variants, feat_extract_norm="group"
    ),
    "hubert": lambda out, variants: export_audio(out, "hubert", "HubertConfig", "HubertModel", variants),
    "speecht5_enc": export_speecht5_encoder,
    **{f: partial(export_decoder, family=f, kv=False) for f in ("olmo3", "ernie4_5", "cohere2", "glm4", "gpt_oss")},
    "llama4": partial(export_llama4, kv=False),
}
# FAMILY -> (the VARIANTS entry, the SETTING_SOURCES exported in it); at opset 23 the SDPA models
# become ONNX Attention ops
SETTINGS = {
    "opset23": (
        "dynamo_opset23",
        ["llama", "llama_sdpa", "qwen2", "qwen2_sdpa", "phi3", "bert", "bert_sdpa", "vit", "vit_sdpa", "whisper_enc"],
    ),
    "noopt": ("dynamo_noopt", ["llama", "bert", "vit", "whisper_enc"]),
    "nofold": ("ts_dynamic_nofold", ["llama", "bert", "gpt2"]),
    # dynamo with ts_dynamic's dynamic axes (text: batch and sequence; images: batch)
    "dynamo_dynamic": (
        "dynamo_dynamic",
        ["bert", "distilbert", "roberta", "albert", "electra", "deberta_v2", "mpnet", "gpt2"]
        + ["llama", "qwen2", "mistral", "phi3", "gemma", "qwen3", "gpt_neox"]
        + ["whisper_enc", "t5_enc", "clip_text", "bart_enc", "vit", "deit", "swin", "beit", "dinov2"]
        + ["resnet18", "mobilenetv3", "convnext", "hf_resnet", "whisper_dec", "t5_dec", "bart_dec"],
    ),
    # the same of speech encoders (batch and samples) and newer decoders (four without TorchScript exports)
    "dynamo_dynamic_more": (
        "dynamo_dynamic",
        ["wav2vec2", "hubert", "speecht5_enc", "olmo3", "ernie4_5", "cohere2", "glm4", "gpt_oss", "llama4"]
        + ["moonshine_dec"],
    ),
    # the same of corpus 8's decoders (hybrids included), encoders, vision towers, video, speech
    # and seq2seq decoders (their SETTING_SOURCES are added after the corpus 8 EXPORTS)
    "dynamo_dynamic_8": (
        "dynamo_dynamic",
        ["phi4_mini", "ministral3", "gemma4", "dots1", "glm4_moe", "ernie4_5_moe", "afmoe", "mistral4"]
        + ["qwen2_5_vl", "qwen3_next", "qwen3_5", "falcon_h1", "granite4", "nemotron_h", "lfm2", "mamba2"]
        + ["eurobert", "roc_bert", "xmod", "dinov3_vit", "aimv2_vision", "internvl_vision", "videomae"]
        + ["vivit", "timesformer", "wav2vec2_conformer", "wav2vec2_bert", "parakeet_enc", "dac_enc"]
        + ["led_dec", "musicgen_dec"],
    ),
    # the same of corpus 10's decoders, encoders and vision models (SETTING_SOURCES added after its EXPORTS)
    "dynamo_dynamic_10": (
        "dynamo_dynamic",
        ["internlm3", "hyperclovax", "youtu", "mellum", "longcat_flash", "hy_v4", "deepseek_v4", "lfm3", "zaya"]
        + ["gte", "nomic_bert", "jina_embeddings_v3", "xlm_roberta_xl", "deberta", "esmc", "embedding_gemma2_text"]
        + ["openai_privacy_filter", "fnet", "mlcd_vision", "radio", "sapiens2", "pvt", "pp_lcnet"],
    ),
    # the same of corpus 12's where it exports and runs at other sizes (SETTING_SOURCES added after its EXPORTS)
    "dynamo_dynamic_12": (
        "dynamo_dynamic",
        ["exaone", "gpt_neox_japanese", "openai_gpt", "sarvam_mla", "sarvam_moe", "glm_moe_dsa", "minicpm5_moe"]
        + ["lara_mini", "kolibri1", "qwen4_exp_text", "apertus1p5_text", "hrm_text", "inkling2_text", "bros"]
        + ["layoutlmv3", "neomme", "dpr", "mvp_enc", "groupvit_vision", "swin2sr", "lw_detr_vit", "superpoint"]
        + ["vitmatte", "lasr_enc", "qwen2_audio_enc", "glmasr_enc"],
    ),
}


def export_setting(out: Path, setting: str) -> None:
    variant, sources = SETTINGS[setting]
    for source in sources:  # a model that fails to build does not stop the others
        attempt(f"{source}_{variant}", partial(SETTING_SOURCES[source], out, variants=(variant,)))


EXPORTS = {
    "resnet": lambda out: (export_resnet(out), export_resnet(out, width=8, name="resnet18_mini_bn.onnx")),
    "bert": lambda out: (export_bert(out), export_bert(out, attention="sdpa", prefix="bert_sdpa")),
    "bert48": lambda out: export_bert(out, layers=48, prefix="bert48"),  # the speed benchmark's
    "distilbert": lambda out: (export_distilbert(out), export_distilbert(out, "sdpa", "distilbert_sdpa")),
    "gpt2": lambda out: (export_gpt2(out), export_gpt2(out, "sdpa", "gpt2_sdpa")),
    "vit": lambda out: (export_vit(out), export_vit(out, "sdpa", "vit_sdpa")),
    "llama": lambda out: (export_decoder(out, "llama"), export_decoder(out, "llama", "sdpa", "llama_sdpa", kv=False)),
    "qwen2": lambda out: export_decoder(out, "qwen2"),
    "mistral": lambda out: export_decoder(out, "mistral"),
    "phi3": lambda out: export_decoder(out, "phi3"),
    "gpt_neox": lambda out: export_decoder(out, "gpt_neox"),
    "falcon": lambda out: export_decoder(out, "falcon"),
    "whisper_enc": export_whisper_encoder,
    "t5_enc": export_t5_encoder,
    "clip_text": export_clip_text,
    "bart_enc": export_bart_encoder,
    "encoders_dyn14": export_encoders_dyn14,
    "mobilenetv3": lambda out: export_convnet(out, "mobilenetv3", MobileNetV3()),
    "efficientnet": lambda out: export_convnet(out, "efficientnet", EfficientNet()),
    "convnext": lambda out: export_convnet(out, "convnext", ConvNeXt()),
    "gemma": lambda out: export_decoder(out, "gemma"),
    "qwen3": lambda out: export_decoder(out, "qwen3"),
    "gptj": lambda out: export_decoder(out, "gptj"),
    "phi": lambda out: export_decoder(out, "phi"),
    "stablelm": lambda out: export_decoder(out, "stablelm"),
    "olmo": lambda out: export_decoder(out, "olmo"),
    "granite": lambda out: export_decoder(out, "granite"),
    "starcoder2": lambda out: export_decoder(out, "starcoder2"),
    "gpt_bigcode": lambda out: export_decoder(out, "gpt_bigcode"),
    "opt": lambda out: export_decoder(out, "opt"),
    "llama4": export_llama4,
    "deepseek_v2": export_deepseek_v2,
    # position_ids as an input, as optimum exports decoders (with dynamic axes, and a step with a cache)
    "positions": lambda out: [
        export_decoder(out, f, prefix=f"{f}_pos", variants=("ts_dynamic", "dynamo_dynamic"), positions=True)
        for f in ("llama", "qwen2", "mistral", "phi3", "gemma", "qwen3", "gpt_neox", "stablelm", "gptj", "phi")
        + ("gemma3", "cohere", "cohere2", "glm", "glm4", "ernie4_5", "deepseek_v3", "olmo3", "gemma3n", "gpt_oss")
        + ("falcon", "starcoder2", "granite", "olmo2", "mixtral", "qwen2_moe", "persimmon", "helium", "smollm3")
        + ("phi4_mini", "minicpm3", "hunyuan_v1_dense")
    ],
    "roberta": lambda out: (export_encoder(out, "roberta"), export_encoder(out, "roberta", "sdpa", "roberta_sdpa")),
    "xlm_roberta": lambda out: export_encoder(out, "xlm_roberta"),
    "electra": lambda out: export_encoder(out, "electra"),
    "albert": lambda out: (export_encoder(out, "albert"), export_encoder(out, "albert", "sdpa", "albert_sdpa")),
    "mpnet": lambda out: export_encoder(out, "mpnet"),
    "deberta_v2": lambda out: export_encoder(out, "deberta_v2"),
    "deit": lambda out: (export_deit(out), export_deit(out, "sdpa", "deit_sdpa")),
    "swin": export_swin,
    # transformers conv nets at 64x64 through export_convnet (so also *_ts_bn)
    "hf_mobilenetv2": lambda out: export_convnet(
        out,
        "hf_mobilenetv2",
        vision_model(
            "MobileNetV2Config", "MobileNetV2Model", image_size=64, depth_multiplier=0.35, finegrained_output=False
        ),
    ),
    "hf_resnet": lambda out: export_convnet(out, "hf_resnet", hf_resnet()),
    "hf_regnet": lambda out: export_convnet(
        out,
        "hf_regnet",  # grouped convs, squeeze-excite
        vision_model(
            "RegNetConfig", "RegNetModel", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], groups_width=8
        ),
    ),
    "fp16": export_fp16,
    "fp16_more": partial(export_fp16, sources=FP16_MORE_SOURCES),
    "quant": export_quant,
    "quant_llm": export_quant_llm,
    # vision transformers at 32x32 (patch 8, hidden 64, 2 layers, 4 heads)
    "beit": lambda out: export_vision(out, "beit", beit(), 32),
    "dinov2": lambda out: export_vision(out, "dinov2", dinov2(), 32),
    "data2vec_vision": lambda out: export_vision(
        out, "data2vec_vision", vision_model("Data2VecVisionConfig", "Data2VecVisionModel", **VIT_SIZE), 32
    ),
    "siglip_vision": lambda out: export_vision(
        out, "siglip_vision", vision_model("SiglipVisionConfig", "SiglipVisionModel", **VIT_SIZE), 32
    ),
    "clip_vision": lambda out: export_vision(
        out, "clip_vision", vision_model("CLIPVisionConfig", "CLIPVisionModel", **VIT_SIZE), 32
    ),
    "yolos": lambda out: export_vision(
        out,
        "yolos",
        vision_model("YolosConfig", "YolosModel", **{**VIT_SIZE, "image_size": [32, 32]}, num_detection_tokens=4),
        32,
    ),
    "swinv2": lambda out: export_vision(
        out,
        "swinv2",  # scaled cosine attention, continuous position bias (an MLP), post-norm
        vision_model("Swinv2Config", "Swinv2Model", **SWIN_SIZE),
        32,
    ),
    # transformers conv / hybrid nets at 64x64 through export_convnet
    "convnextv2": lambda out: export_convnet(
        out,
        "convnextv2",
        vision_model("ConvNextV2Config", "ConvNextV2Model", num_stages=2, hidden_sizes=[16, 32], depths=[1, 1]),
    ),  # global response normalization
    "poolformer": lambda out: export_convnet(
        out,
        "poolformer",  # GroupNorm(1), average-pool token mixer, LayerScale
        vision_model(
            "PoolFormerConfig",
            "PoolFormerModel",
            hidden_sizes=[16, 32],
            depths=[1, 1],
            num_encoder_blocks=2,
            patch_sizes=[7, 3],
            strides=[4, 2],
            padding=[2, 1],
        ),
    ),
    "bit": lambda out: export_convnet(
        out,
        "bit",  # weight-standardized convs, pre-activation, GroupNorm
        vision_model("BitConfig", "BitModel", embedding_size=32, hidden_sizes=[128, 256], depths=[1, 1]),
    ),
    "segformer": lambda out: export_convnet(
        out,
        "segformer",  # overlapping patch embeddings, reduced-key attention, Mix-FFN depthwise conv
        vision_model("SegformerConfig", "SegformerModel", **MIT_SIZE, decoder_hidden_size=32),
    ),
    "mobilevit": lambda out: export_convnet(
        out,
        "mobilevit",  # convs unfolded into patches for attention and folded back
        vision_model(
            "MobileViTConfig",
            "MobileViTModel",
            image_size=64,
            hidden_sizes=[32, 40, 48],
            neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
        ),
    ),
    "levit": lambda out: export_convnet(
        out,
        "levit",  # BatchNorm-ed linear layers, attention with biases, Hardswish
        vision_model(
            "LevitConfig",
            "LevitModel",
            image_size=64,
            hidden_sizes=[32, 48],
            num_attention_heads=[2, 3],
            depths=[1, 1],
            key_dim=[8, 8],
            drop_path_rate=0,
            mlp_ratio=[2, 2],
            attention_ratio=[2, 2],
            down_ops=[["Subsample", 8, 2, 4, 2, 2]],
        ),
    ),
    "hf_efficientnet": lambda out: export_convnet(
        out,
        "hf_efficientnet",
        vision_model(
            "EfficientNetConfig",
            "EfficientNetModel",
            image_size=64,
            width_coefficient=0.25,
            depth_coefficient=0.2,
            hidden_dim=320,
        ),
    ),
    "mobilenet_v1": lambda out: export_convnet(
        out, "mobilenet_v1", vision_model("MobileNetV1Config", "MobileNetV1Model", image_size=64, depth_multiplier=0.25)
    ),
    # speech encoders over raw audio (a conv feature extractor, a conv position embedding)
    "wav2vec2": lambda out: export_audio(out, "wav2vec2", "Wav2Vec2Config", "Wav2Vec2Model", feat_extract_norm="group"),
    "wav2vec2_stable": lambda out: export_audio(
        out, "wav2vec2_stable", "Wav2Vec2Config", "Wav2Vec2Model", feat_extract_norm="layer", do_stable_layer_norm=True
    ),
    "hubert": lambda out: export_audio(out, "hubert", "HubertConfig", "HubertModel"),
    "wavlm": lambda out: export_audio(out, "wavlm", "WavLMConfig", "WavLMModel"),  # gated relative position bias
    "sew": lambda out: export_audio(out, "sew", "SEWConfig", "SEWModel", squeeze_factor=2),  # squeezed sequence
    "sew_d": lambda out: export_audio(
        out, "sew_d", "SEWDConfig", "SEWDModel", squeeze_factor=2, position_buckets=16, max_relative_positions=32
    ),  # disentangled attention as DeBERTa-v2
    "data2vec_audio": lambda out: export_audio(out, "data2vec_audio", "Data2VecAudioConfig", "Data2VecAudioModel"),
    "unispeech": lambda out: export_audio(out, "unispeech", "UniSpeechConfig", "UniSpeechModel"),
    "ast": lambda out: export_variants(
        vision_model(  # a ViT over (batch, frames, mel bins) spectrograms, overlapping patches
            "ASTConfig",
            "ASTModel",
            ("input_values",),
            **VIT_SIZE,
            max_length=32,
            num_mel_bins=16,
            frequency_stride=4,
            time_stride=4,
        ),
        (torch.randn(1, 32, 16),),
        ["input_values"],
        {"input_values": {0: "batch"}},
        out,
        "ast",
        18,
    ),
    # more vision transformers at 32x32
    "vit_mae": lambda out: export_vision(
        out,
        "vit_mae",  # patches shuffled by argsort of a noise input (mask_ratio 0 keeps them all)
        vision_model("ViTMAEConfig", "ViTMAEModel", ("pixel_values", "noise"), **VIT_SIZE, mask_ratio=0.0),
        32,
        noise=torch.rand(1, 16),
    ),
    "vit_msn": lambda out: export_vision(out, "vit_msn", vision_model("ViTMSNConfig", "ViTMSNModel", **VIT_SIZE), 32),
    "ijepa": lambda out: export_vision(out, "ijepa", vision_model("IJepaConfig", "IJepaModel", **VIT_SIZE), 32),
    "dpt": lambda out: export_vision(out, "dpt", vision_model("DPTConfig", "DPTModel", **VIT_SIZE), 32),
    # more transformers conv and hybrid nets at 64x64
    "pvt_v2": lambda out: export_convnet(
        out,
        "pvt_v2",  # overlapping patch embeddings, spatial-reduction attention, depthwise-conv MLP
        vision_model("PvtV2Config", "PvtV2Model", image_size=64, **MIT_SIZE, mlp_ratios=[2, 2]),
    ),
    "glpn": lambda out: export_convnet(
        out,
        "glpn",  # SegFormer-like encoder
        vision_model("GLPNConfig", "GLPNModel", **MIT_SIZE, mlp_ratios=[2, 2], decoder_hidden_size=32),
    ),
    "cvt": lambda out: export_convnet(
        out,
        "cvt",  # convolutional q/k/v projections (depthwise conv + BatchNorm), a class token in the last stage
        vision_model(
            "CvtConfig",
            "CvtModel",
            patch_sizes=[7, 3],
            patch_stride=[4, 2],
            patch_padding=[2, 1],
            embed_dim=[16, 32],
            num_heads=[1, 2],
            depth=[1, 2],  # stage i indexes a list of depth[i] drop-path rates: depth[i] > i
            mlp_ratio=[2.0, 2.0],
            attention_drop_rate=[0.0, 0.0],
            drop_rate=[0.0, 0.0],
            drop_path_rate=[0.0, 0.0],
            qkv_bias=[True, True],
            cls_token=[False, True],
            qkv_projection_method=["dw_bn", "dw_bn"],
            kernel_qkv=[3, 3],
            padding_kv=[1, 1],
            stride_kv=[2, 2],
            padding_q=[1, 1],
            stride_q=[1, 1],
        ),
    ),
    "focalnet": lambda out: export_convnet(
        out,
        "focalnet",  # focal modulation: gated depthwise convs in place of attention
        vision_model(
            "FocalNetConfig",
            "FocalNetModel",
            image_size=64,
            patch_size=4,
            embed_dim=16,
            depths=[1, 1],
            focal_levels=[2, 2],
            focal_windows=[3, 3],
        ),
    ),
    "swiftformer": lambda out: export_convnet(
        out,
        "swiftformer",  # efficient additive attention, BatchNorm-ed conv stages
        vision_model(
            "SwiftFormerConfig",
            "SwiftFormerModel",
            image_size=64,
            depths=[1, 1],
            embed_dims=[16, 32],
            downsamples=[True, True],
        ),
    ),
    "mobilevitv2": lambda out: export_convnet(
        out,
        "mobilevitv2",  # separable linear attention over unfolded patches
        vision_model("MobileViTV2Config", "MobileViTV2Model", image_size=64, width_multiplier=0.25),
    ),
    "hiera": lambda out: export_convnet(
        out,
        "hiera",  # hierarchical ViT with mask-unit attention and query pooling
        vision_model(
            "HieraConfig",
            "HieraModel",
            image_size=[64, 64],
            patch_size=[7, 7],
            patch_stride=[4, 4],
            patch_padding=[3, 3],
            embed_dim=16,
            num_heads=[1, 2],
            depths=[1, 1],
            query_stride=[2, 2],
            num_query_pool=1,
            masked_unit_size=[8, 8],
            masked_unit_attention=[True, False],
        ),
    ),
    # detection, depth and pose models: conv or ViT backbones with heads
    "detr": lambda out: export_convnet(
        out,
        "detr",  # ResNet (frozen BatchNorm) + sine positions + encoder-decoder over 10 object queries
        vision_model("DetrConfig", "DetrModel", **DETR_SIZE),
    ),
    "conditional_detr": lambda out: export_convnet(
        out,
        "conditional_detr",  # DETR with conditional spatial queries (reference points, split q/k content and position)
        vision_model("ConditionalDetrConfig", "ConditionalDetrModel", **DETR_SIZE),
    ),
    "dinov2_with_registers": lambda out: export_vision(
        out,
        "dinov2_with_registers",  # 4 register tokens; TorchScript: bicubic antialiased position interpolation fails
        vision_model("Dinov2WithRegistersConfig", "Dinov2WithRegistersModel", **VIT_SIZE, num_register_tokens=4),
        32,
    ),
    "depth_anything": lambda out: export_vision(
        out,
        "depth_anything",  # DPT neck (reassemble, fusion with bilinear upsampling) and head over a DINOv2 backbone
        vision_model(
            "DepthAnythingConfig",
            "DepthAnythingForDepthEstimation",
            output="predicted_depth",
            backbone_config=transformers_config(
                "Dinov2Config", **VIT_SIZE, out_features=["stage1", "stage2"], reshape_hidden_states=False
            ),
            patch_size=8,
            reassemble_hidden_size=64,
            reassemble_factors=[2, 1],
            neck_hidden_sizes=[16, 32],
            fusion_hidden_size=16,
            head_hidden_size=8,
        ),
        32,
    ),
    "vitdet": lambda out: export_vision(
        out,
        "vitdet",  # windowed attention (layer 0), decomposed relative positions, a residual conv block (layer 1)
        vision_model(
            "VitDetConfig",
            "VitDetModel",
            **{**VIT_SIZE, "intermediate_size": None},
            mlp_ratio=2,
            pretrain_image_size=32,
            window_block_indices=[0],
            residual_block_indices=[1],
            use_relative_position_embeddings=True,
            window_size=2,
        ),
        32,
    ),
    "vitpose": lambda out: export_vision(
        out,
        "vitpose",  # a ViT backbone, a simple decoder (ReLU, bilinear upsampling, a conv) to keypoint heatmaps
        vision_model(
            "VitPoseConfig",
            "VitPoseForPoseEstimation",
            output="heatmaps",
            backbone_config=transformers_config(
                "VitPoseBackboneConfig",
                **{**VIT_SIZE, "intermediate_size": None, "image_size": [32, 32], "patch_size": [8, 8]},
                mlp_ratio=2,
                out_indices=[2],
            ),
        ),
        32,
    ),
    "textnet": lambda out: export_convnet(
        out,
        "textnet",  # asymmetric 1x3 / 3x1 convs, BatchNorm
        vision_model(
            "TextNetConfig",
            "TextNetModel",
            image_size=64,
            stem_out_channels=16,
            hidden_sizes=[16, 16, 32],
            conv_layer_kernel_sizes=[[[3, 3], [1, 3]], [[3, 3], [3, 1]]],
            conv_layer_strides=[[1, 2], [2, 1]],
        ),
    ),
}
EXPORTS["torch_mha"] = export_torch_mha
SDPA_DECODERS = ("qwen2", "mistral", "qwen3", "gemma", "falcon")
EXPORTS["decoders_sdpa"] = lambda out: [
    attempt(
        f"{family}_sdpa",
        partial(
            export_decoder,
            out,
            family,
            attention="sdpa",
            prefix=f"{family}_sdpa",
            variants=("ts_dynamic", "dynamo", "dynamo_dynamic"),
        ),
    )
    for family in SDPA_DECODERS
]


def export_prefill(out: Path, family: str, attention: str = "eager") -> None:
    """{family}_{attention}_prefill_{ts_dynamic,dynamo}: the prompt's step of a cached
    generation, no past inputs, the logits and every layer's present key and value as
    outputs (batch and sequence dynamic in TorchScript)."""
    step = Decoder(decoder_model(family, attention), cache=True).eval().requires_grad_(False)
    names = ["input_ids", "attention_mask"]
    arguments = text_inputs(names)
    with torch.no_grad():
        layers = (len(step(*arguments)) - 1) // 2
    outputs = ["logits"] + [f"present.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    axes = {n: {0: "batch", 1: "seq"} for n in (*names, "logits")} | {n: {0: "batch", 2: "seq"} for n in outputs[1:]}
    prefix = f"{family}_{attention}_prefill"
    settings = {"ts_dynamic": {"dynamic_axes": axes, "opset_version": 17, "dynamo": False}}
    settings["dynamo"] = {"opset_version": 18, "dynamo": True}
    for variant, setting in settings.items():
        attempt(
            f"{prefix}_{variant}",
            partial(
                torch.onnx.export,
                step,
                arguments,
                out / f"{prefix}_{variant}.onnx",
                input_names=names,
                output_names=outputs,
                **setting,
            ),
        )


PREFILL_DECODERS = ("llama", "qwen2", "mistral", "phi3", "gemma", "qwen3", "gpt_neox", "falcon", "stablelm")
EXPORTS["prefill"] = lambda out: (
    [export_prefill(out, family, attention) for family in PREFILL_DECODERS for attention in ("eager", "sdpa")]
    + [export_prefill(out, "gemma2")]
)

# Rotary scaling as long-context checkpoints configure it (head size 16: 8 angles)
ROPE_SCALING = {
    "llama_yarn": ("llama", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}),
    "qwen2_yarn": ("qwen2", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}),
    "llama_llama3": (
        "llama",
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        },
    ),
    "llama_linear": ("llama", {"rope_type": "linear", "factor": 2.0}),
    "llama_dynamic": ("llama", {"rope_type": "dynamic", "factor": 2.0}),
    "phi3_longrope": (
        "phi3",
        {
            "rope_type": "longrope",
            "short_factor": [1.0 + i / 10 for i in range(8)],
            "long_factor": [2.0 + i / 10 for i in range(8)],
            "original_max_position_embeddings": 32,
        },
    ),
}


def export_rope_scaling(out: Path, name: str) -> None:
    """{name}[_kv]_{ts_dynamic,dynamo}: a decoder family with a rotary scaling config (YaRN's
    attention factor scales cos and sin; Llama 3's and LongRoPE's rescale the frequencies)."""
    family, rope = ROPE_SCALING[name]
    config, model, extra = DECODERS[family]
    DECODERS[name] = (config, model, {**extra, "rope_parameters": {"rope_theta": 10000.0, **rope}})
    export_decoder(out, name, variants=("ts_dynamic", "dynamo"))


EXPORTS["rope_scaling"] = lambda out: [attempt(name, partial(export_rope_scaling, out, name)) for name in ROPE_SCALING]


def export_half(out: Path) -> None:
    """float16 in torch (``model.half()``), float16 inputs and outputs: decoders (eager and,
    for three, SDPA) and BERT, GPT-2 and ViT, as {name}_half_{ts_dynamic,dynamo}."""
    variants = ("ts_dynamic", "dynamo")
    for family in ("llama", "qwen2", "phi3", "gemma", "gpt_neox", "mistral", "qwen3", "falcon"):
        attempt(
            f"{family}_half",
            partial(export_decoder, out, family, prefix=f"{family}_half", variants=variants, half=True),
        )
    for family in ("llama", "qwen2", "gemma"):
        attempt(
            f"{family}_sdpa_half",
            partial(
                export_decoder,
                out,
                family,
                attention="sdpa",
                prefix=f"{family}_sdpa_half",
                variants=variants,
                half=True,
            ),
        )
    for attention in ("eager", "sdpa"):
        export_bert(out, prefix=f"bert_{attention}_half", attention=attention, variants=variants, half=True)
        export_gpt2(out, attention, f"gpt2_{attention}_half", variants, half=True)
        export_vit(out, attention, f"vit_{attention}_half", variants, half=True)


EXPORTS["half"] = export_half
EXPORTS.update(
    {
        # newer vision models: 32x32 transformers, 64x64 detection and segmentation
        "owlvit_vision": lambda out: export_vision(
            out, "owlvit_vision", vision_model("OwlViTVisionConfig", "OwlViTVisionModel", **VIT_SIZE), 32
        ),  # CLIP's vision tower, pre-LayerNorm on the patches, quick GELU
        "blip_vision": lambda out: export_vision(
            out, "blip_vision", vision_model("BlipVisionConfig", "BlipVisionModel", **VIT_SIZE), 32
        ),
        "chinese_clip_vision": lambda out: export_vision(
            out,
            "chinese_clip_vision",
            vision_model("ChineseCLIPVisionConfig", "ChineseCLIPVisionModel", **VIT_SIZE),
            32,
        ),
        "sam_vision": lambda out: export_vision(
            out,
            "sam_vision",  # windowed and global attention with decomposed relative positions, a conv neck
            vision_model(
                "SamVisionConfig",
                "SamVisionModel",
                hidden_size=64,
                output_channels=32,
                num_hidden_layers=2,
                num_attention_heads=4,
                image_size=64,
                patch_size=8,
                window_size=4,
                global_attn_indexes=[1],
                mlp_dim=128,
            ),
            64,
        ),
        "rt_detr": lambda out: export_convnet(
            out,
            "rt_detr",  # ResNet-D backbone, hybrid encoder (AIFI + CCFM), multi-scale deformable attention
            vision_model(
                "RTDetrConfig",
                "RTDetrModel",
                backbone_config=transformers_config(
                    "RTDetrResNetConfig",
                    embedding_size=16,
                    hidden_sizes=[16, 32, 64, 128],
                    depths=[1, 1, 1, 1],
                    layer_type="basic",
                    out_features=["stage2", "stage3", "stage4"],
                ),
                encoder_in_channels=[32, 64, 128],
                encoder_hidden_dim=64,
                encoder_ffn_dim=128,
                encoder_attention_heads=4,
                d_model=64,
                decoder_in_channels=[64, 64, 64],
                decoder_ffn_dim=128,
                decoder_attention_heads=4,
                decoder_layers=2,
                num_queries=10,
                num_denoising=0,
            ),
        ),
        "upernet": lambda out: export_convnet(
            out,
            "upernet",  # a ConvNeXt backbone, pyramid pooling and an FPN to per-pixel logits
            vision_model(
                "UperNetConfig",
                "UperNetForSemanticSegmentation",
                output="logits",
                backbone_config=transformers_config(
                    "ConvNextConfig",
                    num_stages=2,
                    hidden_sizes=[16, 32],
                    depths=[1, 1],
                    out_features=["stage1", "stage2"],
                ),
                hidden_size=32,
                pool_scales=[1, 2],
                use_auxiliary_head=False,
                num_labels=4,
            ),
        ),
        "moonshine_enc": export_moonshine_encoder,
        "speecht5_enc": export_speecht5_encoder,
        "clap_audio": export_clap_audio,
    }
)
# ---- corpus 8: video, newer vision towers, detection, audio codecs -----------------------------


class CodecEncoder(nn.Module):
    """A neural audio codec's encode(input_values) -> one of its outputs (audio_codes unless told)."""

    def __init__(self, inner: nn.Module, output: str = "audio_codes") -> None:
        super().__init__()
        self.inner, self.output = inner, output

    def forward(self, input_values):
        return getattr(self.inner.encode(input_values), self.output)


def export_codec(
    out: Path,
    prefix: str,
    config_name: str,
    model_name: str,
    output: str = "audio_codes",
    variants: tuple[str, ...] = STANDARD,
    **arguments,
) -> None:
    """A codec's encoder (and quantizer) over (batch, 1, 1600 samples) of mono audio, dynamic batch
    and length."""
    import transformers

    model = CodecEncoder(getattr(transformers, model_name)(transformers_config(config_name, **arguments)), output)
    axes = {"input_values": {0: "batch", 2: "samples"}}
    export_variants(model.eval(), (torch.randn(1, 1, 1600),), ["input_values"], axes, out, prefix, 18, variants)


def export_features(
    out: Path,
    prefix: str,
    model: nn.Module,
    frames: int,
    bins: int,
    name: str = "input_features",
    variants: tuple[str, ...] = STANDARD,
) -> None:
    """An encoder over (batch, frames, bins) features (audio features unless told), dynamic
    batch and frames."""
    axes = {name: {0: "batch", 1: "frames"}}
    export_variants(model, (torch.randn(1, frames, bins),), [name], axes, out, prefix, 18, variants)


VIDEO = torch.Generator().manual_seed(0)  # the video clips' draws leave the global RNG alone


def video(frames: int = 4, size: int = 32) -> torch.Tensor:
    """(1, frames, 3, size, size) random frames."""
    return torch.randn(1, frames, 3, size, size, generator=VIDEO)


EXPORTS.update(
    {
        # video transformers over (batch, 4 frames, 3, 32, 32) clips
        "videomae": lambda out, variants=STANDARD: export_vision(
            out,
            "videomae",  # tubelets of 2 frames (a Conv3d), fixed sinusoidal positions
            vision_model("VideoMAEConfig", "VideoMAEModel", **VIT_SIZE, num_frames=4, tubelet_size=2),
            32,
            pixel_values=video(),
            variants=variants,
        ),
        "timesformer": lambda out, variants=STANDARD: export_vision(
            out,
            "timesformer",  # divided space-time attention (time then space per layer)
            vision_model("TimesformerConfig", "TimesformerModel", **VIT_SIZE, num_frames=4),
            32,
            pixel_values=video(),
            variants=variants,
        ),
        "vivit": lambda out, variants=STANDARD: export_vision(
            out,
            "vivit",  # tubelet embedding (a Conv3d), one joint space-time attention
            vision_model(
                "VivitConfig", "VivitModel", **{**VIT_SIZE, "patch_size": None}, num_frames=4, tubelet_size=[2, 8, 8]
            ),
            32,
            pixel_values=video(),
            variants=variants,
        ),
        # vision towers of 2025 multimodal models, 32x32
        "aimv2_vision": lambda out, variants=STANDARD: export_vision(
            out,
            "aimv2_vision",  # RMSNorm, SwiGLU, no class token
            vision_model("Aimv2VisionConfig", "Aimv2VisionModel", **VIT_SIZE),
            32,
            variants=variants,
        ),
        "dinov3_vit": lambda out, variants=STANDARD: export_vision(
            out,
            "dinov3_vit",  # 2-D rotary on patches (not on the class and register tokens), layer scale
            vision_model("DINOv3ViTConfig", "DINOv3ViTModel", **VIT_SIZE, num_register_tokens=2),
            32,
            variants=variants,
        ),
        "metaclip2_vision": lambda out, variants=STANDARD: export_vision(
            out,
            "metaclip2_vision",
            vision_model("MetaClip2VisionConfig", "MetaClip2VisionModel", **VIT_SIZE),
            32,
            variants=variants,
        ),
        "internvl_vision": lambda out, variants=STANDARD: export_vision(
            out,
            "internvl_vision",  # InternViT: q/k RMSNorm, layer scale
            vision_model(
                "InternVLVisionConfig",
                "InternVLVisionModel",
                **{**VIT_SIZE, "image_size": [32, 32], "patch_size": [8, 8]},
                use_qk_norm=True,
                norm_type="rms_norm",
            ),
            32,
            variants=variants,
        ),
        "smolvlm_vision": lambda out, variants=STANDARD: export_vision(
            out,
            "smolvlm_vision",  # SigLIP's tower with bucketized position ids
            vision_model("SmolVLMVisionConfig", "SmolVLMVisionTransformer", **VIT_SIZE),
            32,
            variants=variants,
        ),
        "qwen2_5_vl_vision": lambda out, variants=STANDARD: export_variants(
            vision_model(  # patches as rows, 2-D rotary, windowed and full attention, a 2x2 patch merger
                "Qwen2_5_VLVisionConfig",
                "Qwen2_5_VisionTransformerPretrainedModel",
                ("hidden_states", "grid_thw"),
                depth=2,
                hidden_size=64,
                out_hidden_size=64,
                num_heads=4,
                intermediate_size=128,
                patch_size=8,
                fullatt_block_indexes=[1],
                window_size=32,
            ),
            (torch.randn(16, 3 * 2 * 8 * 8), torch.tensor([[1, 4, 4]])),  # a 32x32 image: 4x4 patches of 2 frames
            ["hidden_states", "grid_thw"],
            {"hidden_states": {0: "patches"}},
            out,
            "qwen2_5_vl_vision",
            18,
            variants,
        ),
        # conv nets and detection at 64x64 through export_convnet
        "dinov3_convnext": lambda out, variants=STANDARD: export_convnet(
            out,
            "dinov3_convnext",
            vision_model("DINOv3ConvNextConfig", "DINOv3ConvNextModel", hidden_sizes=[16, 32], depths=[1, 1]),
            variants=variants,
        ),
        "hgnet_v2": lambda out, variants=STANDARD: export_convnet(
            out,
            "hgnet_v2",  # D-FINE's backbone: learnable affine blocks, light (depthwise) blocks, aggregation
            vision_model(
                "HGNetV2Config",
                "HGNetV2Backbone",
                output="feature_maps",
                stem_channels=[3, 16, 16],
                stage_in_channels=[16, 32],
                stage_mid_channels=[16, 16],
                stage_out_channels=[32, 64],
                stage_num_blocks=[1, 1],
                stage_downsample=[False, True],
                stage_light_block=[False, True],
                stage_kernel_size=[3, 5],
                stage_numb_of_layers=[2, 2],
                depths=[1, 1],
                hidden_sizes=[32, 64],
                out_features=["stage2"],
                use_learnable_affine_block=True,
            ),
            variants=variants,
        ),
        "dab_detr": lambda out, variants=STANDARD: export_convnet(
            out,
            "dab_detr",  # DETR with dynamic anchor boxes as queries, modulated positional attention
            vision_model("DabDetrConfig", "DabDetrModel", **{**DETR_SIZE, "d_model": None}, hidden_size=64),
            variants=variants,
        ),
        "deformable_detr": lambda out, variants=STANDARD: export_convnet(
            out,
            "deformable_detr",  # multi-scale deformable attention (grid_sample) over one feature level
            vision_model(
                "DeformableDetrConfig",
                "DeformableDetrModel",
                **DETR_SIZE,
                num_feature_levels=1,
                encoder_n_points=2,
                decoder_n_points=2,
                disable_custom_kernels=True,
            ),
            variants=variants,
        ),
        # audio
        "wav2vec2_conformer": lambda out, variants=STANDARD: export_audio(
            out,
            "wav2vec2_conformer",  # conformer blocks (macaron FFNs, depthwise conv module), relative positions
            "Wav2Vec2ConformerConfig",
            "Wav2Vec2ConformerModel",
            conv_depthwise_kernel_size=7,
            variants=variants,
        ),
        "wav2vec2_conformer_rotary": lambda out, variants=STANDARD: export_audio(
            out,
            "wav2vec2_conformer_rotary",
            "Wav2Vec2ConformerConfig",
            "Wav2Vec2ConformerModel",
            conv_depthwise_kernel_size=7,
            position_embeddings_type="rotary",
            variants=variants,
        ),
        "wav2vec2_bert": lambda out, variants=STANDARD: export_features(
            out,
            "wav2vec2_bert",  # w2v-BERT 2.0: conformer over (batch, frames, 32) features, relative_key attention
            vision_model(
                "Wav2Vec2BertConfig",
                "Wav2Vec2BertModel",
                ("input_features",),
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=128,
                feature_projection_input_dim=32,
                conv_depthwise_kernel_size=7,
                left_max_position_embeddings=16,
                right_max_position_embeddings=4,
            ),
            20,
            32,
            variants=variants,
        ),
        "parakeet_enc": lambda out, variants=STANDARD: export_features(
            out,
            "parakeet_enc",  # FastConformer: strided conv subsampling (8x), relative positions, conv modules
            vision_model(
                "ParakeetEncoderConfig",
                "ParakeetEncoder",
                ("input_features",),
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=128,
                num_mel_bins=16,
                subsampling_conv_channels=16,
                conv_kernel_size=9,
            ),
            64,
            16,
            variants=variants,
        ),
        "perceiver": lambda out, variants=STANDARD: export_features(
            out,
            "perceiver",  # cross-attention from 8 latents to the inputs, latent self-attention
            vision_model(
                "PerceiverConfig",
                "PerceiverModel",
                ("inputs",),
                num_latents=8,
                d_latents=64,
                d_model=32,
                num_blocks=1,
                num_self_attends_per_block=2,
                num_self_attention_heads=4,
                num_cross_attention_heads=1,
            ),
            16,
            32,
            "inputs",
            variants=variants,
        ),
        "encodec_enc": lambda out, variants=STANDARD: export_codec(
            out,
            "encodec_enc",  # SEANet convs, an LSTM, residual vector quantization (2 codebooks) to codes
            "EncodecConfig",
            "EncodecModel",
            sampling_rate=1600,
            target_bandwidths=[4.0],
            hidden_size=32,
            num_filters=8,
            upsampling_ratios=[4, 2],
            codebook_size=64,
            codebook_dim=32,
            variants=variants,
        ),
        "dac_enc": lambda out, variants=STANDARD: export_codec(
            out,
            "dac_enc",  # Snake activations, weight-normed convs, factorized RVQ (quantized latents)
            "DacConfig",
            "DacModel",
            output="quantized_representation",
            encoder_hidden_size=8,
            downsampling_ratios=[2, 4],
            decoder_hidden_size=16,
            n_codebooks=2,
            codebook_size=64,
            codebook_dim=4,
            variants=variants,
        ),
    }
)
VIT_MLP = {**VIT_SIZE, "intermediate_size": None, "mlp_ratio": 2}  # VIT_SIZE for configs sized by mlp_ratio
EXPORTS.update(
    {
        # corpus 10 (held-out style): vision towers at 32x32, conv and hybrid nets at 64x64
        "mlcd_vision": lambda out, variants=STANDARD: export_vision(
            out,
            "mlcd_vision",  # CLIP-like tower with 2-D rotary on the patches
            vision_model("MLCDVisionConfig", "MLCDVisionModel", **VIT_SIZE),
            32,
            variants=variants,
        ),
        "radio": lambda out, variants=STANDARD: export_vision(
            out,
            "radio",  # C-RADIO: class and register tokens, a patch generator with interpolated positions
            vision_model(
                "RadioConfig",
                "RadioModel",
                **{**VIT_MLP, "mlp_ratio": 2.0},
                max_img_size=64,
                num_cls_tokens=2,
                num_registers=2,
                patch_dim=64,
            ),
            32,
            variants=variants,
        ),
        "tipsv2_vision": lambda out, variants=STANDARD: export_vision(
            out,
            "tipsv2_vision",  # DINOv2-like: a register token, layer scale
            vision_model("Tipsv2VisionConfig", "Tipsv2VisionModel", **VIT_MLP),
            32,
            variants=variants,
        ),
        "pixio": lambda out, variants=STANDARD: export_vision(
            out,
            "pixio",  # MAE-style ViT with several class tokens
            vision_model("PixioConfig", "PixioModel", **VIT_MLP, n_cls_tokens=2),
            32,
            variants=variants,
        ),
        "sapiens2": lambda out, variants=STANDARD: export_vision(
            out,
            "sapiens2",  # 2-D rotary, q/k RMSNorm, GQA per layer, gated MLP, register tokens
            vision_model(
                "Sapiens2Config",
                "Sapiens2Model",
                **VIT_SIZE,
                num_register_tokens=2,
                num_key_value_heads_per_layer=[4, 2],
                num_key_value_attention_heads=2,
                num_first_full_attention_layers=1,
                num_last_full_attention_layers=1,
                attn_implementation="eager",  # SDPA's GQA (enable_gqa) has no TorchScript translation
            ),
            32,
            variants=variants,
        ),
        "pvt": lambda out, variants=STANDARD: export_convnet(
            out,
            "pvt",  # PVT v1: non-overlapping patch embeddings, spatial-reduction attention, interpolated positions
            vision_model(
                "PvtConfig",
                "PvtModel",
                image_size=64,
                num_encoder_blocks=2,
                depths=[1, 1],
                sequence_reduction_ratios=[2, 1],
                hidden_sizes=[16, 32],
                patch_sizes=[4, 2],
                strides=[4, 2],
                num_attention_heads=[1, 2],
                mlp_ratios=[2, 2],
            ),
            variants=variants,
        ),
        "pp_lcnet": lambda out, variants=STANDARD: export_convnet(
            out,
            "pp_lcnet",  # PP-LCNet: depthwise separable convs, Hardswish, squeeze-excite in the last stage
            vision_model(
                "PPLCNetConfig",
                "PPLCNetBackbone",
                output="feature_maps",
                scale=0.25,
                block_configs=[
                    [[3, 16, 32, 1, False]],
                    [[3, 32, 64, 2, False]],
                    [[3, 64, 128, 2, False]],
                    [[5, 128, 256, 2, False]],
                    [[5, 256, 512, 2, True]],
                ],
                depths=[1, 1, 1, 1, 1],
                class_expand=64,
            ),
            variants=variants,
        ),
    }
)


# ---- corpus 12: transformers 5.25 families not exported before -------------------------------------


def export_mvp_encoder(out: Path, variants: tuple[str, ...] = STANDARD) -> None:
    """MVP's encoder with its prompts on: per-layer prompt keys and values (an embedding of 4 prompt
    tokens through an MLP) before the sequence's own."""
    from transformers import MvpConfig
    from transformers.models.mvp.modeling_mvp import MvpEncoder

    config = MvpConfig(**BART_SIZE, use_prompt=True, prompt_length=4, prompt_mid_dim=32, attn_implementation="eager")
    export_text(out, "mvp_enc", MvpEncoder(config, use_prompt=True), ["input_ids", "attention_mask"], 18, variants)


def granite_speech_encoder() -> nn.Module:
    """Granite Speech's CTC encoder (not exported at transformers' top level): conformer blocks
    whose attention runs over blocks of 8 frames with Shaw relative positions."""
    from transformers.models.granite_speech.modeling_granite_speech import GraniteSpeechCTCEncoder

    config = transformers_config(
        "GraniteSpeechEncoderConfig",
        input_dim=32,
        num_layers=2,
        hidden_dim=64,
        num_heads=4,
        dim_head=16,
        context_size=8,
        max_pos_emb=16,
        conv_kernel_size=7,
    )
    return HiddenState(GraniteSpeechCTCEncoder(config), ["hidden_states"]).eval()


def whisper_like(out: Path, prefix: str, model: nn.Module, variants: tuple[str, ...] = STANDARD) -> None:
    """An encoder over (batch, 16 mel bins, 64 frames) features as Whisper's (its positions fix the
    frames: dynamic batch only)."""
    names = ["input_features"]
    export_variants(
        model, (torch.randn(1, 16, 64),), names, {"input_features": {0: "batch"}}, out, prefix, 18, variants
    )


def without_torch_checks(export):
    """``export`` (out, variants=) with transformers' torch_compilable_check off, as its
    TRANSFORMERS_DISABLE_TORCH_CHECK=1 allows in production: a check over a tensor becomes
    aten._is_all_true, which the dynamo exporter does not translate (RT-DETRv2's and D-FINE's
    deformable attention checks its spatial shapes so)."""

    def run(out: Path, variants: tuple[str, ...] = STANDARD) -> None:
        saved = os.environ.get("TRANSFORMERS_DISABLE_TORCH_CHECK")
        os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"] = "1"
        try:
            export(out, variants=variants)
        finally:
            if saved is None:
                del os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"]
            else:
                os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"] = saved

    return run


# RT-DETR's sizes (as the rt_detr export) for RT-DETRv2 and D-FINE
RT_DETR_SIZE = dict(
    encoder_hidden_dim=64,
    encoder_ffn_dim=128,
    encoder_attention_heads=4,
    d_model=64,
    decoder_in_channels=[64, 64, 64],
    decoder_ffn_dim=128,
    decoder_attention_heads=4,
    decoder_layers=2,
    num_queries=10,
    num_denoising=0,
)
EXPORTS.update(
    {
        "openai_gpt": partial(export_decoder, family="openai_gpt", kv=False),  # its model takes no cache
        "dpr": lambda out, variants=STANDARD: export_variants(
            HiddenState(  # DPR's question encoder: BERT's [CLS] state projected to 32, pooler_output
                tiny_transformer(
                    "DPRConfig", "DPRQuestionEncoder", {"projection_dim": 32}, "eager", max_position_embeddings=64
                ),
                TEXT3,
                "pooler_output",
            ),
            text_inputs(TEXT3),
            TEXT3,
            {n: {0: "batch", 1: "seq"} for n in TEXT3},
            out,
            "dpr",
            18,
            variants,
        ),
        "mvp_enc": export_mvp_encoder,
        # vision at 32x32 (transformers) and 64x64 (conv nets, detection, matting)
        "groupvit_vision": lambda out, variants=STANDARD: export_vision(
            out,
            "groupvit_vision",  # grouping blocks: 8 group tokens, then a hard (straight-through) assignment to 4 groups
            vision_model(
                "GroupViTVisionConfig",
                "GroupViTVisionModel",
                **{**VIT_SIZE, "patch_size": 4},
                depths=[1, 1],
                num_group_tokens=[8, 0],
                num_output_groups=[8, 4],
            ),
            32,
            variants=variants,
        ),
        "swin2sr": lambda out, variants=STANDARD: export_vision(
            out,
            "swin2sr",  # super-resolution: a conv in, residual Swin V2 groups (patch size 1), a conv out (features)
            vision_model(
                "Swin2SRConfig",
                "Swin2SRModel",
                image_size=32,
                embed_dim=16,
                depths=[1, 1],
                num_heads=[2, 2],
                window_size=4,
            ),
            32,
            variants=variants,
        ),
        "lw_detr_vit": lambda out, variants=STANDARD: export_vision(
            out,
            "lw_detr_vit",  # LW-DETR's backbone: a ViT with windowed layers (4 windows folded into the batch), CAE
            # layer scale, the last layer's feature map
            vision_model(
                "LwDetrViTConfig",
                "LwDetrViTBackbone",
                output="feature_maps",
                **VIT_MLP,
                pretrain_image_size=32,
                window_block_indices=[0],
                num_windows=4,
                num_windows_side=2,
                out_indices=[2],
            ),
            32,
            variants=variants,
        ),
        "zoedepth": lambda out, variants=STANDARD: export_vision(
            out,
            "zoedepth",  # a BEiT backbone, DPT neck, relative depth, then metric bins refined by attractors
            vision_model(
                "ZoeDepthConfig",
                "ZoeDepthForDepthEstimation",
                output="predicted_depth",
                backbone_config=transformers_config(
                    "BeitConfig",
                    **VIT_SIZE,
                    out_features=["stage1", "stage2"],
                    reshape_hidden_states=False,
                    use_relative_position_bias=True,
                ),
                patch_size=8,
                reassemble_factors=[2, 1],
                neck_hidden_sizes=[16, 32],
                fusion_hidden_size=16,
                bottleneck_features=16,
                num_attractors=[4, 2, 2, 1],  # four entries: the head zips them with the neck's (two) levels
                bin_embedding_dim=16,
                num_relative_features=8,
                bin_configurations=[{"n_bins": 8, "min_depth": 0.001, "max_depth": 10.0}],
            ),
            32,
            variants=variants,
        ),
        "superpoint": lambda out, variants=STANDARD: export_convnet(
            out,
            "superpoint",  # VGG-style encoder, keypoints (softmax, pixel shuffle, max-pool NMS, threshold), descriptors
            # sampled at the keypoints (a data-dependent count)
            vision_model(
                "SuperPointConfig",
                "SuperPointForKeypointDetection",
                output="descriptors",
                encoder_hidden_sizes=[8, 8, 16, 16],
                decoder_hidden_size=32,
                descriptor_decoder_dim=32,
            ),
            variants=variants,
        ),
        "rt_detr_v2": without_torch_checks(
            lambda out, variants: export_convnet(
                out,
                "rt_detr_v2",  # RT-DETR with per-level sampling points and discrete sampling (gathers, no grid_sample)
                vision_model(
                    "RTDetrV2Config",
                    "RTDetrV2Model",
                    backbone_config=transformers_config(
                        "RTDetrResNetConfig",
                        embedding_size=16,
                        hidden_sizes=[16, 32, 64, 128],
                        depths=[1, 1, 1, 1],
                        layer_type="basic",
                        out_features=["stage2", "stage3", "stage4"],
                    ),
                    encoder_in_channels=[32, 64, 128],
                    **RT_DETR_SIZE,
                    decoder_method="discrete",
                ),
                variants=variants,
            )
        ),
        "d_fine": without_torch_checks(
            lambda out, variants: export_convnet(
                out,
                "d_fine",  # HGNetV2 backbone, RT-DETR's hybrid encoder, fine-grained distribution refinement of boxes
                vision_model(
                    "DFineConfig",
                    "DFineModel",
                    backbone_config=transformers_config(
                        "HGNetV2Config",
                        stem_channels=[3, 16, 16],
                        stage_in_channels=[16, 32, 64, 64],
                        stage_mid_channels=[16, 16, 32, 32],
                        stage_out_channels=[32, 64, 64, 128],
                        stage_num_blocks=[1, 1, 1, 1],
                        stage_downsample=[False, True, True, True],
                        stage_light_block=[False, False, True, True],
                        stage_kernel_size=[3, 3, 5, 5],
                        stage_numb_of_layers=[2, 2, 2, 2],
                        depths=[1, 1, 1, 1],
                        hidden_sizes=[32, 64, 64, 128],
                        out_features=["stage2", "stage3", "stage4"],
                    ),
                    encoder_in_channels=[64, 64, 128],
                    **RT_DETR_SIZE,
                ),
                variants=variants,
            )
        ),
        "vitmatte": lambda out, variants=STANDARD: export_vision(
            out,
            "vitmatte",  # image matting over (batch, 4: RGB + trimap, 64, 64): a ViTDet backbone, a conv stream, fusion
            vision_model(
                "VitMatteConfig",
                "VitMatteForImageMatting",
                output="alphas",
                backbone_config=transformers_config(
                    "VitDetConfig",
                    **{**VIT_MLP, "image_size": 64, "patch_size": 16},  # patch 16: the fusion upsamples 16x in 4 steps
                    num_channels=4,
                    pretrain_image_size=64,
                    out_features=["stage2"],
                ),
                hidden_size=64,
                convstream_hidden_sizes=[8, 16, 32],
                fusion_hidden_sizes=[32, 16, 8, 8],
            ),
            64,
            variants=variants,
            pixel_values=torch.randn(1, 4, 64, 64),
        ),
        # audio
        "lasr_enc": lambda out, variants=STANDARD: export_variants(
            vision_model(  # LASR: a conformer with rotary attention and weighted residuals over (batch, 64 frames, 16)
                # mels; dynamic batch only: its two unpadded stride-2 convs (kernel 5) need 13 frames or more
                "LasrEncoderConfig",
                "LasrEncoder",
                ("input_features",),
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=4,
                intermediate_size=128,
                conv_kernel_size=9,
                subsampling_conv_channels=16,
                num_mel_bins=16,
            ),
            (torch.randn(1, 64, 16),),
            ["input_features"],
            {"input_features": {0: "batch"}},
            out,
            "lasr_enc",
            18,
            variants,
        ),
        "qwen2_audio_enc": lambda out, variants=STANDARD: whisper_like(
            out,
            "qwen2_audio_enc",  # Whisper's encoder with an average pool (2x) after the layers
            vision_model(
                "Qwen2AudioEncoderConfig",
                "Qwen2AudioEncoder",
                ("input_features",),
                num_mel_bins=16,
                encoder_layers=2,
                encoder_attention_heads=4,
                encoder_ffn_dim=128,
                d_model=64,
                max_source_positions=32,
            ),
            variants,
        ),
        "glmasr_enc": lambda out, variants=STANDARD: whisper_like(
            out,
            "glmasr_enc",  # GLM-ASR: Whisper's conv front end, then partial rotary (0.5) instead of learned positions
            vision_model(
                "GlmAsrEncoderConfig",
                "GlmAsrEncoder",
                ("input_features",),
                num_mel_bins=16,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=4,
                intermediate_size=128,
                hidden_size=64,
                max_position_embeddings=32,
            ),
            variants,
        ),
        "granite_speech_enc": lambda out, variants=STANDARD: export_features(
            out,
            "granite_speech_enc",  # conformer over (batch, frames, 32) features: block attention, Shaw positions
            granite_speech_encoder(),
            20,
            32,
            "hidden_states",
            variants,
        ),
    }
)

# corpus 8's exports that fail (transformers 5.23, torch 2.13; FAILURES says which), by cause:
# - TorchScript: aten::linalg_solve_triangular in the chunked delta rule (qwen3_next, qwen3_5,
#   olmo_hybrid), aten::rms_norm (diffllama), no alias analysis for aten::scatter (deepseek_v32), a
#   shape-inference assert on the interleaved rotary (ernie4_5_moe, cohere2_moe, as ernie4_5's),
#   aten::grid_sampler at opset 14 (deformable_detr; its ts_static GridSample does not load); the
#   Mamba-2 mixers' traces (bamba, falcon_h1, granite4, mamba2, zamba2, nemotron_h) do not load
#   (a Transpose's invalid perm), nor smolvlm_vision's (a float index into its position embedding);
#   the scans (mamba, falcon_mamba, jamba, recurrent_gemma, rwkv, xlstm, minimax), longformer's chunks,
#   xmod's adapters and qwen2_5_vl_vision's windows fix the example's shapes in ts_dynamic
# - dynamo: prims.erf_inv (gemma3n's activation sparsity), the encoder mask's repeat (prophetnet_dec),
#   data-dependent guards (longformer, qwen2_5_vl_vision, encodec_enc's padding, deepseek_v32's KV
#   step: its cache wants indexer layers); wav2vec2_conformer_rotary fails after the TorchScript
#   exports (alone it exports); dynamo_dynamic of the chunked Mamba-2 scans (falcon_h1, granite4,
#   mamba2, nemotron_h), aimv2_vision and timesformer fix the example's shapes
# left out: pixtral_vision (data-dependent patch layout: dynamo's guards fail, TorchScript fixes the
# example's image size), siglip2_vision (its resized position embeddings: aten::_upsample_bilinear2d_aa
# in TorchScript, zero Resize scales at other sizes from dynamo), mimi_enc (aten::diff in its
# transformer's mask, data-dependent guards in dynamo), fsmt_dec (its decoder takes explicit padding
# and causal masks), efficientformer and nezha (not in transformers 5), MiniCPM 1/2 and InternLM 2
# (not in transformers; InternLM3 has a config only), mask2former, fastspeech2_conformer, gemma3n's
# audio encoder (not tried)

# corpus 9 ("positions": position_ids as an input) fails where the decoders' own exports do,
# plus: TorchScript's shape-inference assert on the interleaved rotary for glm and glm4 (both
# variants) and the KV steps of cohere, cohere2, ernie4_5 and helium; their ts_dynamic traces
# without a cache stack the rotated pairs along the wrong axis and do not run (dropped as unloadable);
# gemma3n's dynamo exports (prims.erf_inv, as above)

# corpus 10's exports that fail: TorchScript: aten::scatter's alias analysis (hy_v4's indexer, as
# deepseek_v32's), a rank assert in deepseek_v4's compressor, aten::fft_fftn (fnet),
# aten::_upsample_bilinear2d_aa (tipsv2_vision's position interpolation); longcat_flash's ts_dynamic traces
# do not load (an If over the experts fails shape inference); dynamo: longcat_flash (torch.export), hy_v4's
# KV step (its cache wants indexer layers); mlcd_vision's dynamo_dynamic does not run at another batch.
# Left out: step3p5 (a text model without an LM head in transformers 5.23), qwen3_omni_moe_text (no causal
# LM of its own), siglip2_vision and pixtral_vision (see corpus 8's); hunyuan_v1_moe, granitemoehybrid and
# regnet are here already (hunyuan_moe, granite4, hf_regnet)

# corpus 12's exports that fail (transformers 5.25, torch 2.13): TorchScript: aten::scatter's alias analysis
# (glm_moe_dsa's indexer, as deepseek_v32's), aten::linalg_solve_triangular (the chunked delta rule of lara_mini and
# qwen4_exp_text), aten::expm1 (apertus1p5_text's xIELU), an Unfold of unknown size (inkling2_text's short
# convolutions), scatter_reduce without include_self (tapas), aten::grid_sampler at opset 14 (superpoint, d_fine); the
# traces of bailing_hybrid (a Tile's repeats) and superpoint (a MaxPool's dilations) do not load, the
# switch_transformers_enc traces fix the example's routing (whether one runs depends on the random weights), and
# zamba's, longt5_enc's, zoedepth's and granite_speech_enc's ts_dynamic fix the example's shapes; dynamo:
# switch_transformers_enc (torch.export: "Cannot swap t1 because it has weakref associated with it"), glm_moe_dsa's KV
# step (its cache wants indexer layers); dynamo_dynamic (left out of dynamo_dynamic_12): torch.export finds zamba's
# sequence static, switch_transformers_enc as above, zoedepth's constant folding fails (a SplitToSequence), and
# bailing_hybrid, longt5_enc, tapas, rt_detr_v2, d_fine and granite_speech_enc do not run at other sizes.
# Left out: kolibri1_1 (its indexer loops over data-dependent query groups: torch.export's guards fail; TorchScript: a
# float8_e4m3fn cast in its NVFP4 rounding, "24 is not a valid JitScalarType"), qwen4_exp_text's indexed attention
# layers (the QSA indexer loops over each query's nonzero keys: the same guards; TorchScript: aten::scatter's alias
# analysis), step3p5, glm5_next_text and mistral_large4_text (text models without an LM head in transformers 5.25), eomt
# (its loss needs scipy at construction), got_ocr2_vision (SAM's image encoder: sam_vision), owlv2_vision (OwlViT's
# tower), voxtral_encoder (Whisper's encoder), visual_bert (BERT without visual embeddings), iquestcoder
# (LlamaForCausalLM as exaone), param2moe (Glm4MoeForCausalLM as sarvam_moe), siglip2_vision and pixtral (see corpus
# 8's); hunyuan_v1_moe and granitemoehybrid are here already (hunyuan_moe, granite4)

# dynamo_dynamic_8's sources: DECODERS, ENCODERS, SEQ2SEQ_DECODERS, else the corpus 8 EXPORTS
# above (they take variants=)
CORPUS8_DYNAMIC = SETTINGS["dynamo_dynamic_8"][1]
SETTING_SOURCES.update({f: partial(export_decoder, family=f, kv=False) for f in CORPUS8_DYNAMIC if f in DECODERS})
SETTING_SOURCES.update({f: partial(export_encoder, family=f) for f in CORPUS8_DYNAMIC if f in ENCODERS})
SETTING_SOURCES.update({f: partial(export_seq2seq_decoder, family=f) for f in CORPUS8_DYNAMIC if f in SEQ2SEQ_DECODERS})
SETTING_SOURCES.update({f: EXPORTS[f] for f in CORPUS8_DYNAMIC if f not in SETTING_SOURCES})
CORPUS10_DYNAMIC = SETTINGS["dynamo_dynamic_10"][1]  # the same for corpus 10's
SETTING_SOURCES.update({f: partial(export_decoder, family=f, kv=False) for f in CORPUS10_DYNAMIC if f in DECODERS})
SETTING_SOURCES.update({f: partial(export_encoder, family=f) for f in CORPUS10_DYNAMIC if f in ENCODERS})
SETTING_SOURCES.update({f: EXPORTS[f] for f in CORPUS10_DYNAMIC if f not in SETTING_SOURCES})
CORPUS12_DYNAMIC = SETTINGS["dynamo_dynamic_12"][1]  # and for corpus 12's
SETTING_SOURCES.update({f: partial(export_decoder, family=f, kv=False) for f in CORPUS12_DYNAMIC if f in DECODERS})
SETTING_SOURCES.update({f: partial(export_encoder, family=f) for f in CORPUS12_DYNAMIC if f in ENCODERS})
SETTING_SOURCES.update({f: EXPORTS[f] for f in CORPUS12_DYNAMIC if f not in SETTING_SOURCES})
# fp16 copies (keep_io_types) of corpus 12's ts_dynamic and dynamo exports: three decoders, two encoders, a vision model
FP16_12 = ("ts_dynamic", "dynamo")
FP16_12_SOURCES = [
    (partial(export_decoder, family=f, kv=False, variants=FP16_12), [f"{f}_{v}" for v in FP16_12])
    for f in ("exaone", "sarvam_mla", "kolibri1")
]
FP16_12_SOURCES += [
    (partial(export_encoder, family=f, variants=FP16_12), [f"{f}_{v}" for v in FP16_12]) for f in ("bros", "layoutlmv3")
]
FP16_12_SOURCES.append((partial(EXPORTS["lw_detr_vit"], variants=FP16_12), [f"lw_detr_vit_{v}" for v in FP16_12]))
EXPORTS["fp16_12"] = partial(export_fp16, sources=FP16_12_SOURCES)
EXPORTS.update({f: partial(export_decoder, family=f, kv=f not in RECURRENT) for f in DECODERS if f not in EXPORTS})
EXPORTS.update({f: partial(export_seq2seq_decoder, family=f, kv=f in SEQ2SEQ_KV) for f in SEQ2SEQ_DECODERS})
EXPORTS.update({f: partial(export_encoder, family=f) for f in ENCODERS if f not in EXPORTS})
EXPORTS.update({s: partial(export_setting, setting=s) for s in SETTINGS})


def external_files(path: Path) -> list[Path]:
    import onnx

    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:
        return [path.with_name(path.name + ".data")]
    tensors = list(model.graph.initializer)
    return sorted({path.parent / e.value for t in tensors for e in t.external_data if e.key == "location"})


def drop_unloadable(target: Path, names: list[str]) -> None:
    """Load each model in onnxruntime (CPU; optimizations at the default and off) and run it
    once on the benchmarks' feeds (other sizes than the export's: a TorchScript trace can bake
    a shape in); delete one that fails, with its external data."""
    import onnx
    import onnxruntime as ort
    from snapshot import feeds_for

    for name in names:
        path = target / name
        try:
            for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
                options = ort.SessionOptions()
                options.graph_optimization_level, options.log_severity_level = level, 4
                session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            session.run(None, feeds_for(onnx.load(path, load_external_data=False)))
        except Exception as error:
            message = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
            FAILURES.append(f"{name}: does not run in onnxruntime, deleted: {message}")
            print(f"{name}: does not run in onnxruntime, deleted: {message}")
            for file in [path, *external_files(path)]:
                file.unlink(missing_ok=True)


def describe(path: Path) -> dict:
    """family, exporter, variant, opset, axes, dtype, nodes of one exported file (from its
    name and its graph)."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    stem, dtype = path.stem, "fp32"
    for suffix, kind in (("_fp16", "fp16"), ("_qdq", "int8 QDQ"), ("_qdyn", "int8 dynamic"), ("_q4", "int4 weights")):
        if stem.endswith(suffix):
            stem, dtype = stem[: -len(suffix)], kind
    if "_dynamo" in stem:  # {family}_dynamo[_{setting}]
        family, variant = stem.split("_dynamo")
        exporter, variant = "dynamo", variant.lstrip("_")
    elif "_ts_" in stem:
        family, variant = stem.split("_ts_")
        exporter = "torchscript"
    else:
        family, exporter, variant = stem, "torchscript", ""
    if family.endswith("_kv"):
        family, variant = family[:-3], ("kv " + variant).strip()
    dynamic = any(not d.HasField("dim_value") for vi in model.graph.input for d in vi.type.tensor_type.shape.dim)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    return {
        "file": path.name,
        "family": family,
        "exporter": exporter,
        "variant": variant or "-",
        "opset": opset,
        "axes": "dynamic" if dynamic else "static",
        "dtype": dtype,
        "nodes": len(model.graph.node),
    }


def corpus_table(dirs: list[Path]) -> str:
    lines = [
        "# Development corpus",
        "",
        "Written by `bench/export_models.py` (random weights, 2 layers, hidden 64 unless the name says",
        "otherwise); regenerate this table with",
        f"`python bench/export_models.py --corpus CORPUS.md {' '.join(str(d) for d in dirs)}`.",
        "Nodes: top-level graph nodes.",
        "",
    ]
    for directory in dirs:
        rows = [describe(p) for p in sorted(directory.glob("*.onnx"))]
        lines += [
            f"## {directory} ({len(rows)} models)",
            "",
            "| file | family | exporter | variant | opset | axes | dtype | nodes |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['file']} | {r['family']} | {r['exporter']} | {r['variant']} | {r['opset']} | "
            f"{r['axes']} | {r['dtype']} | {r['nodes']} |"
            for r in rows
        ]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--corpus"]:
        index = Path(argv[1])
        index.write_text(corpus_table([Path(d) for d in argv[2:]]))
        print("wrote", index)
        return 0
    args = [a for a in argv if a != "-v"]
    target = Path(args[0] if args else "devmodels")
    target.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    before = {p.name: p.stat().st_mtime_ns for p in target.glob("*.onnx")}
    for family in args[1:] or list(EXPORTS):
        attempt(family, lambda: EXPORTS[family](target))
    written = sorted(p.name for p in target.glob("*.onnx") if before.get(p.name) != p.stat().st_mtime_ns)
    drop_unloadable(target, written)
    print("wrote", sorted(p.name for p in target.glob("*.onnx") if p.name in written))
    if FAILURES:
        print(f"{len(FAILURES)} failed:", *FAILURES, sep="\n  ")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
