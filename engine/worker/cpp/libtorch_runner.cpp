// LibTorch C++ runner: loads a TorchScript file (MODEL.pt) or an AOTInductor package
// (MODEL.pt2, through torch::inductor::AOTIModelPackageLoader: the `libtorch_aoti` runtime)
// and measures it with the same policy as the Python harness (warm-up by count and time, then timed iterations until BOTH a minimum time
// and a minimum count are met, capped by max time and max count), one steady_clock sample
// per iteration. Prints JSON lines on stdout: "output" (the first forward's rows the parent
// compares, ROWS: comma-separated sample indices or "all"; at batch 256 every row was 3 MB of
// text parsed on the pinned cores for 2 rows compared), "progress", then "result" with the
// raw samples, the peak resident set and the baseline it is measured from (the resident set
// with libtorch loaded and threads set, before the input and the model: what the Python
// worker measures before it builds a model).
//
// usage: libtorch_runner MODEL.pt|MODEL.pt2 INPUT.bin B C H W INTRA INTER WARMUP_ITERS WARMUP_MAX_S
//                        MIN_TIME_S MIN_ITERS MAX_TIME_S MAX_ITERS ROWS
#include <torch/script.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <ATen/Parallel.h>

#include "common.h"

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

using bench::Clock;
using bench::ns_since;
using bench::peak_rss_kb;
using bench::rss_kb;


void print_list(const std::vector<int64_t>& v) {
  std::cout << "[";
  for (size_t i = 0; i < v.size(); ++i) std::cout << (i ? "," : "") << v[i];
  std::cout << "]";
}


// "all" -> every row of a batch of b; "0,255" -> those rows (each in [0, b), else empty)
std::vector<int64_t> parse_rows(const std::string& arg, int64_t b) {
  std::vector<int64_t> rows;
  if (arg == "all") {
    for (int64_t i = 0; i < b; ++i) rows.push_back(i);
    return rows;
  }
  size_t start = 0;
  while (start <= arg.size()) {
    const size_t end = arg.find(',', start);
    const int64_t r = std::stoll(arg.substr(start, end - start));
    if (r < 0 || r >= b) return {};
    rows.push_back(r);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 16) {
    std::cerr << "usage: libtorch_runner MODEL.pt INPUT.bin B C H W INTRA INTER WARMUP_ITERS "
                 "WARMUP_MAX_S MIN_TIME_S MIN_ITERS MAX_TIME_S MAX_ITERS ROWS\n";
    return 2;
  }
  const std::string model_path = argv[1], input_path = argv[2];
  const int64_t b = std::stoll(argv[3]), c = std::stoll(argv[4]), h = std::stoll(argv[5]),
                w = std::stoll(argv[6]);
  at::set_num_threads(std::stoi(argv[7]));
  at::set_num_interop_threads(std::stoi(argv[8]));
  const int warmup_iters = std::stoi(argv[9]);
  const int64_t warmup_max_ns = static_cast<int64_t>(std::stod(argv[10]) * 1e9);
  const int64_t min_ns = static_cast<int64_t>(std::stod(argv[11]) * 1e9);
  const int64_t min_iters = std::stoll(argv[12]);
  const int64_t max_ns = static_cast<int64_t>(std::stod(argv[13]) * 1e9);
  const int64_t max_iters = std::stoll(argv[14]);
  const std::vector<int64_t> rows = parse_rows(argv[15], b);
  if (rows.empty()) {
    std::cerr << "ROWS must be \"all\" or sample indices below " << b << ", got " << argv[15] << "\n";
    return 2;
  }
  const long baseline_kb = rss_kb();  // libtorch loaded, threads set; no input, no model

  std::vector<float> buf(static_cast<size_t>(b * c * h * w));
  std::ifstream in(input_path, std::ios::binary);
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size() * 4));
  if (!in) {
    std::cerr << "cannot read " << buf.size() * 4 << " bytes of input from " << input_path << "\n";
    return 3;
  }
  // One call of the model on the input, whichever form it came in: a TorchScript module, or
  // an AOTInductor package (its first output: the runner takes one-output models only).
  const at::Tensor x = torch::from_blob(buf.data(), {b, c, h, w}).clone();
  std::function<at::Tensor()> forward;
  torch::jit::Module module;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> package;
  std::vector<torch::jit::IValue> inputs{x};
  const std::vector<at::Tensor> tensors{x};
  if (model_path.size() > 4 && model_path.compare(model_path.size() - 4, 4, ".pt2") == 0) {
    package = std::make_unique<torch::inductor::AOTIModelPackageLoader>(model_path);
    forward = [&package, &tensors] { return package->run(tensors).at(0); };
  } else {
    module = torch::jit::load(model_path);
    module.eval();
    forward = [&module, &inputs] { return module.forward(inputs).toTensor(); };
  }
  c10::InferenceMode guard;

  auto t0 = Clock::now();
  at::Tensor out = forward().contiguous();
  const int64_t first_ns = ns_since(t0, Clock::now());
  const int64_t width = out.numel() / out.size(0);
  std::cout << "{\"event\":\"output\",\"shape\":[" << out.size(0) << "," << width
            << "],\"rows\":";
  print_list(rows);
  std::cout << ",\"values\":[";
  const float* p = out.data_ptr<float>();
  bool first = true;
  for (int64_t r : rows) {
    if (r >= out.size(0)) break;  // a model that changed the batch: the shape says so
    for (int64_t i = r * width; i < (r + 1) * width; ++i) {
      std::cout << (first ? "" : ",") << p[i];
      first = false;
    }
  }
  std::cout << "]}" << std::endl;

  std::vector<int64_t> warm, samples;
  auto w0 = Clock::now();
  for (int i = 0; i < warmup_iters; ++i) {
    auto a = Clock::now();
    forward();
    auto z = Clock::now();
    warm.push_back(ns_since(a, z));
    if (ns_since(w0, z) >= warmup_max_ns) break;
  }
  const int64_t warm_wall = ns_since(w0, Clock::now());

  std::string reason;
  auto start = Clock::now();
  auto next_report = start + std::chrono::milliseconds(250);
  int64_t elapsed = 0;
  while (true) {
    auto a = Clock::now();
    forward();
    auto z = Clock::now();
    samples.push_back(ns_since(a, z));
    elapsed = ns_since(start, z);
    const int64_t n = static_cast<int64_t>(samples.size());
    if (n >= min_iters && elapsed >= min_ns) { reason = "policy met"; break; }
    if (elapsed >= max_ns) { reason = "max_time reached"; break; }
    if (n >= max_iters) { reason = "max_iters reached"; break; }
    if (z >= next_report) {
      std::cout << "{\"event\":\"progress\",\"iters\":" << n << "}" << std::endl;
      next_report = z + std::chrono::milliseconds(250);
    }
  }
  std::cout << "{\"event\":\"result\",\"first_forward_ns\":" << first_ns
            << ",\"warmup_wall_ns\":" << warm_wall << ",\"wall_ns\":" << elapsed
            << ",\"stop_reason\":\"" << reason << "\",\"peak_rss_kb\":" << peak_rss_kb()
            << ",\"baseline_rss_kb\":" << baseline_kb
            << ",\"threads\":" << at::get_num_threads() << ",\"warmup_ns\":";
  print_list(warm);
  std::cout << ",\"samples_ns\":";
  print_list(samples);
  std::cout << "}" << std::endl;
  return 0;
}
