// nnlens/neusemslice.hpp -- NeuSemSlice: semantic slicing of critical neurons and the maintenance
// tasks built on it (docs/neusemslice.md).
//
//   neuron_units / neuron_mask / apply_neuron_mask / parameter_accounting   (neusemslice/neuron_mask.hpp)
//   gram_scan / linear_scan / gram_similarity                               (neusemslice/cka.hpp)
//   semslice([policy,] net, X, labels, options) -> {mask, report}           (neusemslice/semslice.hpp)
//   magnitude pruning: LAMP, Global, Uniform+, ERK                          (compress/pruning.hpp)
//   restructure / readapt / increment                                       (neusemslice/restructure.hpp,
//                                                                            readapt.hpp, increment.hpp)
#pragma once

#include "nnlens/compress/pruning.hpp"
#include "nnlens/neusemslice/cka.hpp"
#include "nnlens/neusemslice/increment.hpp"
#include "nnlens/neusemslice/neuron_mask.hpp"
#include "nnlens/neusemslice/readapt.hpp"
#include "nnlens/neusemslice/restructure.hpp"
#include "nnlens/neusemslice/semslice.hpp"
