#!/usr/bin/env python3
"""Write a tiny random-weight Llama GGUF, deterministically from a seed.

    make-gguf.py OUT.gguf [--seed N] [--no-space]

Architecture: llama, 4 layers, width 256, 4 heads (head dim 64), FFN 512,
context length 32768, all tensors F32 (~11 MB).

Tokenizer: SentencePiece-style ("llama" tokenizer model) with byte fallback.
Only ASCII byte tokens <0x00>..<0x7F> exist: a random model sampling a byte
>= 0x80 would emit invalid UTF-8 and llama-server aborts the stream. The rest
of the vocabulary is ASCII word pieces, so every sampled token decodes to
valid UTF-8. Consequence: text with non-ASCII characters cannot be tokenized
by this vocabulary (send ASCII text or token ids).

--no-space leaves out every piece holding the word-boundary marker and all
byte-fallback pieces: such a vocabulary can encode no text at all (SentencePiece
prefixes a boundary marker to every text, and without byte fallback an unknown
piece has nowhere to go), so llama-server's /tokenize and its text prompts fail
with `unordered_map::at`, while prompts of token ids still run.

Same seed -> byte-identical file (weights from numpy's PCG64 with that seed;
the vocabulary is fixed and does not depend on the seed).
Needs the pinned `gguf` and `numpy` packages (see tiny-model.sh).
"""
import argparse
import os
import sys

import numpy as np
import gguf

N_LAYER = 4
N_EMBD = 256
N_HEAD = 4
N_HEAD_KV = 4
N_FF = 512
N_CTX = 32768
RMS_EPS = 1e-5
ROPE_BASE = 10000.0

SPACE = "\u2581"  # SentencePiece word-boundary marker

WORDS = """the of and to in is you that it he was for on are as with his they at be
this have from or one had by word but not what all were we when your can said there
use an each which she do how their if will up other about out many then them these so
some her would make like him into time has look two more write go see number no way
could people my than first water been call who oil its now find long down day did get
come made may part hello world token context length prompt cache server bench model
fast slow test data text random tiny llama""".split()


def build_vocab(full_byte_range=False, no_space=False):
    tokens, scores, types = [], [], []

    def add(piece, score, ttype):
        tokens.append(piece)
        scores.append(float(score))
        types.append(int(ttype))

    T = gguf.TokenType
    add("<unk>", 0.0, T.UNKNOWN)   # 0
    add("<s>", 0.0, T.CONTROL)     # 1  BOS
    add("</s>", 0.0, T.CONTROL)    # 2  EOS
    for b in range(0 if no_space else 0x100 if full_byte_range else 0x80):  # 3..130 byte fallback, ASCII only
        add("<0x%02X>" % b, 0.0, T.BYTE)
    seen = set(tokens)
    pieces = []
    # whole words (preferred merges: highest score first)
    pieces += [SPACE + w for w in WORDS]
    pieces += [w for w in WORDS if len(w) > 1]
    # frequent English bigrams
    pieces += ["th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es",
               "or", "te", "of", "ed", "is", "it", "al", "ar", "st", "to", "nt", "ng",
               "se", "ha", "as", "ou", "io", "le", "ve", "co", "me", "de", "hi", "ri",
               "ro", "ic", "ne", "ea", "ra", "ce", "li", "ch", "ll", "be", "ma", "si"]
    pieces += [SPACE + c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"]
    # single characters (printable ASCII except space) and the boundary marker
    pieces += [SPACE] + [chr(c) for c in range(0x21, 0x7F)]
    if no_space:
        pieces = [p for p in pieces if SPACE not in p]
    uniq = []
    for p in pieces:
        if p not in seen:
            seen.add(p)
            uniq.append(p)
    n = len(uniq)
    for i, p in enumerate(uniq):
        # longer / earlier pieces get higher scores; single chars lowest
        add(p, -float(i) if len(p.replace(SPACE, "")) > 1 or p == SPACE else -float(n + i), T.NORMAL)
    return tokens, scores, types


CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--full-byte-range", action="store_true",
                    help="also add byte tokens <0x80>..<0xFF> (NOT for normal use: the model then "
                         "emits invalid UTF-8; only to provoke llama-server's mid-stream error event)")
    ap.add_argument("--no-space", action="store_true",
                    help="no word-boundary piece and no byte fallback: a vocabulary that can "
                         "tokenize no text (token-id prompts only)")
    args = ap.parse_args()
    if args.no_space and args.full_byte_range:
        ap.error("--no-space has no byte pieces: it cannot take --full-byte-range")

    tokens, scores, types = build_vocab(args.full_byte_range, args.no_space)
    n_vocab = len(tokens)
    rng = np.random.Generator(np.random.PCG64(args.seed))

    def w(*shape, std=0.02):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    def ones(n):
        return np.ones((n,), dtype=np.float32)

    tmp = args.out + ".tmp.%d" % os.getpid()
    wr = gguf.GGUFWriter(tmp, "llama")
    wr.add_name("ctxbench tiny random llama (seed %d%s)" % (args.seed, ", no space" if args.no_space else ""))
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    wr.add_context_length(N_CTX)
    wr.add_embedding_length(N_EMBD)
    wr.add_block_count(N_LAYER)
    wr.add_feed_forward_length(N_FF)
    wr.add_head_count(N_HEAD)
    wr.add_head_count_kv(N_HEAD_KV)
    wr.add_layer_norm_rms_eps(RMS_EPS)
    wr.add_rope_dimension_count(N_EMBD // N_HEAD)
    wr.add_rope_freq_base(ROPE_BASE)
    wr.add_vocab_size(n_vocab)

    wr.add_tokenizer_model("llama")
    wr.add_token_list(tokens)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_unk_token_id(0)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_add_bos_token(True)
    wr.add_add_eos_token(False)
    wr.add_chat_template(CHATML)

    # numpy shape is (out, in); ggml reverses it.
    wr.add_tensor("token_embd.weight", w(n_vocab, N_EMBD))
    for i in range(N_LAYER):
        p = "blk.%d." % i
        wr.add_tensor(p + "attn_norm.weight", ones(N_EMBD))
        wr.add_tensor(p + "attn_q.weight", w(N_EMBD, N_EMBD))
        wr.add_tensor(p + "attn_k.weight", w(N_EMBD * N_HEAD_KV // N_HEAD, N_EMBD))
        wr.add_tensor(p + "attn_v.weight", w(N_EMBD * N_HEAD_KV // N_HEAD, N_EMBD))
        wr.add_tensor(p + "attn_output.weight", w(N_EMBD, N_EMBD))
        wr.add_tensor(p + "ffn_norm.weight", ones(N_EMBD))
        wr.add_tensor(p + "ffn_gate.weight", w(N_FF, N_EMBD))
        wr.add_tensor(p + "ffn_up.weight", w(N_FF, N_EMBD))
        wr.add_tensor(p + "ffn_down.weight", w(N_EMBD, N_FF))
    wr.add_tensor("output_norm.weight", ones(N_EMBD))
    wr.add_tensor("output.weight", w(n_vocab, N_EMBD))

    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file(progress=False)
    wr.close()
    os.replace(tmp, args.out)
    print("wrote %s (n_vocab=%d, seed=%d, %d bytes)" % (args.out, n_vocab, args.seed, os.path.getsize(args.out)),
          file=sys.stderr)


if __name__ == "__main__":
    main()
