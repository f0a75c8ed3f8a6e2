"""A Hugging Face tokenizer through the whole workflow (docs/DATA.md "Hugging Face tokenizers"),
with the SentencePiece-style file of scripts/fetch_hf_tokenizers.sh (BOS before each document):
prepare-data of a .jsonl (one BOS per document, the ids of each document the tokenizer's, the
file copied beside the data sets, the same tokens with 1 and 2 threads) and of a CJK text cut
between workers (the ids of the whole text); convert --from-hf of a
tiny Llama whose directory holds the tokenizer (the checkpoint records its SHA-256, the copy goes
beside it); train --init-from carries it into the checkpoint folder; generate decodes with it and
refuses a missing or different file; eval refuses data of another tokenizer; malformed tokenizer
files and text that is not UTF-8 are one error line each, exit 1, nothing written.
"""

import hashlib
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import gpt_harness as h  # noqa: E402

try:
    import h5py
    import numpy as np
    from test_llama_hf import BASE, hf_weights, write_hf_dir
except ImportError as missing:  # pragma: no cover
    print(f"skipped: {missing}")
    sys.exit(77)

SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
SP = os.path.join(SOURCE, "third_party", "hf", "llama2")  # SentencePiece-style, 32,000 tokens
BYTE_LEVEL = os.path.join(SOURCE, "third_party", "hf", "llama3")
if not all(os.path.exists(os.path.join(d, "tokenizer.json")) for d in (SP, BYTE_LEVEL)):
    print("skipped: needs scripts/fetch_hf_tokenizers.sh's files")
    sys.exit(77)

LLAMA = dict(BASE, architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=32000,
             num_hidden_layers=1, tie_word_embeddings=False, attention_bias=False)
DOCUMENTS = [f"Document {i}: the quick brown fox jumps over {i * 7} lazy dogs.\nA second line."
             for i in range(300)]


def sha256(path):
    with open(path, "rb") as f:
        return "hf-sha256:" + hashlib.sha256(f.read()).hexdigest()


def one_error(test, r, *expected):
    test.assertEqual(r.returncode, 1, r.describe())
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    test.assertEqual(len(errors), 1, r.describe())
    for text in expected:
        test.assertIn(text, errors[0])


class HfTokenizerTest(h.TempDirTest):

    def prepare(self, tokenizer, folder, threads=1, extra=()):
        jsonl = self.path("docs.jsonl")
        with open(jsonl, "w") as f:
            for d in DOCUMENTS:
                f.write(json.dumps({"text": d}) + "\n")
        prefix = self.path(folder, "data")
        h.run("prepare-data", ["--input", jsonl, "--output", prefix, "--tokenizer", tokenizer,
                               "--threads", threads, "--read-mb", 1, "--val-fraction", 0.2]
              + list(extra), check=True)
        return prefix

    def test_workflow(self):
        # prepare-data: BOS (id 1) before each document, the tokenizer copied beside.
        prefix = self.prepare(SP, "data")
        with h5py.File(prefix + ".train.h5") as f:
            train = f["tokens"][:]
            self.assertEqual(f.attrs["tokenizer"], sha256(os.path.join(SP, "tokenizer.json")))
            self.assertEqual(int(f.attrs["vocab_size"]), 32000)
        with h5py.File(prefix + ".val.h5") as f:
            val = f["tokens"][:]
        self.assertEqual(int(train[0]), 1)
        self.assertEqual(int((train == 1).sum() + (val == 1).sum()), len(DOCUMENTS))
        self.assertTrue(os.path.exists(self.path("data", "tokenizer.json")))
        two = self.prepare(SP, "data2", threads=2)
        with h5py.File(two + ".train.h5") as f:
            self.assertTrue(np.array_equal(f["tokens"][:], train))

        # convert --from-hf with the tokenizer in the directory.
        source = write_hf_dir(self.path("hf"), LLAMA, hf_weights(LLAMA, 0), "F32", 1)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(SP, name), source)
        os.makedirs(self.path("ck"))
        model = self.path("ck", "model.h5")
        h.run("convert", ["--from-hf", source, "--output", model], check=True)
        identity = sha256(os.path.join(SP, "tokenizer.json"))
        self.assertEqual(h.load_checkpoint_attrs(model)["tokenizer"], identity)
        self.assertTrue(os.path.exists(self.path("ck", "tokenizer.json")))

        # train --init-from carries the tokenizer into its checkpoint folder.
        h.train(["--init-from", model, "--data", prefix + ".train.h5", "--steps", 2,
                 "--global-batch-size", 2, "--micro-batch-size", 2, "--seq-len", 16,
                 "--threads", 1, "--checkpoint-dir", self.path("run")], tiny=False, timeout=120)
        self.assertEqual(sha256(self.path("run", "tokenizer.json")), identity)

        # generate decodes with the copy; a missing or other file is refused.
        r = h.run("generate", ["--checkpoint", self.path("run"), "--prompt", "The quick brown",
                               "--max-new-tokens", 4, "--temperature", 0], check=True)
        self.assertTrue(r.stdout.splitlines()[-1].startswith("The quick brown"), r.describe())
        os.rename(self.path("run", "tokenizer.json"), self.path("moved.json"))
        one_error(self, h.run("generate", ["--checkpoint", self.path("run"), "--prompt", "a"]),
                  identity, "--tokenizer")
        one_error(self, h.run("generate", ["--checkpoint", self.path("run"), "--prompt", "a",
                                           "--tokenizer", BYTE_LEVEL]), identity)
        h.run("generate", ["--checkpoint", self.path("run"), "--prompt", "a", "--max-new-tokens",
                           2, "--tokenizer", self.path("moved.json")], check=True)

        # eval: data of another tokenizer is refused, naming both.
        other = self.prepare(BYTE_LEVEL, "other")
        one_error(self, h.run("eval", ["--checkpoint", model, "--data", other + ".val.h5"]),
                  identity, sha256(os.path.join(BYTE_LEVEL, "tokenizer.json")))

    def test_cut_documents_encode_as_whole(self):
        """A 2.5 MB text of CJK lines (letters, digits, punctuation) cut into 1 MB pieces for two
        workers, and split into train and validation, gives the ids of the whole text encoded at
        once (Llama 3's regex, and the SentencePiece file's single word)."""
        rng = np.random.default_rng(5)
        lines = ["".join(chr(0x4E00 + int(c)) for c in rng.integers(0, 3000, int(n)))
                 + ["", "。", "，", " 123", "x"][int(k)]
                 for n, k in zip(rng.integers(5, 30, 45000), rng.integers(0, 5, 45000))]
        text = self.path("cjk.txt")
        with open(text, "w") as f:
            f.write("\n".join(lines) + "\n")
        for tokenizer in (BYTE_LEVEL, SP):
            with self.subTest(tokenizer=os.path.basename(tokenizer)):
                name = os.path.basename(tokenizer)
                h.run("prepare-data", ["--input", text, "--output", self.path(name, "whole"),
                                       "--tokenizer", tokenizer, "--read-mb", 4096,
                                       "--val-fraction", 0, "--threads", 1], check=True)
                h.run("prepare-data", ["--input", text, "--output", self.path(name, "cut"),
                                       "--tokenizer", tokenizer, "--read-mb", 1,
                                       "--threads", 2], check=True)
                with h5py.File(self.path(name, "whole.train.h5")) as f:
                    whole = f["tokens"][:]
                with h5py.File(self.path(name, "cut.train.h5")) as f, \
                        h5py.File(self.path(name, "cut.val.h5")) as g:
                    cut = np.concatenate([f["tokens"][:], g["tokens"][:]])
                self.assertTrue(np.array_equal(whole, cut))

    def test_bad_tokenizer_files_and_text(self):
        with open(os.path.join(BYTE_LEVEL, "tokenizer.json")) as f:
            good = json.load(f)
        text = self.path("in.txt")
        with open(text, "w") as f:
            f.write("hello world\n" * 20)

        def variant(name, change):
            t = json.loads(json.dumps(good))
            change(t)
            path = self.path(name + ".json")
            with open(path, "w") as f:
                json.dump(t, f)
            return path

        def duplicate_id(t):
            t["model"]["vocab"]["zzzz-extra"] = 5

        with open(os.path.join(BYTE_LEVEL, "tokenizer.json"), "rb") as f:
            truncated = self.path("truncated.json")
            with open(truncated, "wb") as out:
                out.write(f.read()[:100000])
        cases = {
            "truncated": (truncated, "not valid JSON"),
            "unknown merge": (variant("merge", lambda t: t["model"]["merges"].insert(0, "qq zz")),
                              "model.merges[0]"),
            "duplicate id": (variant("dup", duplicate_id), "id 5 is used twice"),
            "unigram": (variant("unigram", lambda t: t["model"].update(type="Unigram")),
                        "model.type"),
            "normalizer": (variant("norm", lambda t: t.update(normalizer={"type": "BertNormalizer"})),
                           "normalizer.type"),
        }
        for name, (path, expected) in cases.items():
            with self.subTest(case=name):
                out = self.path(name.replace(" ", "_"), "data")
                r = h.run("prepare-data", ["--input", text, "--output", out, "--tokenizer", path])
                one_error(self, r, path, expected)
                self.assertFalse(os.path.exists(out + ".train.h5"))
        bad = self.path("bad.txt")
        with open(bad, "wb") as f:
            f.write(b"good text\n" * 5 + b"\xff\xfe broken\n")
        r = h.run("prepare-data", ["--input", bad, "--output", self.path("bad", "data"),
                                   "--tokenizer", BYTE_LEVEL])
        one_error(self, r, "invalid UTF-8 at byte 50")
        self.assertFalse(os.path.exists(self.path("bad", "data.train.h5")))

    def test_backtracking_pattern_is_refused_naming_the_file(self):
        """A Split pattern that backtracks without bound: `(a+)+$` on a run of a's before a b
        (once an internal check's text naming no file in prepare-data, and no file at all in
        generate), and one whose every match just stays under PCRE2's own limit (once 1.5 KB/s,
        exit 0): one error line naming the tokenizer file, in prepare-data and generate alike."""
        with open(os.path.join(BYTE_LEVEL, "tokenizer.json")) as f:
            t = json.load(f)
        paths = {}
        for name, pattern in (("catastrophic", "(a+)+$"), ("crawling", "(a+)+$|[\\s\\S]")):
            t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = pattern
            os.makedirs(self.path(name))
            paths[name] = self.path(name, "tokenizer.json")
            with open(paths[name], "w") as f:
                json.dump(t, f)
        texts = {"catastrophic": "hello " + "a" * 40 + "b\n", "crawling": ("a" * 20 + "b ") * 200}
        for name, path in paths.items():
            with self.subTest(tokenizer=name):
                text = self.path(name + ".txt")
                with open(text, "w") as f:
                    f.write(texts[name])
                out = self.path(name + "-data", "data")
                r = h.run("prepare-data", ["--input", text, "--output", out, "--tokenizer", path,
                                           "--val-fraction", 0], timeout=30)
                one_error(self, r, path, "pattern.Regex", "matching steps a byte")
                self.assertFalse(os.path.exists(out + ".train.h5"))
        # generate: a checkpoint of that tokenizer (its data has no run of a's), the prompt has.
        plain = self.path("plain.txt")
        with open(plain, "w") as f:
            f.write("hello world, the quick brown fox\n" * 40)
        data = self.path("plain-data", "data")
        h.run("prepare-data", ["--input", plain, "--output", data, "--tokenizer",
                               paths["catastrophic"], "--val-fraction", 0], check=True)
        h.train(["--data", data + ".train.h5", "--steps", 0, "--checkpoint-dir", self.path("ck")])
        r = h.run("generate", ["--checkpoint", self.path("ck"), "--prompt", texts["catastrophic"],
                               "--max-new-tokens", 1], timeout=30)
        one_error(self, r, self.path("ck", "tokenizer.json"), "matching steps a byte")


if __name__ == "__main__":
    h.main()
