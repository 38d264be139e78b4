// nnlens/coverage.hpp -- DeepImportance (specs/deepimportance.md): LRP relevance, important
// neurons, 1-D k-means + silhouette, importance-driven coverage (IDC); DeepGauge's neuron coverage
// criteria and surprise adequacy (LSA/DSA) beside it.
#pragma once

#include "nnlens/coverage/activations.hpp"
#include "nnlens/coverage/criterion.hpp"
#include "nnlens/coverage/idc.hpp"
#include "nnlens/coverage/importance.hpp"
#include "nnlens/coverage/kmeans1d.hpp"
#include "nnlens/coverage/lrp.hpp"
#include "nnlens/coverage/neuron_coverage.hpp"
#include "nnlens/coverage/surprise.hpp"
