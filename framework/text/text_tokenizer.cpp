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

// The tokenizer.json a folder ("" is the current one) holds or would hold.
fs::path json_in(const std::string& folder) {
  return (folder.empty() ? fs::path(".") : fs::path(folder)) / "tokenizer.json";
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

bool TextTokenizer::has_token(int64_t id) const {
  if (hf_) return hf_->has_token(id);
  return id >= 0 && id < vocab_size_;
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

std::string tokenizer_folder_of(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) ? path : fs::path(path).parent_path().string();
}

std::string tokenizer_copy_in(const std::string& folder, const std::string& name) {
  const fs::path json = json_in(folder);
  std::error_code ec;
  return fs::exists(json, ec) && hf_tokenizer_identity(json.string()) == name ? json.string() : "";
}

void check_tokenizer_folder(const std::string& json_path, const std::string& name,
                            const std::string& folder, const std::string& what) {
  const fs::path json = json_in(folder);
  std::error_code ec;
  if (!fs::exists(json, ec)) return;
  const std::string there = hf_tokenizer_identity(json.string());
  GPT_INPUT_CHECK(there == name, what << ": " << json.string() << " is another tokenizer (" << there
                                      << ") than " << json_path << " (" << name
                                      << "): a folder holds one tokenizer; choose another folder");
}

void place_tokenizer_copy(const std::string& json_path, const std::string& name,
                          const std::string& folder) {
  const fs::path json = json_in(folder);
  std::error_code ec;
  if (fs::exists(json, ec)) return check_tokenizer_folder(json_path, name, folder, folder);
  // The files beside it that say how the tokenizer is used: its special tokens and its chat
  // template (chat_template.h reads them).
  for (const char* beside : {"tokenizer_config.json", "special_tokens_map.json",
                             "chat_template.jinja"}) {
    const fs::path file = fs::path(json_path).parent_path() / beside;
    if (fs::is_regular_file(file, ec))
      copy_file_atomically(file.string(), json.parent_path() / beside);
  }
  copy_file_atomically(json_path, json);  // last: its presence means complete
}

std::string find_tokenizer_copy(const std::string& name, const std::string& explicit_path,
                                const std::string& folder, const std::string& what) {
  std::error_code ec;
  std::string path = !explicit_path.empty() ? explicit_path : json_in(folder).string();
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
