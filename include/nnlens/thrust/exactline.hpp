// nnlens/thrust/exactline.hpp -- ExactLine over many segments on the thrust device system.
//
//   auto v = exact_lines(nnlens::execution::thrust, net, A, B, opts);   // A, B: n rows; segment i = A[i] -> B[i]
//   nnlens::thrust_policy{.batch = 1024}   samples per pass as for forward; a pass holds
//                                          batch / 8 segments (32 by default on CPU systems, 1024
//                                          on CUDA): segments grow to many points each
//
// The same result type, options, statistics and errors as the host exact_lines(policy, ...)
// (exactline/line.hpp).  All segments of a pass at once, layer by layer: the points of every
// segment are rows of one device batch sorted by (segment, t), holding the ratio t (R = double)
// and the tensor before the next layer (in S).  Layers are read by their pwl_rule forms, as the
// host reads them: an affine layer maps all rows (thrust/network.hpp's kernels); knots and max
// windows (fused with an adjacent max(x, c) as with fuse_max_pool) propose ratios per pair of
// consecutive points, counted, scanned, written, sorted and merged in place with the host's rule
// (exactline::merge_piece); a composite runs each branch from a copy of its rows and joins them
// as the host's composite step.  New rows are interpolated (exact on an affine piece), or
// recomputed through the op graph with `reanchor`.  `validate` runs on the host afterwards.
// Engine: thrust/exactline_engine.hpp; kernels: thrust/exactline_kernels.hpp.
//
// requires: every layer has thrust kernels and an affine, knots (at most 8), max-window or
//           composite (at most 8 branches) pwl_rule: otherwise a compile error naming it for a
//           Sequential, logic_error before any segment runs for a DynamicNetwork (also with
//           keep_going); R = double (ratios never narrow; S = float or double).
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
  static_assert(detail::require_thrust_network<Net>(),
                "exact_lines(execution::thrust, ...): every layer needs thrust kernels (thrust/network.hpp); the "
                "incomplete type 'error_thrust_backend_has_no_kernel_for<L>' names the layer");
  static_assert(std::is_same_v<R, double>, "exact_lines(execution::thrust, ...) computes ratios in double (R = double)");
  namespace tl = detail::thrust_line;
  return detail::lines_impl<S, R>(net, A, B, opt, [&](const auto& n, const std::vector<std::size_t>& ok, auto& res, auto& eps) {
    tl::check_nodes(n);
    using DN = device_network<std::remove_cvref_t<decltype(n)>, S>;
    const DN dnet(n);  // the parameters, per node of the op graph
    // policy.batch counts samples; a segment becomes tens to hundreds of points (ACAS Xu: 117), and
    // on CPU systems passes that stay in cache win (10,000 ACAS Xu segments, 1 OMP thread: CPU time
    // 1.11 s in passes of 16 segments, 1.17 s of 64, 1.33 s of 256, 2.27 s of 1024)
    const std::size_t pass = std::max<std::size_t>(1, policy.batch / thrust_line_batch_divisor);
#if THRUST_DEVICE_SYSTEM != THRUST_DEVICE_SYSTEM_CUDA
    // CPU device systems: the buffers stay with the thread for the next call (fresh pages cost a
    // page fault each: one pass of 256 ACAS Xu segments took 4x longer with new buffers)
    static thread_local tl::engine<S, R, DN> eng;
    eng.bind(opt);
#else
    tl::engine<S, R, DN> eng(opt);
#endif
    for (std::size_t b0 = 0; b0 < ok.size(); b0 += pass) {
      const std::vector<std::size_t> ids(ok.begin() + std::ptrdiff_t(b0), ok.begin() + std::ptrdiff_t(std::min(ok.size(), b0 + pass)));
      eng.run(dnet, A, B, ids, res, eps);
      detail::thrust_pass_counter().fetch_add(1, std::memory_order_relaxed);  // thrust_device_passes()
    }
    for (std::size_t i : ok) {
      if (eps[i]) continue;
      auto& r = res[i];
      r.input_shape = input_shape_of(n), r.output_shape = output_shape_of(n);
      r.from = A[i], r.to = B[i];
      if (opt.validate) detail::validate_line(n, r, opt);
    }
  });
}

}  // namespace nnlens
