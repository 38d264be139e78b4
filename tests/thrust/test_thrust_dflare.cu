// The device black box and DFlare's lockstep driver built as CUDA (NNLENS_CUDA=ON): the same source,
// compiled by nvcc.  (test_thrust_exactline.cpp and test_thrust_coverage.cpp also run the host
// analyses on DynamicNetworks, which nvcc 13's front end rejects: docs/scale.md.)
#include "test_thrust_dflare.cpp"
