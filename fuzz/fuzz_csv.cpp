// libFuzzer target: the CSV sample reader on arbitrary bytes, with the sample shape taken from the
// first two bytes (rank 0, 1 or 3).  Any input must parse or throw nnlens::error; parsed data must
// survive write_csv -> parse_csv unchanged.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "nnlens/io/csv.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  nnlens::shape s;
  const unsigned k = data[0] % 8;
  if (data[1] % 3 == 1) s = nnlens::shape(k);
  if (data[1] % 3 == 2) s = nnlens::shape(k % 3 + 1, k % 2 + 1, k / 4 + 1);
  nnlens::io::csv_options o;
  o.header = nnlens::io::csv_header(data[1] / 3 % 3);
  o.delimiter = (data[1] & 0x80) ? ';' : ',';
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  try {
    auto x = nnlens::io::parse_csv<float>(text, s, "fuzz", o);
    std::ostringstream os;
    nnlens::io::write_csv(os, x);
    nnlens::io::csv_options plain;
    plain.header = nnlens::io::csv_header::absent;
    auto y = nnlens::io::parse_csv<float>(os.str(), s.rank ? s : nnlens::shape(x.shape(1)), "fuzz-rt", plain);
    if (!(x == y)) __builtin_trap();
  } catch (const nnlens::error&) {
  }
  return 0;
}
