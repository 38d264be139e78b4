// core/reflect.hpp: every op's fields as a Boost.Hana Struct, and what generic code derives from
// them (scalar rebinding, codegen's fill, the weights file's coverage of every tensor).
#include <doctest/doctest.h>

#include <nnlens/io/codegen.hpp>
#include <nnlens/nnlens.hpp>

#include <boost/hana/keys.hpp>

#include <set>
#include <string>
#include <vector>

using namespace nnlens;
namespace hana = boost::hana;

namespace {
/// The fields' names, in order.
template <class L>
std::vector<std::string> names(const L& l) {
  std::vector<std::string> r;
  for_each_field(l, [&](std::string_view n, const auto&) { r.emplace_back(n); });
  return r;
}
/// How many of L's fields are tensors (known at compile time).
template <class L>
constexpr std::size_t tensor_fields() {
  if constexpr (!Reflected<L>) {
    return 0;
  } else {
    std::size_t n = 0;
    hana::for_each(hana::accessors<L>(), [&](auto p) {
      using M = std::remove_cvref_t<decltype(hana::second(p)(std::declval<const L&>()))>;
      n += reflect_detail::tensor_like<M> ? 1 : 0;
    });
    return n;
  }
}
template <class L>
constexpr std::size_t saved_tensors() {
  std::size_t n = 0;
  if constexpr (Composite<L>) return tensor_fields<L>();  // a composite's data are its branches
  else if constexpr (HasParameters<L>) n += std::tuple_size_v<decltype(layer_traits<L>::parameters(std::declval<L&>()))>;
  if constexpr (HasBuffers<L> && !Composite<L>) n += std::tuple_size_v<decltype(layer_traits<L>::buffers(std::declval<L&>()))>;
  return n;
}
/// Every run-time op: each tensor field is a parameter or a buffer, so the weights file (NNLW
/// saves parameters and buffers) cannot leave one out.  (A composite's data are its branches'.)
template <class V>
struct every_tensor_saved;
template <class... Ls>
struct every_tensor_saved<std::variant<Ls...>> {
  static constexpr bool value = ((Composite<Ls> || tensor_fields<Ls>() == saved_tensors<Ls>()) && ...);
};
static_assert(every_tensor_saved<DynamicNetwork::layer_type>::value);
static_assert(every_tensor_saved<basic_dynamic_network<double>::layer_type>::value);
}  // namespace

TEST_CASE("ops declare their fields in order; empty ops declare none") {
  CHECK(names(Dense<3>{}) == std::vector<std::string>{"W", "b"});
  CHECK(names(BatchNorm<>{}) == std::vector<std::string>{"gamma", "beta", "running_mean", "running_var", "eps"});
  CHECK(names(Conv2D<4, 3>{}) == std::vector<std::string>{"W", "b"});
  CHECK(names(Conv2D<dyn>{}) == std::vector<std::string>{"geometry", "W", "b"});  // the run-time geometry
  CHECK(names(LeakyReLU{}) == std::vector<std::string>{"alpha"});
  CHECK(names(Clamp{}) == std::vector<std::string>{"lo", "hi"});
  CHECK(names(PReLU<>{}) == std::vector<std::string>{"a"});
  CHECK(names(ReLU{}).empty());
  CHECK(field_count<Affine<>>() == 2);
  CHECK(field_count<Flatten>() == 0);
  // A hana::Struct: Hana's own algorithms work on an op.
  CHECK(hana::to<char const*>(hana::at_c<4>(hana::keys(BatchNorm<>{}))) == std::string("eps"));
  static_assert(Reflected<HardTanh> && !Reflected<ReLU> && !Reflected<DynamicResidual<float>>);
}

TEST_CASE("every tensor field is saved by the weights file, checked on initialised layers") {
  using Net = Sequential<Input<2, 4, 4>, Conv2D<3, 3, 1, 1>, BatchNorm<3>, PReLU<3>, Affine<3>, ReLU, MaxPool2D<2>,
                         Flatten, Dense<5>, LeakyReLU, Dense<2>>;
  Net s;
  initialize(s, 3);
  const DynamicNetwork net = to_dynamic(s);
  std::size_t tensors = 0;
  for (std::size_t i = 0; i < net.size(); ++i)
    std::visit(
        [&](const auto& l) {
          using L = std::decay_t<decltype(l)>;
          std::set<const void*> saved, fields;
          if constexpr (HasParameters<L>)
            for (auto p : layer_traits<L>::parameters(l)) saved.insert(p.data());
          if constexpr (HasBuffers<L>)
            for (auto p : layer_traits<L>::buffers(l)) saved.insert(p.data());
          for_each_field(l, [&](std::string_view, const auto& m) {
            if constexpr (reflect_detail::tensor_like<std::remove_cvref_t<decltype(m)>>) fields.insert(m.data());
          });
          CHECK_MESSAGE(fields == saved, "layer ", i, " (", net.layer_name(i), ")");
          tensors += fields.size();
        },
        net.layer(i));
  CHECK(tensors == 2 + 4 + 1 + 2 + 2 + 2);
}

TEST_CASE("rebinding the scalar converts every field (no per-op rule)") {
  BatchNorm<3> bn{nnlens::tensor<float, 1>{0.5f, 1.5f, -2.0f}, xt::zeros<float>({3}), xt::zeros<float>({3}),
                  xt::ones<float>({3})};
  bn.running_mean(1) = 0.25f;
  bn.running_var(2) = 3.5f;
  bn.eps = 1e-3;
  const auto d = rebind_scalar<BatchNorm<3>, double>::convert(bn);
  static_assert(std::is_same_v<std::decay_t<decltype(d)>, BatchNorm<3, double>>);
  CHECK(d.running_mean(1) == 0.25);
  CHECK(d.running_var(2) == 3.5);
  CHECK(d.eps == 1e-3);
  for (std::size_t c = 0; c < 3; ++c) CHECK(d.gamma(c) == double(bn.gamma(c)));

  Conv2DG<dyn, conv_geometry_dyn, double> cv;  // the run-time geometry is a field too
  cv.geometry = conv_geometry{.kh = 3, .kw = 2, .stride_h = 2};
  cv.W = xt::ones<double>({4, 2, 3, 2});
  cv.b = xt::zeros<double>({4});
  const auto f = rebind_scalar<decltype(cv), float>::convert(cv);
  CHECK(f.geometry == cv.geometry);
  CHECK(f.W.shape(3) == 2);
  CHECK(f.W(3, 1, 2, 1) == 1.0f);
}

TEST_CASE("codegen fills every field: tensors as arrays, scalars by value, infinities spelled") {
  DynamicNetwork net(shape(4));
  net.add(Dense<dyn>{xt::ones<float>({4, 3}), xt::zeros<float>({3})});
  net.add(LeakyReLU{0.125});
  net.add(Clamp{-std::numeric_limits<double>::infinity(), 2.0});
  net.add(Dropout{0.25});
  net.add(BatchNorm<dyn>{xt::ones<float>({3}), xt::zeros<float>({3}), xt::zeros<float>({3}), xt::ones<float>({3}), 0.5});
  io::codegen_options opt;  // not {.name = "m"}: g++ 12 warns of the fields a designated initialiser leaves out
  opt.name = "m";
  const std::string h = io::generate_header(net, opt);
  CHECK(h.find("std::get<0>(net.layers).W,") != std::string::npos);
  CHECK(h.find("std::get<1>(net.layers).alpha = 0x1p-3;") != std::string::npos);
  CHECK(h.find("std::get<2>(net.layers).lo = -std::numeric_limits<double>::infinity();") != std::string::npos);
  CHECK(h.find("std::get<2>(net.layers).hi = 0x1p+1;") != std::string::npos);
  CHECK(h.find("std::get<3>(net.layers).p = 0x1p-2;") != std::string::npos);
  CHECK(h.find("std::get<4>(net.layers).running_var,") != std::string::npos);
  CHECK(h.find("std::get<4>(net.layers).eps = 0x1p-1;") != std::string::npos);
}
