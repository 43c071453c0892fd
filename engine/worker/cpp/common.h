// What the LibTorch runner and trainer both need: one clock for samples and this process's
// peak resident set, read the way the Python worker reads its own (VmHWM).
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

namespace bench {

using Clock = std::chrono::steady_clock;

inline int64_t ns_since(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
}

inline long peak_rss_kb() {  // VmHWM: this process's peak resident set
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

}  // namespace bench
