// EXPECT: error_type_is_not_a_layer_see_docs_layers_md<NotALayer>
// A type without layer_traits in a Sequential must be named in the diagnostic.
#include <nnlens/layers/dense.hpp>
#include <nnlens/layers/input.hpp>
#include <nnlens/network/sequential.hpp>

struct NotALayer {};
using Bad = nnlens::Sequential<nnlens::Input<4>, nnlens::Dense<3>, NotALayer>;

int main() {
  Bad net;
  (void)net;
}
