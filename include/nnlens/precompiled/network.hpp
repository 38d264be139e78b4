// nnlens/precompiled/network.hpp -- the precompiled forms of the network: batched forward on a
// DynamicNetwork<T> and the float <-> double casts (see precompiled/forms.hpp).
//
//   forward(Policy, basic_dynamic_network<T>, X)   T: float, double; Policy: seq, par; X: any container
//                                                 (forward(net, X) picks seq).  The form is
//                                                 detail::forward_rows, which forward reaches after
//                                                 its checks with the rows in T
//   network_cast<double>(DynamicNetwork<float>), network_cast<float>(DynamicNetwork<double>)
#pragma once

#include "nnlens/network/cast.hpp"
#include "nnlens/network/dynamic_network.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/validate.hpp"
#include "nnlens/precompiled/forms.hpp"

#define NNLENS_PRECOMPILED_FORWARD(KW, T, P)                                                                 \
  KW xt::xarray<T> detail::forward_rows<P, basic_dynamic_network<T>>(const P&, const basic_dynamic_network<T>&,   \
                                                                     std::span<const T>, std::size_t);

#define NNLENS_PRECOMPILED_NETWORK(KW)                                                                       \
  NNLENS_PRECOMPILED_EACH(NNLENS_PRECOMPILED_FORWARD, KW)                                                     \
  KW basic_dynamic_network<double> network_cast<double, basic_dynamic_network<float>>(                       \
      const basic_dynamic_network<float>&);                                                                  \
  KW basic_dynamic_network<float> network_cast<float, basic_dynamic_network<double>>(                        \
      const basic_dynamic_network<double>&);                                                                 \
  KW void check_shapes<basic_dynamic_network<float>>(const basic_dynamic_network<float>&);                  \
  KW void check_shapes<basic_dynamic_network<double>>(const basic_dynamic_network<double>&);

namespace nnlens {
NNLENS_PRECOMPILED_DECLARE(NNLENS_PRECOMPILED_NETWORK)
}  // namespace nnlens
