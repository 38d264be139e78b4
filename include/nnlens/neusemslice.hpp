// nnlens/neusemslice.hpp -- NeuSemSlice: semantic slicing of critical neurons and the maintenance
// tasks built on it (docs/neusemslice.md).
//
//   neuron_units / neuron_mask / apply_neuron_mask / parameter_accounting   (slicing/neuron_mask.hpp)
//   gram_scan / linear_scan / gram_similarity                               (slicing/cka.hpp)
//   semslice([policy,] net, X, labels, options) -> {mask, report}           (slicing/semslice.hpp)
//   magnitude pruning: LAMP, Global, Uniform+, ERK                          (compress/pruning.hpp)
//   restructure / readapt / increment                                       (slicing/restructure.hpp,
//                                                                            readapt.hpp, increment.hpp)
#pragma once

#include "nnlens/compress/pruning.hpp"
#include "nnlens/slicing/cka.hpp"
#include "nnlens/slicing/increment.hpp"
#include "nnlens/slicing/neuron_mask.hpp"
#include "nnlens/slicing/readapt.hpp"
#include "nnlens/slicing/restructure.hpp"
#include "nnlens/slicing/semslice.hpp"
