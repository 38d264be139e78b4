// nnlens/precompiled/nnslicer.hpp -- the precompiled forms of NNSlicer (see precompiled/forms.hpp).
//
//   profile_network(Policy, basic_dynamic_network<T>, xt::xarray<T> [, profile_options])
//   nnslicer(Policy, basic_dynamic_network<T>, profile, xt::xarray<T>, criterion [, slice_options])
//   T: float, double; Policy: seq, par (the forms without a policy run seq)
#pragma once

#include "nnlens/nnslicer/nnslicer.hpp"
#include "nnlens/nnslicer/profile.hpp"
#include "nnlens/precompiled/network.hpp"

#define NNLENS_PRECOMPILED_NNSLICER_ONE(KW, T, P)                                                            \
  KW profile profile_network<P, basic_dynamic_network<T>, xt::xarray<T>>(                                    \
      const P&, const basic_dynamic_network<T>&, const xt::xarray<T>&, const profile_options&);              \
  KW contrib_table nnslicer<P, basic_dynamic_network<T>, xt::xarray<T>>(                                     \
      const P&, const basic_dynamic_network<T>&, const profile&, const xt::xarray<T>&, const criterion&,     \
      const slice_options&);

#define NNLENS_PRECOMPILED_NNSLICER(KW) NNLENS_PRECOMPILED_EACH(NNLENS_PRECOMPILED_NNSLICER_ONE, KW)

namespace nnlens {
NNLENS_PRECOMPILED_DECLARE(NNLENS_PRECOMPILED_NNSLICER)
}  // namespace nnlens
