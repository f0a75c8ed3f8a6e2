# The fuzz targets (tests/fuzz) in the main build: when clang++-14 and its libFuzzer runtime are
# found, the same source tree is configured with clang and GPT_FUZZ_ONLY into build/fuzz, which
# builds the fuzz targets and the reader sources they need; the CTest fuzz_readers runs each from
# its committed corpus for a few seconds. Without them the fuzz targets are skipped (one line).
find_program(GPT_FUZZ_CXX NAMES clang++-14)
find_program(GPT_FUZZ_CC NAMES clang-14)
file(GLOB GPT_LIBFUZZER /usr/lib/llvm-14/lib/clang/14*/lib/linux/libclang_rt.fuzzer-x86_64.a)
option(GPT_FUZZ "Build the fuzz targets (tests/fuzz) when clang++-14 and libFuzzer are found" ON)
set(GPT_FUZZ_DIR ${PROJECT_BINARY_DIR}/fuzz)
if(NOT GPT_FUZZ)
  message(STATUS "Fuzz targets skipped: GPT_FUZZ is OFF")
elseif(NOT GPT_FUZZ_CXX OR NOT GPT_FUZZ_CC OR NOT GPT_LIBFUZZER)
  message(STATUS "Fuzz targets skipped: clang-14 with libFuzzer not found "
                 "(Debian: clang-14 libclang-rt-14-dev)")
else()
  include(ExternalProject)
  ExternalProject_Add(gpt_fuzz
    SOURCE_DIR ${PROJECT_SOURCE_DIR}
    BINARY_DIR ${GPT_FUZZ_DIR}
    CMAKE_ARGS -DCMAKE_CXX_COMPILER=${GPT_FUZZ_CXX} -DCMAKE_C_COMPILER=${GPT_FUZZ_CC}
               -DCMAKE_BUILD_TYPE=Fuzz -DGPT_FUZZ_ONLY=ON -DGPT_ENABLE_CUDA=OFF
    INSTALL_COMMAND ""
    BUILD_ALWAYS ON
    USES_TERMINAL_BUILD ON)
endif()
# Skipped (exit 77) when build/fuzz/bin has no targets.
add_test(NAME fuzz_readers
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/fuzz/run_fuzz.sh --suite ${GPT_FUZZ_DIR}/bin)
set_tests_properties(fuzz_readers PROPERTIES TIMEOUT 240 SKIP_RETURN_CODE 77 LABELS "fuzz"
                     ENVIRONMENT "${GPT_TEST_ENV}")
