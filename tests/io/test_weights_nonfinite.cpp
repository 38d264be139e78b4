// Non-finite weights in .nnlw files (io/weights.hpp): NaN, +Inf, -Inf, and a
// double file's value beyond float loaded into a float network, each a value_error naming the
// file, the layer, the parameter tensor and the element; the target network is left untouched.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include "nnlens/io/weights.hpp"
#include "nnlens/network/sequential.hpp"

namespace fs = std::filesystem;
using namespace nnlens;

namespace {

using MLP = Sequential<Input<4>, Dense<5>, ReLU, Dense<3>>;
using MLP64 = rebind_scalar_t<MLP, double>;

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("nnlens-test-weights-nonfinite-" + std::to_string(::getpid()));
  temp_dir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

template <class Net>
std::string load_error(const fs::path& p, Net& target) {
  try {
    io::load_weights(p, target);
  } catch (const value_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("weights: a NaN or Inf parameter names the file, the layer, the tensor and the element") {
  temp_dir d;
  MLP net;
  initialize(net, 3);
  MLP target;
  initialize(target, 4);
  const MLP before = target;

  MLP inf = net;
  inf.layer<2>().b(1) = std::numeric_limits<float>::infinity();
  io::save_weights(d.path / "inf.nnlw", inf);
  CHECK(load_error(d.path / "inf.nnlw", target) ==
        (d.path / "inf.nnlw").string() + ": layer 2 (Dense): parameter 1 element 1 is +Inf");

  MLP neg = net;
  neg.layer<0>().W(3, 4) = -std::numeric_limits<float>::infinity();  // W is [in, out] = [4, 5]: element 19
  io::save_weights(d.path / "neg.nnlw", neg);
  CHECK(load_error(d.path / "neg.nnlw", target) ==
        (d.path / "neg.nnlw").string() + ": layer 0 (Dense): parameter 0 element 19 is -Inf");

  MLP nan = net;
  nan.layer<0>().b(0) = std::numeric_limits<float>::quiet_NaN();
  io::save_weights(d.path / "nan.nnlw", nan);
  CHECK(load_error(d.path / "nan.nnlw", target).find("nan.nnlw: layer 0 (Dense): parameter 1 element 0 is NaN") !=
        std::string::npos);

  CHECK(target.layer<0>().W == before.layer<0>().W);  // untouched
  CHECK(target.layer<2>().b == before.layer<2>().b);
  io::save_weights(d.path / "good.nnlw", net);
  CHECK_NOTHROW(io::load_weights(d.path / "good.nnlw", target));
  CHECK(target.layer<2>().b == net.layer<2>().b);
}

TEST_CASE("weights: a double file's finite value beyond float is rejected for a float network, not read as Inf") {
  temp_dir d;
  MLP64 wide;
  initialize(wide, 5);
  wide.layer<2>().W(2, 1) = 1e300;  // [5, 3]: element 7
  io::save_weights(d.path / "wide.nnlw", wide);
  MLP f32;
  initialize(f32, 6);
  CHECK(load_error(d.path / "wide.nnlw", f32) ==
        (d.path / "wide.nnlw").string() + ": layer 2 (Dense): parameter 0 element 7 is 1e+300, beyond the network's float range");
  MLP64 f64;
  initialize(f64, 6);
  CHECK_NOTHROW(io::load_weights(d.path / "wide.nnlw", f64));  // fine in double
  CHECK(f64.layer<2>().W(2, 1) == 1e300);
  // the largest float, stored as a double, still loads as float
  wide.layer<2>().W(2, 1) = double(std::numeric_limits<float>::max());
  io::save_weights(d.path / "max.nnlw", wide);
  CHECK_NOTHROW(io::load_weights(d.path / "max.nnlw", f32));
  CHECK(f32.layer<2>().W(2, 1) == std::numeric_limits<float>::max());
}
