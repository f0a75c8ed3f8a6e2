// The --config file every program takes (INI-style name = value lines, Boost.Program_options'
// config-file syntax), read into the options' variables: apart from program.cpp so that it is
// fuzzed alone (tests/fuzz/fuzz_ini_config.cpp).
#pragma once

#include <boost/program_options.hpp>
#include <istream>
#include <string>

namespace gpt {

// An option given more than once takes its last value, as wrapper scripts that append overrides
// expect (Boost would refuse the repeat).
boost::program_options::parsed_options last_of_each(boost::program_options::parsed_options parsed);

// Boost's message for `e`, safe to show: it quotes names and values as written, so their
// placeholders (%value%: Boost substitutes them until none is left, forever for
// "n-layer%value%") are escaped, control characters shown escaped, and the text cut to 300 bytes.
std::string option_error_message(boost::program_options::error& e);

// Stores the options of the config file `in` (named `path` in errors) into `vm`, where values
// already stored (the command line's) win. Anything malformed, an unknown option or a value its
// option does not take is a one-line input error "--config PATH: ...".
void store_config_file(std::istream& in, const std::string& path,
                       const boost::program_options::options_description& desc,
                       boost::program_options::variables_map& vm);

}  // namespace gpt
