// TextTokenizer and the tokenizer copies beside data sets and checkpoints (see text_tokenizer.h).
#include "framework/text/text_tokenizer.h"

#include <filesystem>

#include "framework/check.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

void copy_file_atomically(const std::string& from, const fs::path& to) {
  const fs::path temp = to.string() + ".tmp";
  std::error_code ec;
  fs::copy_file(from, temp, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::rename(temp, to, ec);
  if (ec) {
    fs::remove(temp, ec);
    fail_input(GPT_MSG("cannot copy " << from << " to " << to.string()));
  }
}

}  // namespace

TextTokenizer::TextTokenizer(const std::string& spec, const Gpt2Files& gpt2, int workers) {
  GPT_CHECK(workers >= 1, "a tokenizer needs at least one worker");
  if (spec == "bytes") {
    name_ = "bytes";
    return;
  }
  if (spec == "gpt2") {
    name_ = "gpt2";
    for (int w = 0; w < workers; ++w)
      gpt2_.push_back(std::make_unique<Gpt2Tokenizer>(gpt2.vocab, gpt2.merges));
    vocab_size_ = gpt2_[0]->vocab_size();
    document_token_ = gpt2_[0]->eot();
    return;
  }
  std::error_code ec;
  GPT_INPUT_CHECK(fs::exists(spec, ec), "tokenizer " << spec
                                                     << ": not bytes, gpt2, nor an existing "
                                                        "tokenizer.json or directory holding one");
  hf_ = std::make_unique<HfTokenizer>(spec);
  cut_scratch_ = std::make_unique<RegexScratch>();
  for (int w = 0; w < workers; ++w) hf_encoders_.push_back(std::make_unique<HfEncoder>(*hf_));
  name_ = hf_->identity();
  vocab_size_ = hf_->vocab_size();
  document_token_ = hf_->document_token();
  document_token_first_ = hf_->document_token_first();
}

TextTokenizer::~TextTokenizer() = default;

void TextTokenizer::encode(int worker, std::string_view text, std::vector<int32_t>& ids,
                           uint64_t offset, bool continuation, bool allow_special) {
  const auto w = static_cast<size_t>(worker);
  if (hf_) return hf_encoders_.at(w)->encode(text, ids, allow_special, continuation, offset);
  if (!gpt2_.empty()) return gpt2_.at(w)->encode(text, ids, offset);
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
}

// Bytes: anywhere. GPT-2: after a "\n" between two printable ASCII characters: the "\n" is then
// a piece of its own (the whitespace rule cannot join it to a neighbour) and the next piece
// starts there whatever came before, because the pattern only looks ahead. Hugging Face files:
// HfTokenizer::cut_at_or_after.
size_t TextTokenizer::cut_at_or_after(std::string_view text, size_t from) const {
  if (hf_) return hf_->cut_at_or_after(text, from, *cut_scratch_);
  if (gpt2_.empty()) return from < text.size() ? from : std::string_view::npos;
  auto printable = [](char c) { return c > ' ' && c < 0x7F; };
  for (size_t p = std::max<size_t>(from, 2); p < text.size(); ++p)
    if (text[p - 1] == '\n' && printable(text[p - 2]) && printable(text[p])) return p;
  return std::string_view::npos;
}

std::string TextTokenizer::decode(const int32_t* ids, size_t n) const {
  if (hf_) return hf_->decode(ids, n);
  if (!gpt2_.empty()) return gpt2_[0]->decode(ids, n);
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    GPT_INPUT_CHECK(ids[i] >= 0 && ids[i] < 256, "token " << ids[i] << " is not a byte");
    text.push_back(static_cast<char>(ids[i]));
  }
  return text;
}

void place_tokenizer_copy(const HfTokenizer& tokenizer, const std::string& folder) {
  const fs::path dir = folder.empty() ? fs::path(".") : fs::path(folder);
  const fs::path json = dir / "tokenizer.json";
  std::error_code ec;
  if (fs::exists(json, ec)) {
    const std::string there = hf_tokenizer_identity(json.string());
    GPT_INPUT_CHECK(there == tokenizer.identity(),
                    json.string() << " is another tokenizer (" << there << ") than "
                                  << tokenizer.json_path() << " (" << tokenizer.identity()
                                  << "): a folder holds one tokenizer; choose another folder");
    return;
  }
  if (fs::equivalent(fs::path(tokenizer.json_path()).parent_path(), dir, ec)) return;
  if (!tokenizer.config_path().empty())
    copy_file_atomically(tokenizer.config_path(), dir / "tokenizer_config.json");
  copy_file_atomically(tokenizer.json_path(), json);  // last: its presence means complete
}

std::string find_tokenizer_copy(const std::string& name, const std::string& explicit_path,
                                const std::string& folder, const std::string& what) {
  std::error_code ec;
  std::string path = !explicit_path.empty()
                         ? explicit_path
                         : (fs::path(folder.empty() ? "." : folder) / "tokenizer.json").string();
  if (fs::is_directory(path, ec)) path = (fs::path(path) / "tokenizer.json").string();
  GPT_INPUT_CHECK(fs::exists(path, ec), what << " uses the tokenizer " << name
                                             << ", whose tokenizer.json is not in "
                                             << (folder.empty() ? "." : folder)
                                             << " (give the file with --tokenizer PATH)");
  const std::string identity = hf_tokenizer_identity(path);
  GPT_INPUT_CHECK(identity == name,
                  what << " uses the tokenizer " << name << ", but " << path << " is " << identity);
  return path;
}

}  // namespace gpt
