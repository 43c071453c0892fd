// LibTorch C++ trainer: trains a TorchScript module (scripted from the torchvision model by
// engine/worker/backends/train_libtorch.py) with the same loop as the Python trainer
// (engine/worker/training/train_loop.py + engine/worker/backends/train_torch.py): SGD with momentum, cross-entropy
// on logits, the same batches in the same order, and one steady_clock sample per step.
//
// Per step, untimed: the batch is gathered (index_select on the preloaded training tensor
// with the epoch's order slice), as the Python loop gathers outside its timer. Timed:
// zero_grad, forward, cross_entropy, backward, SGD step, loss.item() (the sync) and the
// correct count. An epoch's wall time runs from its start to the end of its last step,
// gathers included. After each epoch the test split's logits are computed in eval mode
// (no grad, batches of the training batch size) and written to OUT_DIR/logits-E.bin.
//
// JSON lines on stdout:
//   {"event":"epoch_start","epoch":E,"done":N}
//   {"event":"steps","epoch":E,"done":N,"ns":[...],"losses":[...]}  (every ~0.5 s, and
//        at the end of each epoch: the step samples since the previous "steps" line)
//   {"event":"epoch","epoch":E,"done":N,"wall_s":S,"loss_sum":L,"correct":C,
//    "rows":R,"classes":K}  (its logits: OUT_DIR/logits-E.bin, R x K float32)
//   {"event":"diverged","epoch":E,"step":N,"loss":"nan"}  (then exit code 4)
//   {"event":"done","peak_rss_bytes":B,"intra_threads":T,"inter_threads":T}
//
// usage: libtorch_train MODEL.pt X_TRAIN.bin Y_TRAIN.bin N_TRAIN C H W X_TEST.bin Y_TEST.bin
//        N_TEST ORDERS.bin ORDER_LEN RNG_STATE.bin|- OUT_DIR INTRA INTER LR MOMENTUM EPOCHS
//        STEPS BATCH
// X_*: float32 NCHW, Y_*: int64, ORDERS: EPOCHS x ORDER_LEN int64, RNG_STATE: the bytes of
// torch.get_rng_state() (so dropout / stochastic depth draw what Python's would), all
// little-endian raw arrays.
#include <torch/script.h>
#include <torch/torch.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include "common.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using bench::Clock;
using bench::ns_since;
using bench::peak_rss_kb;
constexpr auto kReportEvery = std::chrono::milliseconds(500);



// Reads exactly t.nbytes() bytes of `path` into the (contiguous) tensor t.
void read_into(const std::string& path, at::Tensor& t) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot open " + path);
  const auto size = static_cast<size_t>(in.tellg());
  if (size != t.nbytes())
    throw std::runtime_error(path + " holds " + std::to_string(size) + " bytes, expected " +
                             std::to_string(t.nbytes()));
  in.seekg(0);
  in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(size));
  if (!in) throw std::runtime_error("cannot read " + path);
}

size_t file_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot open " + path);
  return static_cast<size_t>(in.tellg());
}

template <typename T>
void print_list(std::ostream& os, const std::vector<T>& v) {
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << "]";
}

int run(int argc, char** argv) {
  if (argc != 22) {
    std::cerr << "usage: libtorch_train MODEL.pt X_TRAIN.bin Y_TRAIN.bin N_TRAIN C H W "
                 "X_TEST.bin Y_TEST.bin N_TEST ORDERS.bin ORDER_LEN RNG_STATE.bin|- OUT_DIR "
                 "INTRA INTER LR MOMENTUM EPOCHS STEPS BATCH\n";
    return 2;
  }
  const std::string model_path = argv[1], x_train_path = argv[2], y_train_path = argv[3];
  const int64_t n_train = std::stoll(argv[4]), c = std::stoll(argv[5]),
                h = std::stoll(argv[6]), w = std::stoll(argv[7]);
  const std::string x_test_path = argv[8], y_test_path = argv[9];
  const int64_t n_test = std::stoll(argv[10]);
  const std::string orders_path = argv[11];
  const int64_t order_len = std::stoll(argv[12]);
  const std::string rng_path = argv[13], out_dir = argv[14];
  // Inter-op threads first: it must be set before any parallel work starts.
  at::set_num_interop_threads(std::stoi(argv[16]));
  at::set_num_threads(std::stoi(argv[15]));
  const double lr = std::stod(argv[17]), momentum = std::stod(argv[18]);
  const int64_t epochs = std::stoll(argv[19]), steps = std::stoll(argv[20]),
                b = std::stoll(argv[21]);
  if (steps * b > order_len)
    throw std::runtime_error(std::to_string(steps) + " steps of " + std::to_string(b) +
                             " exceed the order's " + std::to_string(order_len) + " indices");

  at::Tensor x_train = torch::empty({n_train, c, h, w}, torch::kFloat32);
  at::Tensor y_train = torch::empty({n_train}, torch::kInt64);
  at::Tensor x_test = torch::empty({n_test, c, h, w}, torch::kFloat32);
  at::Tensor y_test = torch::empty({n_test}, torch::kInt64);
  at::Tensor orders = torch::empty({epochs, order_len}, torch::kInt64);
  read_into(x_train_path, x_train);
  read_into(y_train_path, y_train);
  read_into(x_test_path, x_test);
  read_into(y_test_path, y_test);
  read_into(orders_path, orders);
  if (rng_path != "-") {  // continue Python's CPU generator where model building left it
    at::Tensor state = torch::empty({static_cast<int64_t>(file_size(rng_path))}, torch::kUInt8);
    read_into(rng_path, state);
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  }

  torch::jit::Module module = torch::jit::load(model_path);
  module.train();
  std::vector<at::Tensor> params;
  for (const at::Tensor& p : module.parameters()) params.push_back(p);
  // LibTorch's SGD is torch.optim.SGD's formula (dampening 0, no Nesterov): the momentum
  // buffer starts as a copy of the first gradient, then buf = m * buf + g; p -= lr * buf.
  torch::optim::SGD opt(params, torch::optim::SGDOptions(lr).momentum(momentum));

  std::cout << std::setprecision(9);
  std::vector<int64_t> pending_ns;
  std::vector<float> pending_losses;
  int64_t done = 0;
  auto flush_steps = [&](int64_t epoch) {
    std::cout << "{\"event\":\"steps\",\"epoch\":" << epoch << ",\"done\":" << done
              << ",\"ns\":";
    print_list(std::cout, pending_ns);
    std::cout << ",\"losses\":";
    print_list(std::cout, pending_losses);
    std::cout << "}" << std::endl;
    pending_ns.clear();
    pending_losses.clear();
  };

  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    std::cout << "{\"event\":\"epoch_start\",\"epoch\":" << epoch << ",\"done\":" << done
              << "}" << std::endl;
    const at::Tensor order = orders[epoch - 1];
    double loss_sum = 0.0;
    int64_t correct = 0;
    const auto start = Clock::now();
    auto next_report = start + kReportEvery;
    for (int64_t s = 0; s < steps; ++s) {
      const at::Tensor idx = order.slice(0, s * b, (s + 1) * b);
      at::Tensor xb = x_train.index_select(0, idx);
      at::Tensor yb = y_train.index_select(0, idx);
      const auto t0 = Clock::now();
      opt.zero_grad();  // set_to_none, as the Python trainer
      at::Tensor out = module.forward({xb}).toTensor();
      at::Tensor loss = torch::nn::functional::cross_entropy(out, yb);
      loss.backward();
      opt.step();
      const float l = loss.item<float>();
      const int64_t cor = (out.argmax(1) == yb).sum().item<int64_t>();
      const auto t1 = Clock::now();
      ++done;
      if (!std::isfinite(l)) {
        std::cout << "{\"event\":\"diverged\",\"epoch\":" << epoch << ",\"step\":" << done
                  << ",\"loss\":\"" << l << "\"}" << std::endl;
        return 4;
      }
      pending_ns.push_back(ns_since(t0, t1));
      pending_losses.push_back(l);
      loss_sum += l;
      correct += cor;
      if (t1 >= next_report && s + 1 < steps) {
        flush_steps(epoch);
        next_report = Clock::now() + kReportEvery;
      }
    }
    const double wall_s = ns_since(start, Clock::now()) / 1e9;
    flush_steps(epoch);

    // Test logits in eval mode, batches of b (the last one partial), then back to train().
    at::Tensor logits;
    {
      module.eval();
      torch::NoGradGuard no_grad;
      std::vector<at::Tensor> parts;
      for (int64_t i = 0; i < n_test; i += b)
        parts.push_back(
            module.forward({x_test.slice(0, i, std::min(i + b, n_test))}).toTensor());
      logits = torch::cat(parts).to(torch::kFloat32).contiguous();
      module.train();
    }
    const std::string path = out_dir + "/logits-" + std::to_string(epoch) + ".bin";
    {
      std::ofstream f(path, std::ios::binary);
      f.write(static_cast<const char*>(logits.data_ptr()),
              static_cast<std::streamsize>(logits.nbytes()));
      if (!f) throw std::runtime_error("cannot write " + path);
    }
    std::cout << "{\"event\":\"epoch\",\"epoch\":" << epoch << ",\"done\":" << done
              << ",\"wall_s\":" << std::setprecision(17) << wall_s << ",\"loss_sum\":"
              << loss_sum << std::setprecision(9) << ",\"correct\":" << correct
              << ",\"rows\":" << logits.size(0)
              << ",\"classes\":" << logits.size(1) << "}" << std::endl;
  }
  std::cout << "{\"event\":\"done\",\"peak_rss_bytes\":" << peak_rss_kb() * 1024
            << ",\"intra_threads\":" << at::get_num_threads()
            << ",\"inter_threads\":" << at::get_num_interop_threads() << "}" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const c10::Error& e) {
    std::cerr << "libtorch_train: " << e.what_without_backtrace() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "libtorch_train: " << e.what() << "\n";
  }
  return 1;
}
