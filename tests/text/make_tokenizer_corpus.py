#!/usr/bin/env python3
"""Writes the tokenizer test corpus: deterministic (seeded) lines of prose with contractions, code,
numbers in many scripts, whitespace runs (ASCII and Unicode spaces), emoji with skin-tone
modifiers, joiners and flags, CJK, combining marks, right-to-left scripts, and soups of random
assigned code points. With --all-code-points it instead writes one probe line per Unicode scalar
value c, "a{c}a 1{c}1 !{c}!", whose pieces show whether c is a letter, a number, a space or other
to GPT-2's pattern. --seed picks another deterministic corpus (the default seed gives the corpus the
GPT-2 test has always used). --extended mixes in lines aimed at the Hugging Face tokenizers:
Unicode normalisation cases (NFC for Qwen3), lone and literal "▁" (SentencePiece's space),
strings that look like special tokens but are not, long runs (one BPE word of thousands of
symbols for Llama 2), long digit runs, bidirectional text with its controls, more emoji sequences.
usage: make_tokenizer_corpus.py OUTPUT [--lines N] [--seed N] [--extended] [--all-code-points]"""
import argparse
import random
import unicodedata

WORDS = ("the of and to in is was he for it with as his on be at by had are but from or have "
         "an they which one you were all her she there would their we him been has when who will "
         "more no if out so said what up its about into than them can only other new some could "
         "time these two may then do first any my now such like our over man me even most made "
         "after also did many before must through back years where much your way well down "
         "naïve café résumé Zürich façade coöperate Ångström Øresund").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'LL", "’s", "''",
                "'", "'x", "'ss"]
CODE = ["int main(int argc, char** argv) {", "    return x->y[i] + 0x1F;", "\tif (a && !b) {",
        "def f(x):\n    return {'k': [1, 2, 3]}", "for (i = 0; i < n; ++i) s += a[i] * b[i];",
        "#include <vector>", "  // comment with   spaces", "x = y if y is not None else -1e-9",
        "SELECT * FROM t WHERE id = 42;", "fn main() -> Result<(), Box<dyn Error>> {", "}}}",
        "<div class=\"a\">&nbsp;</div>", "$ echo $HOME | grep -v '^#' >> ~/.log 2>&1",
        "\"\\u00e9\\n\\t\"", "lambda: (yield)", "a=b==c!=d<=e>=f", "// TODO(me): ...", "@@ -1,3 +1,4 @@"]
NUMBERS = ["0", "7", "42", "123456789", "3.14159", "-2.5e-10", "1,000,000", "2024-06-01",
           "12:34:56", "0xDEADBEEF", "+1 (555) 010-9999", "١٢٣٤", "०१२३", "一二三", "Ⅻ", "½", "²³",
           "৩৪", "๑๒๓", "１２３", "𝟘𝟙𝟚", "10⁻³", "№5", "99.9%", "$1.50", "€20", "1e100"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", " \t ", "\r\n", "\r", "\u00a0", "\u3000", "\u2028",
          "\u2029", "\u0085", "\u180e", "\u200b", "\u2003", "\u202f", "\u205f", "\u1680", "\f",
          "\v", "\u000b \u000c", "    \n", " \n \n", "\n\n\n", "\u00a0 \u00a0"]
EMOJI = ["👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇳", "1️⃣", "❤️", "🧑🏿‍💻", "😀😃😄",
         "🤷‍♀️", "👩🏻‍❤️‍💋‍👨🏼", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "☕", "✌🏾", "🫠"]
SCRIPTS = ["日本語のテキストです。", "中文文本，包括标点符号。", "한국어 텍스트입니다.", "ひらがな カタカナ",
           "e\u0301 a\u0300 o\u0308 n\u0303", "Tiếng Việt có dấu", "हिन्दी पाठ्य", "ภาษาไทย",
           "العربية نص من اليمين", "עברית עם נִקּוּד", "\u200fRTL mark\u200e", "فارسی ۱۲۳",
           "Ελληνικά κείμενο", "Русский текст, ёжик", "ქართული", "Ꭰ Cherokee", "ܐܪܡܝܐ",
           "𝔉𝔯𝔞𝔨𝔱𝔲𝔯", "ﬁ ﬂ ligatures", "Z\u0351\u036b\u0343a\u0364l\u0358g\u0352o", "ᠮᠣᠩᠭᠣᠯ"]

# --extended only. Decomposed and otherwise non-NFC text: NFC composes it (Qwen3's normaliser),
# and each case exercises a different part of it: plain composition, canonical reordering of marks,
# Hangul jamo (composed by rule, not by table), singletons (Å sign, Ohm, CJK compatibility
# ideographs), composition exclusions (Devanagari qa, Hebrew presentation forms), marks that
# block composition, and a mark with nothing to attach to.
NORMALIZATION = ["e\u0301cole", "a\u0323\u0302", "a\u0302\u0323", "o\u031b\u0300",
                 "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af",
                 "\u1100\u1161 \u1161\u11a8", "\u212b\u2126\u212a", "\uf900\uf901\ufa10",
                 "\u0915\u093c \u0958", "\ufb1d\ufb2a\ufb4e", "\u0340\u0341\u0343\u0344",
                 "A\u030a\u0301", "u\u0308\u0304", "s\u0323\u0307 s\u0307\u0323", "\u0301start",
                 "Ä\u0308", "\u00c5 A\u030a \u212b", "ệ e\u0323\u0302 e\u0302\u0323",
                 "\u0f73\u0f75\u0f81", "\u1e9b\u0323", "\u0ddd \u0dd9\u0dcf\u0dca",
                 "\u304b\u3099\u30cf\u309a", "\u0627\u0653 \u0648\u0654"]
# "▁" (U+2581) is what the Llama 2 normaliser turns spaces into; written in the text it decodes to
# a space like a real one, and runs of it meet the "▁▁..." tokens.
METASPACE = ["\u2581", "\u2581\u2581", "a\u2581b", "\u2581the", " \u2581 ",
             "\u2581\u2581\u2581\u2581x", "word\u2581"]
# Strings close to the special tokens of Llama 3, Qwen3 and Llama 2 that must stay ordinary text
# (a prefix, a wrong case, a space inside). The tests drop any generated line that does contain an
# added token, as two pieces could join into one.
LOOKALIKES = ["<|begin_of_text", "<|begin_of_text|", "begin_of_text|>", "<|BEGIN_OF_TEXT|>",
              "<| end_of_text |>", "<|im_start", "<|im_end>", "<im_start|>", "< s>", "<S>", "</ s>",
              "<s >", "</S>", "<unk", "<UNK>", "<|endoftext", "<|eot_id", "<think", "</think >",
              "<|reserved_special_token_|>", "<|start_header_id>", "<0x0A>", "<0xFF>", "<|", "|>"]
# Right-to-left and bidirectional text: Arabic with harakat and tatweel, Hebrew, Syriac, Thaana,
# N'Ko, mixed with digits and Latin, and the embedding, override and isolate controls.
BIDI = ["مَرْحَبًا بِالْعَالَمِ", "كتـــاب", "שָׁלוֹם עוֹלָם", "ܫܠܡܐ ܥܠܡܐ", "ދިވެހި", "ߒߞߏ",
        "abc עברית 123 العربية",
        "\u202bRLE\u202c \u202eRLO\u202c \u2067RLI\u2069 \u2066LRI\u2069 \u2068FSI\u2069",
        "\u061c\u200f\u200e", "(١٢٣) [456]", "السعر: ٤٥٫٥٠ ر.س", "א״ב ג׳"]
# More emoji: keycaps, text and emoji presentation selectors, joiner sequences of several people,
# tags, a lone joiner, and modifiers without a base.
EMOJI_MORE = ["#️⃣*️⃣0️⃣", "☺︎☺️", "👩‍👩‍👧", "🧑‍🤝‍🧑", "👁️‍🗨️", "🏃🏽‍♂️‍➡️", "\u200d", "a\u200db",
              "🏻🏼", "🐈‍⬛", "🇦🇶🇿🇿", "🏴‍☠️",
              "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"]


def extended(rng):
    kind = rng.random()
    if kind < 0.25:
        text = rng.choice(NORMALIZATION)
        if rng.random() < 0.5:
            text = prose(rng) + rng.choice(" \t") + text + rng.choice(["", " ", "."])
    elif kind < 0.35:
        text = rng.choice(WORDS).join(rng.choice(METASPACE) for _ in range(rng.randint(1, 4)))
    elif kind < 0.47:
        text = " ".join(rng.choice(LOOKALIKES + WORDS) for _ in range(rng.randint(1, 6)))
    elif kind < 0.62:
        text = rng.choice(BIDI) + rng.choice(["", " ", "\t"]) + rng.choice(BIDI + NUMBERS)
    elif kind < 0.72:
        text = "".join(rng.choice(EMOJI_MORE + EMOJI) for _ in range(rng.randint(1, 6)))
    elif kind < 0.82:
        # digit runs: Llama 3 groups them by up to three, Qwen3 splits every digit
        text = "".join(rng.choice("0123456789") for _ in range(rng.randint(4, 40)))
        if rng.random() < 0.5:
            text = rng.choice(WORDS) + text + rng.choice(["", ".5", ",000", "x"])
    elif kind < 0.92:
        # mixed scripts and categories with no space between them
        text = "".join(rng.choice(WORDS + NUMBERS + SCRIPTS + EMOJI + BIDI)
                       for _ in range(rng.randint(2, 5)))
    elif kind < 0.96:
        # whitespace runs: indentation, trailing spaces, Windows line ends inside a line
        text = (rng.choice([" ", "\t", "\u3000"]) * rng.randint(5, 40) + prose(rng) +
                rng.choice([" " * rng.randint(2, 9), "\r\n", "\r\n\r\n", "\t\r\n"]) + prose(rng))
    else:
        # long runs: one piece or one BPE word of thousands of symbols
        text = rng.choice(["a", "ab", " ", "\u2581", "é", "日", "🙂", "x ", "-", "0", "\u0301"]) * \
            rng.randint(200, 3000)
    return text + "\n"


def assigned(cp):
    if 0xD800 <= cp <= 0xDFFF:
        return False
    return unicodedata.category(chr(cp)) not in ("Cn", "Cs")


def soup(rng):
    out = []
    for _ in range(rng.randint(1, 12)):
        while True:
            cp = rng.choice((rng.randint(0x20, 0x2FF), rng.randint(0x300, 0xFFFF),
                             rng.randint(0x10000, 0x1FFFF), rng.randint(0x20000, 0x10FFFF)))
            if assigned(cp):
                break
        out.append(chr(cp))
        if rng.random() < 0.3:
            out.append(rng.choice(" \t'1a!"))
    return "".join(out)


def prose(rng):
    words = []
    for _ in range(rng.randint(3, 18)):
        w = rng.choice(WORDS)
        r = rng.random()
        if r < 0.1:
            w = w.capitalize()
        elif r < 0.13:
            w = w.upper()
        if rng.random() < 0.15:
            w += rng.choice(CONTRACTIONS)
        if rng.random() < 0.1:
            w += rng.choice(",.;:!?…—-\"')")
        words.append(w)
    sep = rng.choice([" ", " ", " ", "  ", "\t", "\u00a0"])
    return sep.join(words)


def mixed(rng):
    parts = [rng.choice(group) for group in rng.sample(
        [WORDS, CONTRACTIONS, CODE, NUMBERS, SPACES, EMOJI, SCRIPTS], rng.randint(2, 5))]
    return "".join(p if rng.random() < 0.5 else p + rng.choice(SPACES) for p in parts)


def line(rng):
    kind = rng.random()
    if kind < 0.3:
        text = prose(rng)
    elif kind < 0.42:
        text = rng.choice(CODE)
    elif kind < 0.52:
        text = " ".join(rng.choice(NUMBERS) for _ in range(rng.randint(1, 6)))
    elif kind < 0.6:
        text = rng.choice(SPACES) * rng.randint(1, 4) + prose(rng) + rng.choice(SPACES)
    elif kind < 0.68:
        text = "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 5)))
    elif kind < 0.78:
        text = rng.choice(SCRIPTS) + rng.choice(["", " ", "  "]) + rng.choice(SCRIPTS)
    elif kind < 0.9:
        text = mixed(rng)
    else:
        text = soup(rng)
    return text + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output")
    parser.add_argument("--lines", type=int, default=12000)
    parser.add_argument("--seed", type=int, default=20240516)
    parser.add_argument("--extended", action="store_true")
    parser.add_argument("--all-code-points", action="store_true")
    args = parser.parse_args()
    with open(args.output, "w", encoding="utf-8", newline="") as f:
        if args.all_code_points:
            for cp in range(0x110000):
                if not 0xD800 <= cp <= 0xDFFF and cp != 0x0A:
                    c = chr(cp)
                    f.write(f"a{c}a 1{c}1 !{c}!\n")
            return
        rng = random.Random(args.seed)
        for _ in range(args.lines):
            # Without --extended the random stream is consumed exactly as it always was.
            if args.extended and rng.random() < 0.25:
                f.write(extended(rng))
            else:
                f.write(line(rng))


if __name__ == "__main__":
    main()
