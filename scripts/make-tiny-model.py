#!/usr/bin/env python3
"""Writes a tiny random Llama model that real vLLM can load, without a model hub.

Usage: python scripts/make-tiny-model.py [--config-only] OUT_DIR

Run it with the interpreter of the vLLM venv (scripts/install-vllm.sh), which
has torch, transformers and tokenizers:

    .tools/vllm-venv/bin/python scripts/make-tiny-model.py /tmp/tiny

OUT_DIR then holds config.json, generation_config.json, model.safetensors and
a byte-level BPE tokenizer (tokenizer.json, tokenizer_config.json, ...) with a
trivial chat template. Serve it with, e.g.:

    HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 vllm serve /tmp/tiny \\
        --served-model-name tiny --enforce-eager --dtype float32 --max-model-len 256

The model: LlamaConfig(hidden_size=128, intermediate_size=256,
num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
max_position_embeddings=512), i.e. head_dim 64 (vLLM's CPU attention backend
refuses smaller head dims), vocab 300, random weights (372,352 parameters,
a 1.5 MB model.safetensors). Its answers are gibberish; it exists so that engine start-up, the HTTP
API and routing can be exercised with the real program in seconds.

--config-only writes the tokenizer and config.json without weights and
without torch: what a simulated engine (the Dynamo mocker) reads to tokenize
and to describe the model. Any interpreter with transformers and tokenizers
runs it (the Dynamo venv of scripts/install-dynamo.sh).

Deterministic: fixed seeds and a fixed training text, so the same versions of
torch, transformers and tokenizers write byte-identical files.
"""

import os
import random
import sys

VOCAB_SIZE = 300
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>"]  # ids 0, 1, 2
SEED = 0

# Training text for the tokenizer: a few plain sentences, enough for the BPE
# trainer to learn merges beyond the 256 byte tokens.
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! This is a tiny model for testing.",
    "A router sends each request to one of several workers.",
    "Prefill computes the prompt; decode generates the next tokens.",
    "Tensor parallel and data parallel are two ways to split the work.",
    "The server answers on port eight thousand with a health check.",
    "Once upon a time there was a small language model.",
    "It could count: one, two, three, four, five, six, seven, eight.",
    "user: what is the capital of France? assistant: Paris.",
    "Tokens, tokens and more tokens, all of them random.",
]

# A minimal chat template: "role: content" lines, then "assistant: ".
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(SENTENCES, trainer=trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A",
        pair="<s> $A <s> $B",
        special_tokens=[("<s>", bos)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="</s>",
        model_max_length=512,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_config(tokenizer):
    from transformers import LlamaConfig

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    # What a model's saved config says; a bare LlamaConfig leaves it out, and
    # Dynamo's frontend cannot describe a model without it.
    config.architectures = ["LlamaForCausalLM"]
    return config


def build_model(tokenizer):
    import torch
    from transformers import LlamaForCausalLM

    config = build_config(tokenizer)
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config)
    model.eval()
    return model


def main(argv):
    config_only = "--config-only" in argv[1:]
    args = [a for a in argv[1:] if a != "--config-only"]
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if len(args) != 1 else sys.stdout)
        return 0 if len(args) == 1 else 2
    out = args[0]
    if config_only:
        return write_config_only(out)

    random.seed(SEED)
    import numpy as np
    import torch

    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)

    tokenizer = build_tokenizer()
    if len(tokenizer) != VOCAB_SIZE:
        raise SystemExit(f"tokenizer has {len(tokenizer)} tokens, expected {VOCAB_SIZE}")
    model = build_model(tokenizer)

    os.makedirs(out, exist_ok=True)
    tokenizer.save_pretrained(out)
    model.save_pretrained(out, safe_serialization=True)
    if not os.path.exists(os.path.join(out, "tokenizer.json")):
        raise SystemExit(f"{out}/tokenizer.json was not written")
    params = sum(p.numel() for p in model.parameters())
    print(f"wrote a tiny Llama ({params} parameters, vocab {VOCAB_SIZE}) to {out}", file=sys.stderr)
    return 0


def write_config_only(out):
    tokenizer = build_tokenizer()
    if len(tokenizer) != VOCAB_SIZE:
        raise SystemExit(f"tokenizer has {len(tokenizer)} tokens, expected {VOCAB_SIZE}")
    os.makedirs(out, exist_ok=True)
    tokenizer.save_pretrained(out)
    build_config(tokenizer).save_pretrained(out)
    print(f"wrote a tiny Llama's tokenizer and config (no weights) to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
