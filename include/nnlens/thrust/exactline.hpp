// nnlens/thrust/exactline.hpp -- ExactLine over many segments on the thrust device system.
//
//   auto v = exact_lines(nnlens::execution::thrust, net, A, B, opts);   // A, B: n rows; segment i = A[i] -> B[i]
//   nnlens::thrust_policy{.batch = 1024}   samples per pass as for forward; a pass holds
//                                          batch / 8 segments (32 by default on CPU systems, 1024
//                                          on CUDA): segments grow to many points each
//
// The same result type, options, statistics and errors as the host exact_lines(policy, ...)
// (nnlens/exactline/line.hpp).  Algorithm: all segments of a pass at once, layer by layer.  The
// points of every segment are rows of one device batch sorted by (segment, t), holding the ratio t
// (R = double) and the tensor before the next layer (in S).  The layers are read by their pwl_rule
// forms, as the host reads them (exactline/line.hpp): an affine layer maps all rows with its
// kernels of thrust/network.hpp; an element-wise layer (pwl_rule<L>::knots: ReLU, LeakyReLU, HardTanh,
// Clamp) splits where a unit crosses a knot; a max window (pwl_rule<L>::breaks of a max-pooling
// window, core/properties.hpp: MaxPool2D) splits by the envelope walk, fused with an adjacent
// element-wise max(x, c) (pwl_rule<L>::max_floor) as the host does with fuse_max_pool.  At a split
// layer each pair of consecutive points of a segment counts its candidate ratios, an exclusive
// scan gives the offsets, each pair writes and sorts its run in place, and merges it with the
// host's rules (exact repeats dropped; ratios within merge_tol of the last kept point or of the
// pair's end counted in stats.merged). A composite (pwl_rule<L>::for_each_branch: Residual, Concat, nested)
// runs each branch from a copy of its input rows, then joins them as the host's composite step:
// per segment the union of the branches' ratios (merge_tol: the host's rule), per new row the
// branches' values there (interpolated between a branch's points) placed by the join.  New rows are interpolated from the pair's ends (exact on an affine piece), or
// recomputed from the input with `reanchor`; then the layer runs on every row.  stats.points and
// stats.merged are those of the host; `validate` runs on the host afterwards, as in line.hpp.
// Engine: nnlens/thrust/exactline_engine.hpp; kernels: nnlens/thrust/exactline_kernels.hpp.
//
// requires: every layer has thrust kernels (thrust/network.hpp) and an affine, knots (at most 8),
//           max-window or composite (at most 8 branches) pwl_rule (a Sequential with another layer is a compile error naming it,
//           error_thrust_backend_has_no_kernel_for<L>; a DynamicNetwork holding one gets
//           logic_error naming it before any segment runs, also with keep_going); R = double
//           (ratios never narrow; S = float or double).
// ensures:  the host's pieces: the ratios are computed with the host's formulas from the same
//           values; the Dense kernel sums in input-index order (on ACAS Xu and the test nets the
//           results were bit-identical to execution::seq in double).  A segment with an error
//           (shape_error, value_error, limit_error: the host's messages) leaves the device batch;
//           without keep_going the lowest-numbered failing segment's error is rethrown, prefixed
//           "exact_lines: segment i: ", after all the others ran.  Memory per pass: about
//           2 x points x widest layer x sizeof(S) (policy.batch bounds the segments, not the points).
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

#include "nnlens/exactline/line.hpp"
#include "nnlens/thrust/exactline_engine.hpp"
#include "nnlens/thrust/network.hpp"
#include "nnlens/thrust/policy.hpp"

namespace nnlens {

/// Segments per pass = policy.batch / thrust_line_batch_divisor (at least 1).
inline constexpr std::size_t thrust_line_batch_divisor = 8;

/// ExactLine of segments A[i] -> B[i] on the thrust device system (see the header comment).
/// Passes of policy.batch / 8 segments (32 by default on CPU systems, 1024 on CUDA).
template <class S = double, class R = double, class Net>
std::vector<line_result<S, R>> exact_lines(const execution::thrust_policy& policy, const Net& net,
                                           const std::vector<std::vector<S>>& A, const std::vector<std::vector<S>>& B,
                                           const line_options& opt = {}) {
  static_assert(detail::require_pwl_network<Net>());
  static_assert(detail::require_thrust_network<Net>(),
                "exact_lines(execution::thrust, ...): every layer needs thrust kernels (thrust/network.hpp); the "
                "incomplete type 'error_thrust_backend_has_no_kernel_for<L>' names the layer");
  static_assert(std::is_same_v<R, double>, "exact_lines(execution::thrust, ...) computes ratios in double (R = double)");
  namespace tl = detail::thrust_line;
  check_shapes(net);
  if (A.size() != B.size())
    throw shape_error(detail::concat("exact_lines: ", A.size(), " start points but ", B.size(), " end points"));
  const auto& n = detail::as_scalar<S>(net);
  const shape in = input_shape_of(n), out = output_shape_of(n);
  tl::check_nodes(n);
  const device_network<std::remove_cvref_t<decltype(n)>, S> dnet(n);  // the parameters, per node of the op graph

  std::vector<line_result<S, R>> res(A.size());
  std::vector<std::exception_ptr> eps(A.size());
  std::vector<std::size_t> ok;
  ok.reserve(A.size());
  for (std::size_t i = 0; i < A.size(); ++i) {
    try {
      detail::check_segment(A[i], B[i], in);
      ok.push_back(i);
    } catch (const error&) {
      eps[i] = std::current_exception();
    }
  }
  // policy.batch counts samples; a segment becomes tens to hundreds of points (ACAS Xu: 117), and
  // on CPU systems passes that stay in cache win (10,000 ACAS Xu segments, 1 OMP thread: CPU time
  // 1.11 s in passes of 16 segments, 1.17 s of 64, 1.33 s of 256, 2.27 s of 1024)
  const std::size_t pass = std::max<std::size_t>(1, policy.batch / thrust_line_batch_divisor);
#if THRUST_DEVICE_SYSTEM != THRUST_DEVICE_SYSTEM_CUDA
  // CPU device systems: the buffers stay with the thread for the next call (fresh pages cost a
  // page fault each: one pass of 256 ACAS Xu segments took 4x longer with new buffers)
  static thread_local tl::engine<S, R> eng;
  eng.bind(opt);
#else
  tl::engine<S, R> eng(opt);
#endif
  for (std::size_t b0 = 0; b0 < ok.size(); b0 += pass) {
    const std::vector<std::size_t> ids(ok.begin() + std::ptrdiff_t(b0),
                                       ok.begin() + std::ptrdiff_t(std::min(ok.size(), b0 + pass)));
    eng.run(dnet, A, B, ids, res, eps);
    detail::thrust_pass_counter().fetch_add(1, std::memory_order_relaxed);  // thrust_device_passes()
  }
  for (std::size_t i : ok) {
    if (eps[i]) continue;
    auto& r = res[i];
    r.input_shape = in;
    r.output_shape = out;
    r.from = A[i];
    r.to = B[i];
    if (opt.validate) detail::validate_line(n, r, opt);
  }
  for (std::size_t i = 0; i < A.size(); ++i)
    if (eps[i]) {
      if (!opt.keep_going) detail::rethrow_prefixed(eps[i], detail::concat("exact_lines: segment ", i, ": "));
      try {
        std::rethrow_exception(eps[i]);
      } catch (const error& e) {
        res[i].error = e.what();
      }
    }
  return res;
}

}  // namespace nnlens
