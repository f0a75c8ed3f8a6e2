// The GPT-2 tokenizer: merge order and pre-tokenization on a small hand-made vocabulary, every
// malformed-file error, and, with GPT-2's own files (scripts/fetch_gpt2_tokenizer.sh; skipped
// without them), ids published by OpenAI's tiktoken (gpt2, encode_ordinary) for sample strings,
// decode(encode(x)) == x on a megabyte of random valid UTF-8, and the invalid-UTF-8 error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "framework/check.h"
#include "framework/json.h"
#include "framework/text/gpt2_tokenizer.h"

namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  const fs::path dir = fs::temp_directory_path() / ("gpt2_tok_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The byte alphabet's character for byte b, as the files spell tokens (OpenAI bytes_to_unicode).
std::string byte_char(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  int cp = b;
  if (!printable) {
    cp = 256;
    for (int x = 0; x < b; ++x)
      if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) ++cp;
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// A vocabulary of the 256 bytes plus `extra` tokens (in the byte alphabet), and the merges.
struct TinyFiles {
  fs::path vocab, merges;
};
TinyFiles tiny_files(const std::vector<std::string>& extra, const std::string& merges,
                     const std::string& name) {
  gpt::Json vocab = gpt::Json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  int id = 256;
  for (const std::string& t : extra) vocab[t] = id++;
  const fs::path dir = temp_dir();
  TinyFiles f{dir / (name + ".json"), dir / (name + ".bpe")};
  write(f.vocab, vocab.dump());
  write(f.merges, "#version: 0.2\n" + merges);
  return f;
}

void expect_input_error(const std::function<void()>& call, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "no error";
  } catch (const gpt::Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    for (const std::string& p : parts) EXPECT_NE(what.find(p), std::string::npos) << what;
  }
}

TEST(Gpt2Tokenizer, MergesByRankLeftmostFirst) {
  // ab (rank 0) before bc (rank 1): "abc" -> ab, c; "bcab" -> bc, ab; "abab" -> abab.
  const TinyFiles f = tiny_files({"ab", "bc", "abab", "Ġx"}, "a b\nb c\nab ab\nĠ x\n", "rank");
  gpt::Gpt2Tokenizer tok(f.vocab.string(), f.merges.string());
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.eot(), -1);
  EXPECT_EQ(tok.encode("abc"), (std::vector<int32_t>{256, 'c'}));
  EXPECT_EQ(tok.encode("bcab"), (std::vector<int32_t>{257, 256}));
  EXPECT_EQ(tok.encode("abab"), (std::vector<int32_t>{258}));
  // " x" is one piece with its leading space (Ġ is byte 32); "x x" is x then " x".
  EXPECT_EQ(tok.encode("x x"), (std::vector<int32_t>{'x', 259}));
  // Pieces never merge across: "ab" in "a" + "'s"... the apostrophe-s starts a new piece.
  EXPECT_EQ(tok.encode("b's"), (std::vector<int32_t>{'b', '\'', 's'}));
  EXPECT_EQ(tok.decode(tok.encode("abc bcab x")), "abc bcab x");
  EXPECT_THROW(tok.decode(std::vector<int32_t>{260}), gpt::Error);
}

TEST(Gpt2Tokenizer, BadFilesNameTheFileAndTheProblem) {
  const TinyFiles good = tiny_files({"ab"}, "a b\n", "good");
  const fs::path dir = temp_dir();
  const std::string merges = good.merges.string(), vocab = good.vocab.string();
  const std::string missing = (dir / "missing.json").string();
  expect_input_error([&] { gpt::Gpt2Tokenizer(missing, merges); }, {missing, "no such file"});
  expect_input_error([&] { gpt::Gpt2Tokenizer(vocab, missing); }, {missing, "no such file"});
  // Each bad file next to a good one of the other kind: the error names the file and the problem.
  struct BadFile {
    const char* name;
    bool is_vocab;  // else merges
    std::string text;
    std::vector<std::string> problem;
  };
  const BadFile bad_files[] = {
      {"not.json", true, "{\"a\": 1,", {}},
      {"bad_id.json", true, "{\"a\": 5}", {"\"a\"", "not an integer in [0, 1)"}},
      {"twice.json", true, "{\"a\": 0, \"b\": 0}", {"id 0 is used twice"}},
      {"no_bytes.json", true, "{\"a\": 0}", {"no token for the byte 0"}},
      {"alien.json", true, "{\"\\u4e00\": 0}", {"byte alphabet"}},
      {"one_part.bpe", false, "#version: 0.2\na b\nab\n", {"line 3", "two tokens"}},
      {"unknown.bpe", false, "a b\nb c\n", {"line 2", "missing from the vocabulary"}},
      {"empty.bpe", false, "#version: 0.2\n", {"no merges"}},
  };
  for (const BadFile& bad : bad_files) {
    SCOPED_TRACE(bad.name);
    const std::string path = (dir / bad.name).string();
    write(path, bad.text);
    std::vector<std::string> parts = {path};
    parts.insert(parts.end(), bad.problem.begin(), bad.problem.end());
    expect_input_error(
        [&] { gpt::Gpt2Tokenizer(bad.is_vocab ? path : vocab, bad.is_vocab ? merges : path); },
        parts);
  }
}

// GPT-2's files, fetched by scripts/fetch_gpt2_tokenizer.sh; the test is skipped without them.
struct Gpt2Files {
  std::string vocab = std::string(GPT_SOURCE_DIR) + "/third_party/gpt2/encoder.json";
  std::string merges = std::string(GPT_SOURCE_DIR) + "/third_party/gpt2/vocab.bpe";
  bool present() const { return fs::exists(vocab) && fs::exists(merges); }
};

TEST(Gpt2Tokenizer, MatchesTiktokenOnSamples) {
  const Gpt2Files files;
  if (!files.present()) GTEST_SKIP() << "no GPT-2 files: run scripts/fetch_gpt2_tokenizer.sh";
  gpt::Gpt2Tokenizer tok(files.vocab, files.merges);
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.eot(), 50256);
  // Ids from tiktoken 1.0.22, get_encoding("gpt2").encode_ordinary(text).
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"Hello world", {15496, 995}},
      {"Hello, world! I'm here, you're not.",
       {15496, 11, 995, 0, 314, 1101, 994, 11, 345, 821, 407, 13}},
      {"  leading spaces\n\n\ttab", {220, 3756, 9029, 628, 197, 8658}},
      {"1234567 3.14", {10163, 2231, 3134, 513, 13, 1415}},
      {"日本語 👍🏽", {33768, 98, 17312, 105, 45739, 252, 50169, 235, 8582, 237, 121}},
      {"<|endoftext|>", {27, 91, 437, 1659, 5239, 91, 29}},
      {"a \u0085b", {64, 220, 126, 227, 65}},
  };
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ(tok.encode(text), ids) << text;
    EXPECT_EQ(tok.decode(ids), text);
  }
  EXPECT_EQ(tok.decode(std::vector<int32_t>{50256}), "<|endoftext|>");
}

// Random Unicode scalar values (all planes, no surrogates) encoded as UTF-8, with spaces.
std::string random_utf8(size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < bytes) {
    uint32_t cp = 0;
    switch (rng() % 4) {
      case 0:
        cp = rng() % 0x80;
        break;
      case 1:
        cp = 0x80 + rng() % (0x800 - 0x80);
        break;
      case 2:
        cp = 0x800 + rng() % (0x10000 - 0x800);
        break;
      default:
        cp = 0x10000 + rng() % (0x110000 - 0x10000);
        break;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    if (rng() % 5 == 0) s.append(rng() % 3 == 0 ? "  " : " ");
  }
  return s;
}

TEST(Gpt2Tokenizer, RoundTripsAnyValidUtf8) {
  const Gpt2Files files;
  if (!files.present()) GTEST_SKIP() << "no GPT-2 files: run scripts/fetch_gpt2_tokenizer.sh";
  gpt::Gpt2Tokenizer tok(files.vocab, files.merges);
  const std::string text = random_utf8(1 << 20, 7);
  const std::vector<int32_t> ids = tok.encode(text);
  EXPECT_EQ(tok.decode(ids), text);
  // A long piece (one run of spaces, one word) takes the heap path and still round-trips.
  const std::string spaces(100000, ' '), word(100000, 'a');
  EXPECT_EQ(tok.decode(tok.encode(spaces)), spaces);
  EXPECT_EQ(tok.decode(tok.encode(word)), word);
}

TEST(Gpt2Tokenizer, InvalidUtf8IsAnErrorGivingTheOffset) {
  const Gpt2Files files;
  if (!files.present()) GTEST_SKIP() << "no GPT-2 files: run scripts/fetch_gpt2_tokenizer.sh";
  gpt::Gpt2Tokenizer tok(files.vocab, files.merges);
  expect_input_error([&] { tok.encode(std::string("abc\xff def")); }, {"invalid UTF-8 at byte 3"});
  expect_input_error([&] { tok.encode(std::string("ok \xe6\x97")); }, {"invalid UTF-8 at byte 3"});
  expect_input_error([&] { tok.encode(std::string("\xed\xa0\x80")); }, {"invalid UTF-8 at byte 0"});
}

}  // namespace
