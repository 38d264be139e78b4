// nnlens/precompiled/exactline.hpp -- the precompiled forms of ExactLine (see precompiled/forms.hpp).
//
//   one segment on a DynamicNetwork, computed in double (exact_line's default S = R = double; a
//   float network is cast once, by the precompiled network_cast) or in float (exact_line<float>):
//   every exact_line / exact_lines / exact_path / integrated_gradients call on such a network
//   reaches detail::line_impl, which holds the engine.
#pragma once

#include "nnlens/exactline/line.hpp"
#include "nnlens/precompiled/network.hpp"

#define NNLENS_PRECOMPILED_EXACTLINE(KW)                                                                     \
  KW line_result<double, double> detail::line_impl<double, double, basic_dynamic_network<double>>(           \
      const basic_dynamic_network<double>&, std::vector<double>, std::vector<double>, const line_options&, bool); \
  KW line_result<float, double> detail::line_impl<float, double, basic_dynamic_network<float>>(              \
      const basic_dynamic_network<float>&, std::vector<float>, std::vector<float>, const line_options&, bool);

namespace nnlens {
NNLENS_PRECOMPILED_DECLARE(NNLENS_PRECOMPILED_EXACTLINE)
}  // namespace nnlens
