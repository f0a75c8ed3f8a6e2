#!/usr/bin/env python3
"""Writes the tokenizer test corpus: deterministic (seeded) lines of prose with contractions, code,
numbers in many scripts, whitespace runs (ASCII and Unicode spaces), emoji with skin-tone
modifiers, joiners and flags, CJK, combining marks, right-to-left scripts, and soups of random
assigned code points. With --all-code-points it instead writes one probe line per Unicode scalar
value c, "a{c}a 1{c}1 !{c}!", whose pieces show whether c is a letter, a number, a space or other
to GPT-2's pattern. usage: make_tokenizer_corpus.py OUTPUT [--lines N] [--all-code-points]"""
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
    parser.add_argument("--all-code-points", action="store_true")
    args = parser.parse_args()
    with open(args.output, "w", encoding="utf-8", newline="") as f:
        if args.all_code_points:
            for cp in range(0x110000):
                if not 0xD800 <= cp <= 0xDFFF and cp != 0x0A:
                    c = chr(cp)
                    f.write(f"a{c}a 1{c}1 !{c}!\n")
            return
        rng = random.Random(20240516)
        for _ in range(args.lines):
            f.write(line(rng))


if __name__ == "__main__":
    main()
