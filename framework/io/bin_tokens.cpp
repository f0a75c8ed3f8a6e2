// import_bin_tokens (see bin_tokens.h).
#include "framework/io/bin_tokens.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <vector>

#include "framework/check.h"
#include "framework/io/dataset.h"

namespace gpt {
namespace {

constexpr int32_t kLlmcDataMagic = 20240520;
constexpr int32_t kLlmcDataVersion = 1;  // uint16 tokens
constexpr int64_t kHeaderInts = 256;
constexpr int64_t kTokensPerRead = 1 << 20;

}  // namespace

BinImport import_bin_tokens(const std::string& input, const std::string& output, int64_t vocab_size,
                            const std::string& tokenizer, int64_t eot) {
  std::error_code ec;
  GPT_INPUT_CHECK(std::filesystem::is_regular_file(input, ec), input << ": no such file");
  const auto bytes = static_cast<int64_t>(std::filesystem::file_size(input, ec));
  std::ifstream in(input, std::ios::binary);
  GPT_INPUT_CHECK(in.good() && !ec, input << ": cannot be read");
  BinImport result;
  std::array<int32_t, kHeaderInts> header{};
  const int64_t header_bytes = kHeaderInts * static_cast<int64_t>(sizeof(int32_t));
  if (bytes >= header_bytes) {
    in.read(reinterpret_cast<char*>(header.data()), header_bytes);
    result.llmc_header = header[0] == kLlmcDataMagic;
  }
  int64_t data_bytes = bytes;
  if (result.llmc_header) {
    GPT_INPUT_CHECK(header[1] == kLlmcDataVersion, input << ": llm.c data version " << header[1]
                                                         << " (version " << kLlmcDataVersion
                                                         << ", uint16 tokens, is read)");
    data_bytes = bytes - header_bytes;
    GPT_INPUT_CHECK(header[2] >= 0 && 2 * static_cast<int64_t>(header[2]) == data_bytes,
                    input << ": the llm.c header claims " << header[2] << " tokens but the file "
                          << "holds " << data_bytes << " bytes after it");
  } else {
    in.seekg(0);
    GPT_INPUT_CHECK(bytes > 0 && bytes % 2 == 0,
                    input << ": " << bytes << " bytes is not a whole number of uint16 tokens");
  }
  result.tokens = data_bytes / 2;
  GPT_INPUT_CHECK(result.tokens > 0, input << " holds no tokens");
  TokenFileWriter writer(output, vocab_size, tokenizer, eot);
  std::vector<uint16_t> raw(static_cast<size_t>(kTokensPerRead));
  std::vector<int32_t> ids;
  for (int64_t done = 0; done < result.tokens;) {
    const int64_t n = std::min(kTokensPerRead, result.tokens - done);
    in.read(reinterpret_cast<char*>(raw.data()), 2 * n);
    GPT_INPUT_CHECK(in.good(), input << ": read failed at token " << done);
    ids.assign(raw.begin(), raw.begin() + n);
    try {
      writer.append(ids.data(), ids.size());
    } catch (const Error& e) {
      fail_input(GPT_MSG(input << ": " << e.what()));
    }
    done += n;
  }
  writer.finish();
  return result;
}

}  // namespace gpt
