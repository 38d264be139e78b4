// nnlens/precompiled/nnslicer.hpp -- the precompiled forms of NNSlicer (see precompiled/forms.hpp).
//
//   profile_network(Policy, basic_dynamic_network<T>, X [, profile_options])
//   nnslicer(Policy, basic_dynamic_network<T>, profile, X, criterion [, slice_options])
//   T: float, double; Policy: seq, par (the forms without a policy run seq); X: any container.  The
//   forms are detail::profile_rows and detail::nnslicer_rows, which the two functions reach after
//   their input checks
#pragma once

#include "nnlens/nnslicer/nnslicer.hpp"
#include "nnlens/nnslicer/profile.hpp"
#include "nnlens/precompiled/network.hpp"

#define NNLENS_PRECOMPILED_NNSLICER_ONE(KW, T, P)                                                            \
  KW profile detail::profile_rows<P, basic_dynamic_network<T>>(                                               \
      const P&, const basic_dynamic_network<T>&, std::span<const T>, std::size_t, const profile_options&);   \
  KW contrib_table detail::nnslicer_rows<P, basic_dynamic_network<T>>(                                       \
      const P&, const basic_dynamic_network<T>&, const profile&, std::span<const T>, std::size_t,            \
      const criterion&, const slice_options&);

#define NNLENS_PRECOMPILED_NNSLICER(KW) NNLENS_PRECOMPILED_EACH(NNLENS_PRECOMPILED_NNSLICER_ONE, KW)

namespace nnlens {
NNLENS_PRECOMPILED_DECLARE(NNLENS_PRECOMPILED_NNSLICER)
}  // namespace nnlens
