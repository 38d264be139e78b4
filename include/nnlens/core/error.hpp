// nnlens/core/error.hpp -- the exception hierarchy.
//
// Every data-level problem (a file that does not parse, a shape that does not match, NaN/Inf in
// inputs or weights, an empty dataset) throws a type derived from nnlens::error whose message names
// where (file, layer, index) and what was expected.  Internal invariants use NNLENS_EXPECTS, which
// throws nnlens::logic_error rather than aborting.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace nnlens {

/// Base of every exception nnlens throws on purpose.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// A tensor or weight shape does not match what a layer or a static network type expects.
class shape_error : public error {
 public:
  using error::error;
};
/// A value is unusable: NaN/Inf in inputs or weights, an out-of-range hyper-parameter.
class value_error : public error {
 public:
  using error::error;
};
/// A file could not be opened, read or parsed (truncated, corrupt, unsupported).
class io_error : public error {
 public:
  using error::error;
};
/// A dataset is empty or inconsistent (labels vs. samples).
class data_error : public error {
 public:
  using error::error;
};
/// A violated internal contract: a bug in nnlens or a misuse of an internal API.
class logic_error : public error {
 public:
  using error::error;
};
/// A resource cap (pieces, memory) given by the caller was exceeded.
class limit_error : public error {
 public:
  using error::error;
};

/// The arguments streamed into one string: concat(path, ":", line, ": ", what).  The library's
/// error messages are built with it; so are a program's that name files and lines the same way.
template <class... A>
std::string concat(A&&... a) {
  std::ostringstream os;
  (os << ... << std::forward<A>(a));
  return os.str();
}
namespace detail {
using nnlens::concat;  // the name the library's own code uses
}  // namespace detail

}  // namespace nnlens

#define NNLENS_EXPECTS(cond)                                                                      \
  do {                                                                                            \
    if (!(cond))                                                                                  \
      throw ::nnlens::logic_error(::nnlens::detail::concat("nnlens: contract violated: " #cond " (", \
                                                           __FILE__, ":", __LINE__, ")"));        \
  } while (0)
