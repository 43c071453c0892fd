// What the LibTorch runner and trainer both need: one clock for samples and this process's
// resident set and its peak, read the way the Python worker reads its own (VmRSS, VmHWM).
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

inline long status_kb(const std::string& key) {  // a "Key:  N kB" line of /proc/self/status
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  return -1;
}

inline long peak_rss_kb() { return status_kb("VmHWM"); }  // this process's peak resident set

inline long rss_kb() { return status_kb("VmRSS"); }  // its resident set now

}  // namespace bench
