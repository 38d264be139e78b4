// nnlens/coverage.hpp -- DeepImportance's importance-driven coverage and the criteria it is
// compared with (docs/deepimportance.md).
//
//   relevance(net, X, layer)                 LRP (coverage/lrp.hpp)
//   neuron_relevance_of / important_neurons  Algorithm 1 (coverage/importance.hpp)
//   kmeans_1d / silhouette_1d / cluster_neuron   Algorithm 2 (coverage/kmeans1d.hpp)
//   prepare_idc / idc                        IDC (coverage/idc.hpp)
//   NC, KMNC, NBC, SNAC, TKNC                (coverage/neuron_coverage.hpp)
//   LSA, DSA, LSC, DSC                       (coverage/surprise.hpp)
//   measure(net, X, criterion), merge(a, b)  one interface for all (coverage/criterion.hpp)
#pragma once

#include "nnlens/coverage/activations.hpp"
#include "nnlens/coverage/criterion.hpp"
#include "nnlens/coverage/idc.hpp"
#include "nnlens/coverage/importance.hpp"
#include "nnlens/coverage/kmeans1d.hpp"
#include "nnlens/coverage/lrp.hpp"
#include "nnlens/coverage/neuron_coverage.hpp"
#include "nnlens/coverage/surprise.hpp"

#if defined(NNLENS_EXTERN_TEMPLATES)  // nnlens::precompiled: its forms are calls (nnlens/precompiled/forms.hpp)
#include "nnlens/precompiled/coverage.hpp"
#endif
