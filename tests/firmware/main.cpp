// tests/firmware/main.cpp -- the firmware side of the Cortex-M check (tests/firmware/firmware_check.py):
// runs the generated model (model.hpp, `nnlens codegen --freestanding`) on the inputs of inputs.hpp
// and prints, over semihosting, each output's bits in hex, the SysTick ticks of each forward pass,
// the peak stack and the number of allocation attempts (startup.c's malloc fails and counts).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "model.hpp"
#include "inputs.hpp"  // fw_inputs[fw_input_count][model::input_size]

extern "C" {
void fw_write(const char*);
std::size_t fw_stack_unused(void);
std::size_t fw_stack_size(void);
extern volatile std::uint32_t fw_malloc_calls;
}

namespace {
// SysTick (ARMv7-M system control space): 24-bit down-counter on the processor clock.
volatile std::uint32_t& st_ctrl = *reinterpret_cast<volatile std::uint32_t*>(0xE000E010u);
volatile std::uint32_t& st_load = *reinterpret_cast<volatile std::uint32_t*>(0xE000E014u);
volatile std::uint32_t& st_val = *reinterpret_cast<volatile std::uint32_t*>(0xE000E018u);

char* put_hex(char* p, std::uint64_t v, int digits) {
  for (int i = digits - 1; i >= 0; --i) *p++ = "0123456789abcdef"[(v >> (4 * i)) & 0xF];
  return p;
}
char* put_dec(char* p, std::uint64_t v) {
  char t[24];
  int n = 0;
  do t[n++] = char('0' + v % 10), v /= 10;
  while (v);
  while (n) *p++ = t[--n];
  return p;
}
}  // namespace

int main() {
  using T = model::scalar;
  static T y[model::output_size];
  static char line[64 + 20 * model::output_size];
  st_load = 0xFFFFFFu;
  st_val = 0;
  st_ctrl = 5u;  // enable, processor clock, no interrupt
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < fw_input_count; ++i) {
    const std::uint32_t t0 = st_val;
    const nnlens::fw::status s = model::forward(fw_inputs[i], y);
    const std::uint32_t t1 = st_val;
    const std::uint32_t ticks = (t0 - t1) & 0xFFFFFFu;
    total += ticks;
    char* p = line;
    if (s != nnlens::fw::status::ok) {
      fw_write("status ");
      fw_write(nnlens::fw::status_message(s));
      fw_write("\n");
      return 2;
    }
    std::memcpy(p, "y ", 2), p += 2;
    p = put_dec(p, i);
    for (std::size_t j = 0; j < model::output_size; ++j) {
      *p++ = ' ';
      if constexpr (sizeof(T) == 4) {
        std::uint32_t b;
        std::memcpy(&b, &y[j], 4);
        p = put_hex(p, b, 8);
      } else {
        std::uint64_t b;
        std::memcpy(&b, &y[j], 8);
        p = put_hex(p, b, 16);
      }
    }
    std::memcpy(p, " ticks ", 7), p += 7;
    p = put_dec(p, ticks);
    *p++ = '\n', *p = 0;
    fw_write(line);
  }
  // the checks of the status path: a NaN input and null pointers are refused, nothing thrown
  static T bad[model::input_size];
  bad[0] = std::numeric_limits<T>::quiet_NaN();
  const bool nan_refused = model::forward(bad, y) == nnlens::fw::status::non_finite_input;
  const bool null_refused = model::forward(nullptr, y) == nnlens::fw::status::null_argument;
  char* p = line;
  std::memcpy(p, "stack ", 6), p += 6;
  p = put_dec(p, fw_stack_size() - fw_stack_unused());
  std::memcpy(p, " malloc ", 8), p += 8;
  p = put_dec(p, fw_malloc_calls);
  std::memcpy(p, " ticks_total ", 13), p += 13;
  p = put_dec(p, total);
  std::memcpy(p, nan_refused && null_refused ? " status_checks ok\n" : " status_checks FAILED\n", nan_refused && null_refused ? 18 : 22);
  p += nan_refused && null_refused ? 18 : 22;
  *p = 0;
  fw_write(line);
  return nan_refused && null_refused ? 0 : 3;
}
