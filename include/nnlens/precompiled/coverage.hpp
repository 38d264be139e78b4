// nnlens/precompiled/coverage.hpp -- the precompiled forms of the coverage criteria (see
// precompiled/forms.hpp).
//
//   prepare_idc(Policy, basic_dynamic_network<T>, X, labels as std::vector<std::size_t> [, idc_options])
//   measure(Policy, basic_dynamic_network<T>, X, C&) for C: idc and DeepGauge's NC, TKNC, KMNC, NBC, SNAC
//   T: float, double; Policy: seq, par.  X may be any contiguous container (xt::xarray...): the
//   forms are the span overloads every container overload forwards to.
#pragma once

#include "nnlens/coverage/criterion.hpp"
#include "nnlens/coverage/idc.hpp"
#include "nnlens/coverage/neuron_coverage.hpp"
#include "nnlens/precompiled/network.hpp"

#define NNLENS_PRECOMPILED_MEASURE(KW, T, P, C)                                                              \
  KW coverage_result measure<P, basic_dynamic_network<T>, C>(const P&, const basic_dynamic_network<T>&,      \
                                                            std::span<const T>, std::size_t, C&);

#define NNLENS_PRECOMPILED_COVERAGE_ONE(KW, T, P)                                                            \
  KW idc prepare_idc<P, basic_dynamic_network<T>, std::vector<std::size_t>>(                                 \
      const P&, const basic_dynamic_network<T>&, std::span<const T>, std::size_t, const std::vector<std::size_t>&, \
      const idc_options&);                                                                                   \
  NNLENS_PRECOMPILED_MEASURE(KW, T, P, idc)                                                                  \
  NNLENS_PRECOMPILED_MEASURE(KW, T, P, nc_criterion)                                                         \
  NNLENS_PRECOMPILED_MEASURE(KW, T, P, tknc_criterion)                                                       \
  NNLENS_PRECOMPILED_MEASURE(KW, T, P, kmnc_criterion)                                                       \
  NNLENS_PRECOMPILED_MEASURE(KW, T, P, nbc_criterion)                                                        \
  NNLENS_PRECOMPILED_MEASURE(KW, T, P, snac_criterion)

#define NNLENS_PRECOMPILED_COVERAGE(KW) NNLENS_PRECOMPILED_EACH(NNLENS_PRECOMPILED_COVERAGE_ONE, KW)

namespace nnlens {
NNLENS_PRECOMPILED_DECLARE(NNLENS_PRECOMPILED_COVERAGE)
}  // namespace nnlens
