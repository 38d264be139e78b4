// IDX reader (good files of every type, gzipped or not; truncated, corrupt and hostile files) and
// the weights file (round trips, architecture mismatches, truncation, corruption).
#include <doctest/doctest.h>

#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>

#include "test_skip.hpp"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

using namespace nnlens;
namespace fs = std::filesystem;
using bytes = std::vector<std::uint8_t>;

namespace {
struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() / ("nnlens-test-io-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path operator/(const std::string& s) const { return path / s; }
};

void write_file(const fs::path& p, const bytes& b) {
  std::ofstream o(p, std::ios::binary | std::ios::trunc);
  o.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}
bytes read_file(const fs::path& p) {
  std::ifstream i(p, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(i), {});
}

#if NNLENS_HAS_ZLIB
void write_gz(const fs::path& p, const bytes& b) {
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f);
  if (!b.empty()) REQUIRE(gzwrite(f, b.data(), unsigned(b.size())) == int(b.size()));
  gzclose(f);
}
#endif

/// An IDX file: header (type, dims) + payload as given.
bytes idx(std::uint8_t type, std::vector<std::uint32_t> dims, const bytes& payload) {
  bytes b = {0, 0, type, std::uint8_t(dims.size())};
  for (auto d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(std::uint8_t(d >> s));
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}
template <class U>
bytes big_endian(const std::vector<U>& v) {
  bytes b;
  for (U x : v) {
    std::uint8_t t[sizeof(U)];
    std::memcpy(t, &x, sizeof(U));
    for (std::size_t i = sizeof(U); i-- > 0;) b.push_back(t[i]);
  }
  return b;
}
}  // namespace

TEST_CASE("IDX: images and labels, plain and gzipped") {
  temp_dir d;
  const bytes pixels = {0, 255, 51, 102, 1, 2, 3, 4, 5, 6, 7, 8};
  write_file(d / "img", idx(0x08, {3, 2, 2}, pixels));
  write_file(d / "lab", idx(0x08, {3}, {7, 0, 9}));
  std::vector<fs::path> imgs = {d / "img"}, labs = {d / "lab"};
#if NNLENS_HAS_ZLIB
  write_gz(d / "img.gz", idx(0x08, {3, 2, 2}, pixels));
  write_gz(d / "lab.gz", idx(0x08, {3}, {7, 0, 9}));
  imgs.push_back(d / "img.gz");
  labs.push_back(d / "lab.gz");
#endif
  for (const auto& p : imgs) {
    CAPTURE(p);
    const auto x = io::read_idx_images<float>(p);
    REQUIRE(x.shape() == std::vector<std::size_t>{3, 1, 2, 2});
    CHECK(x(0, 0, 0, 0) == 0.0f);
    CHECK(x(0, 0, 0, 1) == 1.0f);
    CHECK(x(0, 0, 1, 0) == doctest::Approx(0.2f));
    CHECK(x(2, 0, 1, 1) == doctest::Approx(8.0f / 255));
    const auto raw = io::read_idx(p);
    CHECK(raw.type == io::idx_type::u8);
    CHECK(raw.bytes == pixels);
  }
  for (const auto& p : labs) CHECK(io::read_idx_labels(p) == bytes{7, 0, 9});
}

TEST_CASE("IDX: every type code, big-endian") {
  temp_dir d;
  write_file(d / "i16", idx(0x0B, {3}, big_endian<std::int16_t>({-2, 300, 7})));
  write_file(d / "i32", idx(0x0C, {2}, big_endian<std::int32_t>({-70000, 123456789})));
  write_file(d / "f32", idx(0x0D, {2}, big_endian<float>({1.5f, -0.25f})));
  write_file(d / "f64", idx(0x0E, {1, 1, 2}, big_endian<double>({3.25, 1e300})));
  write_file(d / "i8", idx(0x09, {2}, {0xFF, 0x05}));
  CHECK(io::read_idx(d / "i16").values<int>() == std::vector<int>{-2, 300, 7});
  CHECK(io::read_idx(d / "i32").values<long>() == std::vector<long>{-70000, 123456789});
  CHECK(io::read_idx(d / "f32").values<double>() == std::vector<double>{1.5, -0.25});
  CHECK(io::read_idx(d / "f64").values<double>() == std::vector<double>{3.25, 1e300});
  CHECK(io::read_idx(d / "i8").values<int>() == std::vector<int>{-1, 5});
  const auto x = io::read_idx_images<double>(d / "f64");  // non-byte images are kept as they are
  CHECK(x.shape() == std::vector<std::size_t>{1, 1, 1, 2});
  CHECK(x(0, 0, 0, 1) == 1e300);
  auto e = io::read_idx(d / "i16");
  CHECK(e.dims == std::vector<std::size_t>{3});
  write_file(d / "empty", idx(0x08, {0, 28, 28}, {}));
  CHECK(io::read_idx_images(d / "empty").shape()[0] == 0);
}

TEST_CASE("IDX: truncated, corrupt and hostile files throw io_error naming the file") {
  temp_dir d;
  struct bad {
    const char* name;
    bytes content;
    const char* message;
  };
  const std::uint32_t huge = 0xFFFFFFFFu;
  const std::vector<bad> cases = {
      {"empty", {}, "too short for an IDX header"},
      {"short", {0, 0, 8}, "too short for an IDX header"},
      {"magic", idx(0x08, {1}, {1}).size() ? bytes{1, 2, 8, 1, 0, 0, 0, 1, 5} : bytes{}, "bad magic number 0x01020801"},
      {"type", idx(0x07, {1}, {1}), "unknown IDX data type 0x07"},
      {"rank0", idx(0x08, {}, {}), "zero dimensions"},
      {"header", bytes{0, 0, 8, 3, 0, 0, 0, 1, 0, 0}, "truncated inside the header"},
      {"data", idx(0x08, {2, 2, 2}, {1, 2, 3}), "truncated: dimensions [2,2,2] need 8 bytes of data, the file has 3"},
      {"extra", idx(0x08, {2}, {1, 2, 3}), "size mismatch"},
      {"i32short", idx(0x0C, {2}, {0, 0, 0, 1, 0, 0}), "truncated"},
      {"overflow", idx(0x0E, {huge, huge, huge}, {1}), "more than 2^64"},
      {"huge", idx(0x08, {huge, 28, 28}, {1, 2}), "above the limit"},
      {"mnist-sized-header", idx(0x08, {60000, 28, 28}, {1, 2, 3}), "truncated"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    write_file(d / c.name, c.content);
    CHECK_THROWS_WITH_AS(io::read_idx(d / c.name), doctest::Contains(c.message), io_error);
    CHECK_THROWS_WITH_AS(io::read_idx(d / c.name), doctest::Contains((d / c.name).string().c_str()), io_error);
#if NNLENS_HAS_ZLIB
    const std::string gz = std::string(c.name) + ".gz";
    write_gz(d / gz, c.content);
    CHECK_THROWS_WITH_AS(io::read_idx(d / gz), doctest::Contains(c.message), io_error);
#endif
  }
  // Shape rules of the typed readers.
  write_file(d / "flat", idx(0x08, {4}, {1, 2, 3, 4}));
  CHECK_THROWS_WITH_AS(io::read_idx_images(d / "flat"), doctest::Contains("expected images [N, rows, cols]"), io_error);
  write_file(d / "zero", idx(0x08, {2, 0, 3}, {}));
  CHECK_THROWS_WITH_AS(io::read_idx_images(d / "zero"), doctest::Contains("contain a zero"), io_error);
  write_file(d / "lab3", idx(0x08, {1, 2, 2}, {1, 2, 3, 4}));
  CHECK_THROWS_WITH_AS(io::read_idx_labels(d / "lab3"), doctest::Contains("expected labels [N]"), io_error);
  write_file(d / "labi", idx(0x0C, {1}, {0, 0, 0, 1}));
  CHECK_THROWS_WITH_AS(io::read_idx_labels(d / "labi"), doctest::Contains("got type 0x0c"), io_error);
  CHECK_THROWS_WITH_AS(io::read_idx(d / "missing"), doctest::Contains("cannot open"), io_error);
  CHECK_THROWS_WITH_AS(io::read_idx(d.path), doctest::Contains("is a directory"), io_error);
  io::idx_limits small{.max_bytes = 2};
  CHECK_THROWS_WITH_AS(io::read_idx(d / "flat", small), doctest::Contains("above the limit of 2 bytes"), io_error);
}

#if NNLENS_HAS_ZLIB
TEST_CASE("IDX: corrupt and truncated gzip streams") {
  temp_dir d;
  bytes payload(4000);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = std::uint8_t((i * 7919) >> 3);
  write_gz(d / "ok.gz", idx(0x08, {4000}, payload));
  REQUIRE(io::read_idx(d / "ok.gz").bytes == payload);
  const bytes gz = read_file(d / "ok.gz");
  // Every truncation of the compressed stream, and a flipped byte at many positions.
  for (std::size_t cut = 0; cut < gz.size(); cut += 7) {
    write_file(d / "cut.gz", bytes(gz.begin(), gz.begin() + std::ptrdiff_t(cut)));
    CAPTURE(cut);
    CHECK_THROWS_AS(io::read_idx(d / "cut.gz"), io_error);
  }
  std::size_t detected = 0, total = 0;
  for (std::size_t pos = 10; pos < gz.size(); pos += 5) {
    bytes b = gz;
    b[pos] ^= 0x5A;
    write_file(d / "flip.gz", b);
    ++total;
    try {
      (void)io::read_idx(d / "flip.gz");
    } catch (const io_error&) {
      ++detected;
    }
  }
  CHECK(detected == total);  // inflate errors or CRC / length mismatches, never a crash
}
#endif

#if !NNLENS_HAS_ZLIB
TEST_CASE("IDX: without zlib a gzip file is a clear io_error") {
  temp_dir d;
  write_file(d / "x.gz", bytes{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3});
  CHECK_THROWS_WITH_AS(io::read_idx(d / "x.gz"), doctest::Contains("built without zlib"), io_error);
}
#endif

TEST_CASE("IDX: load_mnist checks the pair of files") {
  temp_dir d;
  write_file(d / "train-images-idx3-ubyte", idx(0x08, {3, 2, 2}, bytes(12, 9)));
  write_file(d / "train-labels-idx1-ubyte", idx(0x08, {2}, {1, 2}));
  CHECK_THROWS_WITH_AS(io::load_mnist(d.path, "train"), doctest::Contains("has 3 images but"), data_error);
  CHECK_THROWS_WITH_AS(io::load_mnist(d.path, "t10k"), doctest::Contains("no t10k-images-idx3-ubyte[.gz]"), io_error);
  write_file(d / "train-labels-idx1-ubyte", idx(0x08, {3}, {1, 2, 3}));
  auto m = io::load_mnist(d.path, "train", 2);
  CHECK(m.size() == 2);
  CHECK(m.images.shape() == std::vector<std::size_t>{2, 1, 2, 2});
  CHECK(m.labels == bytes{1, 2});
}

TEST_CASE("IDX: the real Fashion-MNIST test set") {
  const fs::path dir = nnlens_test::fashion_dir();
  if (!fs::exists(dir / "t10k-labels-idx1-ubyte.gz") && !fs::exists(dir / "t10k-labels-idx1-ubyte"))
    NNLENS_SKIP("Fashion-MNIST not installed at ", dir.string());
#if !NNLENS_HAS_ZLIB
  if (!fs::exists(dir / "t10k-labels-idx1-ubyte")) NNLENS_SKIP("built without zlib: the gzipped Fashion-MNIST at ", dir.string(), " cannot be read");
#endif
  auto t = io::load_mnist(dir, "t10k");
  REQUIRE(t.size() == 10000);
  CHECK(t.images.shape() == std::vector<std::size_t>{10000, 1, 28, 28});
  std::vector<int> per_class(10);
  for (auto l : t.labels) per_class.at(l)++;
  for (int c : per_class) CHECK(c == 1000);
  CHECK(xt::amin(t.images)() == 0.0f);
  CHECK(xt::amax(t.images)() == 1.0f);
}

// ---- weights files ---------------------------------------------------------------------------
namespace {
using MLP = Sequential<Input<4>, Dense<5>, ReLU, Dense<3>>;
using Wider = Sequential<Input<4>, Dense<6>, ReLU, Dense<3>>;
using Other = Sequential<Input<4>, Dense<5>, Flatten, Dense<3>>;
using Longer = Sequential<Input<4>, Dense<5>, ReLU, Dense<3>, ReLU>;

xt::xarray<float> probe() {
  xt::xarray<float> x = xt::xarray<float>::from_shape({6, 4});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = float(std::sin(double(i)));
  return x;
}
}  // namespace

TEST_CASE("weights: round trip (static and dynamic, float and double, metadata)") {
  temp_dir d;
  MLP net;
  initialize(net, 17);
  io::save_weights(d / "m.nnlw", net, {{"epochs", "3"}, {"note", "hello"}});
  CHECK(!fs::exists(d / "m.nnlw.tmp"));
  io::weights_metadata meta;
  MLP back = io::load_weights<MLP>(d / "m.nnlw", &meta);
  CHECK(meta.at("epochs") == "3");
  CHECK(io::read_weights_metadata(d / "m.nnlw").at("note") == "hello");
  CHECK(back.layer<0>().W == net.layer<0>().W);
  CHECK(back.layer<2>().b == net.layer<2>().b);
  MLP other;
  initialize(other, 99);
  auto dyn = to_dynamic(other);
  io::load_weights(d / "m.nnlw", dyn);
  const auto y1 = forward(net, probe()), y2 = forward(dyn, probe());
  for (std::size_t i = 0; i < y1.size(); ++i) CHECK(y1.data()[i] == y2.data()[i]);
  // Saved from the dynamic form, loaded into the static one.
  io::save_weights(d / "dyn.nnlw", dyn);
  CHECK(io::load_weights<MLP>(d / "dyn.nnlw").layer<0>().W == net.layer<0>().W);
  // float file into a double network and back
  auto dbl = io::load_weights<rebind_scalar_t<MLP, double>>(d / "m.nnlw");
  CHECK(dbl.layer<0>().W(1, 2) == double(net.layer<0>().W(1, 2)));
  io::save_weights(d / "d.nnlw", dbl);
  CHECK(io::load_weights<MLP>(d / "d.nnlw").layer<0>().W == net.layer<0>().W);
}

TEST_CASE("weights: another architecture is a shape_error naming the layer") {
  temp_dir d;
  MLP net;
  initialize(net, 1);
  io::save_weights(d / "m.nnlw", net);
  Wider w;
  initialize(w, 2);
  const Wider w0 = w;
  CHECK_THROWS_WITH_AS(io::load_weights(d / "m.nnlw", w),
                       doctest::Contains("layer 0 (Dense): output shape [5] in the file, [6] in the network"), shape_error);
  CHECK(w.layer<0>().W == w0.layer<0>().W);  // untouched
  CHECK_THROWS_WITH_AS(io::load_weights<Other>(d / "m.nnlw"),
                       doctest::Contains("layer 1 (Flatten): the file has a ReLU layer here"), shape_error);
  CHECK_THROWS_WITH_AS(io::load_weights<Longer>(d / "m.nnlw"),
                       doctest::Contains("the file has 3 layers, the network has 4"), shape_error);
  CHECK_THROWS_WITH_AS((io::load_weights<Sequential<Input<5>, Dense<5>, ReLU, Dense<3>>>(d / "m.nnlw")),
                       doctest::Contains("input shape [4] in the file, [5] in the network"), shape_error);
  // Same output shapes, different parameter sizes: a dynamic Dense with another input width.
  DynamicNetwork dn(shape(4));
  Dense<dyn> a;
  a.W = xt::zeros<float>({4, 5});
  a.b = xt::zeros<float>({5});
  dn.add(a).add(ReLU{});
  Dense<dyn> c;
  c.W = xt::zeros<float>({5, 3});
  c.b = xt::zeros<float>({3});
  dn.add(c);
  CHECK_NOTHROW(io::load_weights(d / "m.nnlw", dn));
}

TEST_CASE("weights: truncated, corrupt and foreign files are io_errors; NaN is a value_error") {
  temp_dir d;
  MLP net;
  initialize(net, 1);
  io::save_weights(d / "m.nnlw", net, {{"k", "v"}});
  const bytes good = read_file(d / "m.nnlw");
  MLP target;
  initialize(target, 5);
  const MLP before = target;
  for (std::size_t n = 0; n < good.size(); ++n) {
    write_file(d / "t.nnlw", bytes(good.begin(), good.begin() + std::ptrdiff_t(n)));
    CAPTURE(n);
    CHECK_THROWS_AS(io::load_weights(d / "t.nnlw", target), io_error);
  }
  CHECK(target.layer<0>().W == before.layer<0>().W);
  std::size_t caught = 0;
  for (std::size_t pos = 0; pos < good.size(); ++pos) {
    bytes b = good;
    b[pos] ^= 0x10;
    write_file(d / "f.nnlw", b);
    try {
      io::load_weights(d / "f.nnlw", target);
    } catch (const io_error&) {
      ++caught;
    }
  }
  CHECK(caught == good.size());  // every single flipped bit is detected
  bytes extra = good;
  extra.push_back(0);
  write_file(d / "x.nnlw", extra);
  CHECK_THROWS_AS(io::load_weights(d / "x.nnlw", target), io_error);
  write_file(d / "foreign", bytes{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK_THROWS_WITH_AS(io::load_weights(d / "foreign", target), doctest::Contains("bad magic number"), io_error);
  bytes v3 = good;
  v3[4] = 3;
  write_file(d / "v3", v3);
  CHECK_THROWS_WITH_AS(io::load_weights(d / "v3", target), doctest::Contains("unsupported version 3"), io_error);
  CHECK_THROWS_WITH_AS(io::load_weights(d / "none", target), doctest::Contains("cannot open"), io_error);
  CHECK_THROWS_AS(io::save_weights(d / "no-such-dir" / "m.nnlw", net), io_error);
  MLP nan = net;
  nan.layer<2>().W(1, 1) = std::nanf("");
  io::save_weights(d / "nan.nnlw", nan);
  CHECK_THROWS_WITH_AS(io::load_weights(d / "nan.nnlw", target), doctest::Contains("layer 2 (Dense): parameter 0"),
                       value_error);
  CHECK(target.layer<2>().W == before.layer<2>().W);
}

namespace {
using BNNet = Sequential<Input<2, 4, 4>, Conv2D<3, 3, 1, 1>, BatchNorm<3>, ReLU,
                         Residual<Block<Conv2D<3, 3, 1, 1>, BatchNorm<3>, ReLU>>, Flatten, Dense<2>>;
void set_running_stats(BNNet& net, float shift) {
  auto& a = net.layer<1>();
  auto& b = net.layer<3>().block.template layer<1>();
  for (std::size_t c = 0; c < 3; ++c) {
    a.running_mean(c) = shift + 0.25f * float(c);
    a.running_var(c) = 1.5f + float(c);
    b.running_mean(c) = -shift - 0.5f * float(c);
    b.running_var(c) = 0.75f + 0.5f * float(c);
  }
}
}  // namespace

TEST_CASE("weights: BatchNorm's running statistics are saved (version 2), also inside a Residual") {
  temp_dir d;
  BNNet net;
  initialize(net, 3);
  set_running_stats(net, 0.5f);
  io::save_weights(d / "bn.nnlw", net);
  const BNNet back = io::load_weights<BNNet>(d / "bn.nnlw");  // initialize() sets 0 and 1 first
  CHECK(back.layer<1>().running_mean == net.layer<1>().running_mean);
  CHECK(back.layer<1>().running_var == net.layer<1>().running_var);
  CHECK(back.layer<3>().block.template layer<1>().running_mean == net.layer<3>().block.template layer<1>().running_mean);
  CHECK(back.layer<3>().block.template layer<1>().running_var == net.layer<3>().block.template layer<1>().running_var);
  std::vector<float> x(2 * 4 * 4 * 2);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i));
  const auto y0 = forward(net, xt::adapt(x, {std::size_t(2), std::size_t(2), std::size_t(4), std::size_t(4)}));
  const auto y1 = forward(back, xt::adapt(x, {std::size_t(2), std::size_t(2), std::size_t(4), std::size_t(4)}));
  CHECK(y0 == y1);  // bit for bit: same weights, same statistics
  // the dynamic form reads the same file
  auto dyn = to_dynamic(net);
  set_running_stats(net, 2.0f);
  auto other = to_dynamic(net);
  io::load_weights(d / "bn.nnlw", other);
  CHECK(detail::model_fingerprint(other) == detail::model_fingerprint(dyn));
  CHECK(detail::model_fingerprint(other) != detail::model_fingerprint(to_dynamic(net)));
}

TEST_CASE("weights: a version-1 file (no buffer section) still loads and keeps the network's buffers") {
  temp_dir d;
  BNNet net;
  initialize(net, 4);
  set_running_stats(net, 0.5f);
  io::save_weights(d / "bn.nnlw", net);
  // Rewrite as version 1: drop every layer's u32 buffer count and buffer tensors, fix the checksum.
  bytes b = read_file(d / "bn.nnlw");
  bytes v1(b.begin(), b.begin() + 4);
  const std::uint32_t one = 1;
  v1.insert(v1.end(), reinterpret_cast<const std::uint8_t*>(&one), reinterpret_cast<const std::uint8_t*>(&one) + 4);
  std::size_t p = 8;
  auto u32 = [&](std::size_t at) {
    std::uint32_t u;
    std::memcpy(&u, b.data() + at, 4);
    return u;
  };
  auto u64 = [&](std::size_t at) {
    std::uint64_t u;
    std::memcpy(&u, b.data() + at, 8);
    return u;
  };
  auto copy = [&](std::size_t n) {
    v1.insert(v1.end(), b.begin() + std::ptrdiff_t(p), b.begin() + std::ptrdiff_t(p + n));
    p += n;
  };
  copy(4);                                 // scalar bytes
  const std::uint32_t nmeta = u32(p);
  copy(4);
  for (std::uint32_t i = 0; i < 2 * nmeta; ++i) copy(4 + u32(p));
  auto shp = [&] { copy(4 + 8 * std::size_t(u32(p))); };
  shp();                                   // input shape
  const std::uint32_t nl = u32(p);
  copy(4);
  for (std::uint32_t l = 0; l < nl; ++l) {
    copy(4 + u32(p));                      // name
    shp();                                 // output shape
    const std::uint32_t nt = u32(p);
    copy(4);
    for (std::uint32_t t = 0; t < nt; ++t) copy(8 + 4 * std::size_t(u64(p)));
    const std::uint32_t nb = u32(p);       // the version-2 buffer section: skipped
    p += 4;
    for (std::uint32_t t = 0; t < nb; ++t) p += 8 + 4 * std::size_t(u64(p));
  }
  REQUIRE(p + 8 == b.size());
  std::uint64_t h = 1469598103934665603ull;
  for (auto c : v1) h = (h ^ c) * 1099511628211ull;
  v1.insert(v1.end(), reinterpret_cast<const std::uint8_t*>(&h), reinterpret_cast<const std::uint8_t*>(&h) + 8);
  write_file(d / "v1.nnlw", v1);
  BNNet target;
  initialize(target, 9);
  set_running_stats(target, -1.0f);
  const BNNet before = target;
  io::load_weights(d / "v1.nnlw", target);
  CHECK(target.layer<0>().W == net.layer<0>().W);                       // parameters: from the file
  CHECK(target.layer<1>().gamma == net.layer<1>().gamma);
  CHECK(target.layer<1>().running_mean == before.layer<1>().running_mean);  // buffers: untouched
  CHECK(target.layer<3>().block.template layer<1>().running_var == before.layer<3>().block.template layer<1>().running_var);
}

TEST_CASE("fuzz: random mutations of IDX and weights files never crash, only throw nnlens::error") {
  temp_dir d;
  std::mt19937_64 r(2024);
  bytes pixels(2 * 5 * 4);
  for (auto& p : pixels) p = std::uint8_t(r());
  const bytes good_idx = idx(0x08, {2, 5, 4}, pixels);
  MLP net;
  initialize(net, 1);
  io::save_weights(d / "w.nnlw", net, {{"k", "v"}});
  const bytes good_w = read_file(d / "w.nnlw");
  auto mutate = [&](bytes b) {
    const int kind = int(r() % 4);
    const std::size_t n = 1 + r() % 4;
    for (std::size_t i = 0; i < n && !b.empty(); ++i) {
      const std::size_t pos = r() % b.size();
      if (kind == 0) b[pos] = std::uint8_t(r());
      if (kind == 1) b[pos] ^= std::uint8_t(1u << (r() % 8));
      if (kind == 2) b.resize(pos);
      if (kind == 3) b.insert(b.begin() + std::ptrdiff_t(pos), std::uint8_t(r()));
    }
    return b;
  };
  std::size_t threw = 0, parsed = 0;
  for (int it = 0; it < 1500; ++it) {
    write_file(d / "f", mutate(good_idx));
    try {
      (void)io::read_idx_images(d / "f");
      ++parsed;
    } catch (const nnlens::error&) {
      ++threw;
    }
#if NNLENS_HAS_ZLIB
    write_gz(d / "f.gz", mutate(good_idx));
    try {
      (void)io::read_idx(d / "f.gz");
      ++parsed;
    } catch (const nnlens::error&) {
      ++threw;
    }
    // a mutated compressed stream
    write_gz(d / "g.gz", good_idx);
    write_file(d / "g.gz", mutate(read_file(d / "g.gz")));
    try {
      (void)io::read_idx(d / "g.gz");
      ++parsed;
    } catch (const nnlens::error&) {
      ++threw;
    }
#endif
    write_file(d / "w", mutate(good_w));
    MLP target;
    initialize(target, 2);
    try {
      io::load_weights(d / "w", target);
      ++parsed;
    } catch (const nnlens::error&) {
      ++threw;
    }
  }
  CHECK(threw > 0);
  CHECK(parsed > 0);  // e.g. a changed pixel value is still a valid file
}
