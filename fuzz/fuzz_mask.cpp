// libFuzzer target: load_neuron_mask (nnlens/neusemslice/neuron_mask.hpp) on arbitrary bytes, and the
// checked form against a small MLP.  Any input must load or throw nnlens::error; a loaded mask must
// survive save -> load unchanged; a mask accepted for the MLP must apply, count parameters and
// freeze without error.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "nnlens/nnlens.hpp"
#include "nnlens/neusemslice/neuron_mask.hpp"

namespace {
using Mlp = nnlens::Sequential<nnlens::Input<6>, nnlens::Dense<5>, nnlens::ReLU, nnlens::Dense<4>, nnlens::ReLU, nnlens::Dense<3>>;
const Mlp& net() {
  static const Mlp n = [] {
    Mlp m;
    nnlens::initialize(m, 1);
    return m;
  }();
  return n;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    std::istringstream is(bytes);
    const nnlens::neuron_mask m = nnlens::load_neuron_mask(is);
    std::ostringstream os;
    nnlens::save_neuron_mask(os, m);
    std::istringstream again(os.str());
    const nnlens::neuron_mask r = nnlens::load_neuron_mask(again);
    if (r.keep != m.keep || r.fingerprint != m.fingerprint) __builtin_trap();
  } catch (const nnlens::error&) {
  }
  try {
    std::istringstream is(bytes);
    const nnlens::neuron_mask m = nnlens::load_neuron_mask(is, net(), /*same_weights*/ false);
    const Mlp masked = nnlens::apply_neuron_mask(net(), m);
    const auto acc = nnlens::parameter_accounting(net(), m);
    if (acc.kept + acc.removed != acc.total) __builtin_trap();
    const auto pm = nnlens::neuron_parameter_mask(net(), m);
    if (pm.size() != acc.total) __builtin_trap();
    (void)masked;
  } catch (const nnlens::error&) {
  }
  return 0;
}
