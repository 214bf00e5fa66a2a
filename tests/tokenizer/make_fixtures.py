#!/usr/bin/env python3
"""Generates the tokenizer and chat-template fixtures under tests/tokenizer/data/.

Run once, by hand, with the golden venv (CI never runs it and never needs torch):

    /opt/golden/bin/python tests/tokenizer/make_fixtures.py [--model PATH_TO_SMOLLM2_GGUF]

The reference is Hugging Face `tokenizers` (Rust, through its Python binding) and
`transformers.apply_chat_template`'s renderer. What it writes:

  corpus.json                 the >= 2,000 test strings ("text", or "hex" for raw bytes
                              that are not valid UTF-8) and the fragments the 100 KB
                              strings are drawn from
  <name>/tokenizer.json       tokenizers this script trains and builds with `tokenizers`
  <name>/tokenizer_config.json
  <name>.expected.json        expected ids / decodes for every corpus string
  chat_templates.json         conversations and their rendered strings per template

Invalid UTF-8: HF tokenizers only ever sees a Python str. A byte string that is not
UTF-8 reaches it as `data.decode("utf-8", errors="replace")` (one U+FFFD per maximal
invalid subpart, the Unicode-recommended practice Python follows). Vosti's encode()
applies exactly that substitution to invalid input, so the expected ids for a "hex"
entry are HF's ids for the replaced string. Lone surrogates cannot be in a Python str
that tokenizers accepts; their UTF-8-style encodings (ED A0 80 ...) are in the corpus
as invalid bytes.

SmolLM2 from its GGUF: transformers' GGUF loader has no entry for the `smollm` pre-
tokenizer and falls back to GPT-2's split; the model's own tokenizer.json (and llama.cpp's
`smollm` pre-tokenizer) also splits digits one by one. We load vocabulary, merges and
special tokens from the GGUF with transformers and set the pre-tokenizer the model
was trained with: Sequence[Digits(individual_digits=True), ByteLevel(use_regex=True)].

The 100 KB strings are not stored: the test regenerates them with the same LCG from
`big_fragments` and compares the FNV-1a-64 hash of the ids recorded here.
"""
import argparse
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")

# ---------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------

WORDS = (
    "the of and to in is that it for was on are as with his they at be this have from or one had by "
    "word but not what all were we when your can said there use an each which she do how their if will "
    "up other about out many then them these so some her would make like him into time has look two more "
    "write go see number no way could people my than first water been call who oil its now find long down "
    "day did get come made may part over new sound take only little work know place year live me back give "
    "most very after thing our just name good sentence man think say great where help through much before "
    "line right too mean old any same tell boy follow came want show also around form three small set put "
    "end does another well large must big even such because turn here why ask went men read need land "
    "different home us move try kind hand picture again change off play spell air away animal house point "
    "don't it's I'm we'll they've she'd you're CAN'T HE'S O'Neil rock'n'roll tokenizer Transformer GPU "
    "naïve café résumé coöperate Zürich Ångström façade jalapeño"
).split()

CODE = [
    "def main():\n\tprint('hello')\n\treturn 0\n",
    "int main(int argc, char** argv) {\n    for (int i = 0; i < argc; ++i) {\n        puts(argv[i]);\n    }\n}\n",
    "    if (x == y)  {\n        z  =  x   +   y;\n    }\n",
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name DESC;",
    "#include <vector>\n\nstd::vector<int> v{1, 2, 3};\n",
    "fn add(a: i32, b: i32) -> i32 {\n\ta + b\n}",
    "\t\t\tindented with tabs\n\t  mixed \t tabs and spaces  \n",
    "x=1;y=2;z=x*y**2//3%4&5|6^7~8<<9>>10",
    "<html>\n  <body class=\"main\">\n    <p>Hello &amp; welcome</p>\n  </body>\n</html>",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
    "$ ls -la /usr/local/bin | grep -v '^d' && echo \"done\"\r\n",
    "// TODO(someone): fix   this\r\n/* block\r\n   comment */",
    "lambda x: [y for y in range(x) if y % 2 == 0]",
    "print(f\"{value:>10.3f} {name!r}\")",
    "    \n\n    \n",
    "a\u00a0b\u2003c\u3000d",
]

SNIPPETS = [
    # CJK, Japanese, Korean
    "我爱自然语言处理。今天天气很好！", "機械学習は楽しいです。カタカナとひらがな", "안녕하세요, 세계! 한국어 문장입니다.",
    "中文English混合text测试123", "繁體中文與简体中文", "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３",
    # RTL and other scripts
    "مرحبا بالعالم! هذه جملة عربية.", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Привет, мир! Ёжик.",
    "Γειά σου Κόσμε", "ሰላም ለዓለም", "ᚠᚢᚦᚨᚱᚲ", "Tiếng Việt có dấu",
    # emoji, ZWJ sequences, flags, skin tones, variation selectors
    "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "👍🏽 thumbs", "🇺🇸🇫🇷🇯🇵", "❤️ vs ❤", "🧑‍💻 coding 🚀✨", "😀😃😄😁😆😅",
    "👩🏾‍🤝‍👩🏻", "*️⃣ #️⃣ 1️⃣",
    # combining marks, decomposed forms
    "e\u0301 a\u0308 o\u0303 n\u0303", "Z\u0351\u0357\u0314a\u0315\u0328l\u0322g\u0335o\u0336",
    "\u1100\u1161\u11a8 decomposed hangul", "A\u030a vs \u00c5 vs \u212b", "ﬁ ligature ﬀ ﬃ", "ǅ titlecase",
    # control characters and odd whitespace
    "bell\x07 escape\x1b[31mred\x1b[0m", "nul\x00byte", "zero\u200bwidth\u200cjoiner\u200d", "\ufeffBOM start",
    "line\u2028separator\u2029para", "\x0b\x0c vertical tab form feed", "\r\n\r\n", "trailing spaces   ",
    # numbers
    "12345678901234567890", "3.14159265358979", "1,000,000.00", "2024-11-29T07:48:36Z", "abc123def456",
    "٣٤٥ Arabic-Indic digits", "Ⅻ roman numeral", "½ ¾ ⅓", "0x1F600 0b1010 1e-9", "v1.2.3-rc.4",
    # special-token text of every tokenizer here
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "a<|endoftext|>b",
    "<|im_start|><|im_end|>", "<|im_st", "< |im_start| >", "<s>hello</s>", " <s> spaced </s> ",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", "<unk>", "<think>\nhmm\n</think>\n\nok",
    "nai\u0308ve cafe\u0301 ab abc ab_ (ab) xab ab.", "<|endoftext|><|endoftext|>", "text<|im_end|>", "<|im_end|>text", "<repo_name>vosti<file_sep>main.cc",
    # contractions and case
    "I'm sure you'll see they're right, he'd've known.", "IT'S LOUD", "'s 't 're 've 'm 'll 'd", "can't won't shouldn't",
]

WHITESPACE = ["", " ", "  ", "   ", "\n", "\n\n", "\n\n\n", "\t", "\t\t", " \n ", "\n \n", " a", "a ", "  a  ", "a  b",
              "a\n\nb", " \t\n\r"]

INVALID_HEX = [
    "ff", "fe", "80", "bf", "c0af", "c1bf", "e080af", "eda080", "edbfbf", "eda080edb080", "f4908080", "f5808080",
    "c3", "e282", "f09f98", "61ff62", "e282ac80", "c328", "a0a1", "e228a1", "f0288cbc", "f8a1a1a1a1", "fcd0", "00ff00",
    "68656c6c6fc3", "f09f9880f09f98", "e6ad", "cebae1bdb9cf83cebcceb5ff",
]


def make_corpus(rng):
    """A deterministic list of entries: {"text": str} or {"hex": str}."""
    entries = []
    entries += [{"text": s} for s in WHITESPACE]
    entries += [{"text": s} for s in CODE]
    entries += [{"text": s} for s in SNIPPETS]
    entries += [{"hex": h} for h in INVALID_HEX]
    pieces = SNIPPETS + CODE + WHITESPACE
    # English prose.
    for _ in range(700):
        n = rng.randint(1, 40)
        words = [rng.choice(WORDS) for _ in range(n)]
        if rng.random() < 0.5:
            words[0] = words[0].capitalize()
        s = " ".join(words) + rng.choice([".", "!", "?", ",", ";", "", "...", " —", "\n"])
        if rng.random() < 0.2:
            s = " " + s
        entries.append({"text": s})
    # Mixtures of everything, with runs of spaces and newlines between.
    for _ in range(900):
        k = rng.randint(1, 5)
        parts = []
        for _ in range(k):
            r = rng.random()
            if r < 0.4:
                parts.append(rng.choice(pieces))
            elif r < 0.6:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
            elif r < 0.8:
                parts.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))))
            else:
                parts.append("".join(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2fff),
                                                     rng.randint(0x3000, 0x9fff), rng.randint(0x1f300, 0x1faff)]))
                                     for _ in range(rng.randint(1, 8))))
        sep = [rng.choice(["", " ", "  ", "\n", "\t", "\n\n", "   ", " \n"]) for _ in range(k)]
        entries.append({"text": "".join(p + s for p, s in zip(parts, sep))})
    # Random invalid byte strings: valid text with stray bytes spliced in.
    for _ in range(250):
        base = rng.choice(pieces + [" ".join(rng.choice(WORDS) for _ in range(5))]).encode("utf-8")
        b = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            pos = rng.randint(0, len(b))
            b[pos:pos] = bytes(rng.randint(0x80, 0xff) for _ in range(rng.randint(1, 3)))
        entries.append({"hex": bytes(b).hex()})
    # Random code points of every plane we use (no surrogates: a Python str fed to tokenizers cannot hold them).
    for _ in range(200):
        cps = []
        for _ in range(rng.randint(1, 12)):
            cp = rng.randint(1, 0x10ffff)
            while 0xd800 <= cp <= 0xdfff:
                cp = rng.randint(1, 0x10ffff)
            cps.append(chr(cp))
        entries.append({"text": "".join(cps)})
    # Long lines: a few KB of repeated content (BPE over long words, whitespace runs).
    entries.append({"text": " " * 3000})
    entries.append({"text": "a" * 5000})
    entries.append({"text": "\n" * 1000 + "x"})
    entries.append({"text": "9" * 4000})
    entries.append({"text": "🙂" * 1000})
    return entries


def entry_text(e):
    if "text" in e:
        return e["text"]
    return bytes.fromhex(e["hex"]).decode("utf-8", errors="replace")


BIG_SEEDS = [1, 2, 3]
BIG_BYTES = 100_000


def big_string(fragments, seed):
    """Must match the generator in tokenizer_fixture_test.cc byte for byte."""
    mask = (1 << 64) - 1
    state = seed & mask
    out = bytearray()
    frag_bytes = [f.encode("utf-8") for f in fragments]
    seps = [b" ", b"\n", b"  ", b"\t"]
    while len(out) < BIG_BYTES:
        state = (state * 6364136223846793005 + 1442695040888963407) & mask
        out += frag_bytes[(state >> 33) % len(frag_bytes)]
        out += seps[(state >> 20) & 3]
    return out.decode("utf-8")


def fnv1a64(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for b in int(i & 0xFFFFFFFF).to_bytes(4, "little"):
            h ^= b
            h = (h * 0x100000001B3) & ((1 << 64) - 1)
    return "%016x" % h


# ---------------------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------------------

GPT2_SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def training_texts(corpus, rng):
    texts = [entry_text(e) for e in corpus]
    extra = []
    for _ in range(3000):
        extra.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30))))
    return texts + extra + SNIPPETS * 5 + CODE * 5


def build_llama3_style(texts):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False, trim_offsets=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
        special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "add_bos_token": True,
              "chat_template": open(os.path.join(DATA, "templates", "llama3_3.jinja")).read()}
    return tok, config


def build_qwen2_style(texts):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False, trim_offsets=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=2500, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    # Qwen3 adds <think> / </think> as non-special added tokens; an lstrip/rstrip token exercises those flags.
    tok.add_tokens([AddedToken("<think>", normalized=False, special=False),
                    AddedToken("</think>", normalized=False, special=False),
                    AddedToken("<tool_call>", normalized=False, special=False, lstrip=True, rstrip=True),
                    # single_word, and a normalized token matched after NFC (so "nai\u0308ve" finds it).
                    AddedToken("ab", normalized=False, special=False, single_word=True),
                    AddedToken("naïve", normalized=True, special=False)])
    config = {"bos_token": None, "eos_token": "<|im_end|>", "add_bos_token": False,
              "chat_template": open(os.path.join(DATA, "templates", "qwen2_5.jinja")).read()}
    return tok, config


def build_gpt2_style(texts):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    config = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "add_bos_token": False}
    return tok, config


def build_sentencepiece_style(texts, legacy):
    """Llama-2-style BPE: metaspace, byte fallback (<0x00>..<0xFF> in the vocab), <s> prepended."""
    byte_tokens = ["<0x%02X>" % b for b in range(256)]
    base = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    trainer = trainers.BpeTrainer(vocab_size=2500, min_frequency=2, special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens,
                                  limit_alphabet=300, show_progress=False)
    base.train_from_iterator(texts, trainer)
    j = json.loads(base.to_str())
    # Byte tokens are ordinary vocabulary entries in a SentencePiece model, not added tokens.
    j["added_tokens"] = [t for t in j["added_tokens"] if t["content"] not in set(byte_tokens)]
    j["model"]["byte_fallback"] = True
    j["model"]["fuse_unk"] = True
    tok = Tokenizer.from_str(json.dumps(j))
    if legacy:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(content=" ", left=1, right=0)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    config = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True}
    return tok, config


def write_sentencepiece_gguf(tokenizer_json_path, out_dir):
    """A GGUF holding only tokenizer metadata, llama.cpp style: tokenizer.ggml.model=llama,
    tokens, scores, token types and no merges (readers derive them from the scores)."""
    import gguf
    j = json.load(open(tokenizer_json_path, encoding="utf-8"))
    vocab = j["model"]["vocab"]
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    types = []
    for t in tokens:
        if t == "<unk>":
            types.append(2)  # UNKNOWN
        elif t in ("<s>", "</s>"):
            types.append(3)  # CONTROL
        elif len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            types.append(6)  # BYTE
        else:
            types.append(1)  # NORMAL
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "tokenizer.gguf")
    w = gguf.GGUFWriter(path, arch="llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(8)
    w.add_head_count(1)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([-float(i) for i in range(len(tokens))])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(out_dir, gguf_file="tokenizer.gguf").backend_tokenizer


def load_smollm2(model_path):
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(os.path.dirname(model_path), gguf_file=os.path.basename(model_path))
    tok = hf.backend_tokenizer
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True, trim_offsets=True),
    ])
    return tok, hf


def expected_for(tok, corpus, fragments, rng):
    texts = [entry_text(e) for e in corpus]
    ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    with_special = [tok.encode(t, add_special_tokens=True).ids for t in texts[:100]]
    decode = [tok.decode(x, skip_special_tokens=False) for x in ids]
    decode_skip = {}
    for i, x in enumerate(ids):
        s = tok.decode(x, skip_special_tokens=True)
        if s != decode[i]:
            decode_skip[str(i)] = s
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    random_decode = []
    for _ in range(300):
        seq = [rng.randrange(vocab_size) for _ in range(rng.randint(1, 12))]
        random_decode.append([seq, tok.decode(seq, skip_special_tokens=False), tok.decode(seq, skip_special_tokens=True)])
    big = []
    for seed in BIG_SEEDS:
        s = big_string(fragments, seed)
        b = tok.encode(s, add_special_tokens=False).ids
        big.append({"seed": seed, "num_bytes": len(s.encode("utf-8")), "num_ids": len(b), "fnv64": fnv1a64(b)})
    return {"vocab_size": vocab_size, "encode": ids, "encode_special_first100": with_special, "decode": decode,
            "decode_skip_special": decode_skip, "random_decode": random_decode, "big": big}


def write_json(path, obj, compact=True):
    with open(path, "w", encoding="utf-8") as f:
        if compact:
            json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        else:
            json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


# ---------------------------------------------------------------------------------------
# Chat templates
# ---------------------------------------------------------------------------------------

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, how can I help?"},
     {"role": "user", "content": "Tell me a joke."}],
    [{"role": "system", "content": "  Be kind.  \n"}, {"role": "user", "content": " spaced  \n"},
     {"role": "assistant", "content": "Sure."}],
    [{"role": "user", "content": "Unicode: 你好 🌍 é\nnew\tline"}, {"role": "assistant", "content": "Noted: {{ not a tag }}"}],
    [{"role": "user", "content": "Think first."},
     {"role": "assistant", "content": "<think>\nI should answer.\n</think>\n\nThe answer is 4."},
     {"role": "user", "content": "And 3+3?"}],
    [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"},
     {"role": "assistant", "content": "<think>reasoning</think>a2"}],
    [{"role": "system", "content": "sys"}, {"role": "user", "content": "u"}, {"role": "system", "content": "late system"},
     {"role": "user", "content": "u2"}],
    [{"role": "user", "content": ""}],
    [],
]

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                    "unit": {"type": "string", "enum": ["C", "F"]}},
                   "required": ["city"]}}}]

TOOL_CONVERSATIONS = [
    [{"role": "user", "content": "Weather in Paris?"}],
    [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather in Paris?"},
     {"role": "assistant", "content": "",
      "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}}]},
     {"role": "tool", "content": "18 degrees"}],
]

TEMPLATES = {
    "smollm2": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "extras": [{}]},
    "qwen2_5": {"bos_token": None, "eos_token": "<|im_end|>", "extras": [{}]},
    "qwen3": {"bos_token": None, "eos_token": "<|im_end|>",
              "extras": [{}, {"enable_thinking": False}, {"enable_thinking": True}]},
    "llama3_2": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                 "extras": [{"date_string": "29 Nov 2026"}]},
    "llama3_3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                 "extras": [{}, {"date_string": "01 Jan 2025"}]},
    "gemma3": {"bos_token": "<bos>", "eos_token": "<eos>", "extras": [{}]},
}


def chat_cases(smollm2_template, only=None):
    """The cases of every template (or of the names in `only`, reading smollm2's from its file)."""
    from transformers.utils.chat_template_utils import render_jinja_template
    sources = {name: open(os.path.join(DATA, "templates", name + ".jinja")).read()
               for name in TEMPLATES if name != "smollm2" or only is not None}
    if only is None:
        sources["smollm2"] = smollm2_template
        with open(os.path.join(DATA, "templates", "smollm2.jinja"), "w") as f:
            f.write(smollm2_template)
    cases = []
    for name, spec in TEMPLATES.items():
        if only is not None and name not in only:
            continue
        for extra in spec["extras"]:
            for conv in CONVERSATIONS:
                for gen in (False, True):
                    case = {"template": name, "messages": conv, "add_generation_prompt": gen,
                            "bos_token": spec["bos_token"], "eos_token": spec["eos_token"], "extra": extra}
                    kwargs = dict(extra)
                    kwargs["bos_token"] = spec["bos_token"]
                    kwargs["eos_token"] = spec["eos_token"]
                    try:
                        out, _ = render_jinja_template(conversations=[conv], chat_template=sources[name],
                                                       add_generation_prompt=gen, **kwargs)
                        case["expected"] = out[0]
                    except Exception as exc:  # noqa: BLE001 -- the error itself is the expectation
                        case["error"] = type(exc).__name__ + ": " + str(exc)
                    cases.append(case)
        if name == "smollm2":
            continue
        for conv in TOOL_CONVERSATIONS:
            case = {"template": name, "messages": conv, "add_generation_prompt": True, "tools": TOOLS,
                    "bos_token": spec["bos_token"], "eos_token": spec["eos_token"], "extra": spec["extras"][-1]}
            kwargs = dict(spec["extras"][-1], bos_token=spec["bos_token"], eos_token=spec["eos_token"])
            try:
                out, _ = render_jinja_template(conversations=[conv], tools=TOOLS, chat_template=sources[name],
                                               add_generation_prompt=True, **kwargs)
                case["expected"] = out[0]
            except Exception as exc:  # noqa: BLE001
                case["error"] = type(exc).__name__ + ": " + str(exc)
            cases.append(case)
    return cases


def remake_chat_cases(names):
    """Replaces the cases of the named templates in chat_templates.json, keeping the others."""
    path = os.path.join(DATA, "chat_templates.json")
    with open(path) as f:
        cases = [c for c in json.load(f)["cases"] if c["template"] not in names]
    fresh = chat_cases(None, only=names)
    write_json(path, {"cases": cases + fresh}, compact=False)
    print("chat cases:", len(fresh), "for", ", ".join(names), "errors:", sum("error" in c for c in fresh))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/vosti/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--chat-only", nargs="+", default=None, metavar="TEMPLATE",
                    help="remake only these templates' chat cases (nothing else is touched)")
    args = ap.parse_args()
    if args.chat_only:
        remake_chat_cases(args.chat_only)
        return 0
    rng = random.Random(20261129)
    corpus = make_corpus(rng)
    fragments = [e["text"] for e in corpus if "text" in e and e["text"]][:400:3]
    os.makedirs(DATA, exist_ok=True)
    write_json(os.path.join(DATA, "corpus.json"), {"entries": corpus, "big_fragments": fragments}, compact=False)
    print("corpus:", len(corpus), "entries")

    texts = training_texts(corpus, random.Random(7))
    built = {
        "bpe_llama3": build_llama3_style(texts),
        "bpe_qwen2": build_qwen2_style(texts),
        "bpe_gpt2": build_gpt2_style(texts),
        "spm_metaspace": build_sentencepiece_style(texts, legacy=False),
        "spm_legacy": build_sentencepiece_style(texts, legacy=True),
    }
    for name, (tok, config) in built.items():
        d = os.path.join(DATA, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        write_json(os.path.join(d, "tokenizer_config.json"), config, compact=False)
        write_json(os.path.join(DATA, name + ".expected.json"), expected_for(tok, corpus, fragments, random.Random(name)))
        print(name, "vocab", tok.get_vocab_size())

    spm_gguf = write_sentencepiece_gguf(os.path.join(DATA, "spm_metaspace", "tokenizer.json"), os.path.join(DATA, "spm_gguf"))
    write_json(os.path.join(DATA, "spm_gguf.expected.json"), expected_for(spm_gguf, corpus, fragments, random.Random(11)))
    print("spm_gguf vocab", spm_gguf.get_vocab_size())

    smol, hf = load_smollm2(args.model)
    write_json(os.path.join(DATA, "smollm2.expected.json"), expected_for(smol, corpus, fragments, random.Random(3)))
    print("smollm2 vocab", smol.get_vocab_size(), "post", smol.post_processor)

    cases = chat_cases(hf.chat_template)
    write_json(os.path.join(DATA, "chat_templates.json"), {"cases": cases}, compact=False)
    print("chat cases:", len(cases), "errors:", sum("error" in c for c in cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
