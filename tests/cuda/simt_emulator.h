// A small SIMT emulator that runs the kernel bodies of cuda/kernel_bodies.h
// on the CPU, so their logic is tested on machines without a GPU.
//
// Model: one std::thread per CUDA thread of a block. Up to two blocks run at
// the same time (so races between blocks are visible to ThreadSanitizer);
// the rest run in turn. sync() is a block barrier (mutex + condition
// variable: the only happens-before edges between warps, exactly the
// guarantee __syncthreads gives). Shuffles exchange values through per-warp
// slots under a per-warp mutex. Shared memory is a separate heap allocation
// per block of exactly the requested size, filled with garbage, so
// AddressSanitizer sees an out-of-bounds index and stale reads show.
//
// Detected by the emulator itself (Launch throws simt::EmulationError):
//   * a divergent barrier: some threads of a block finished while others
//     wait at sync(), or a barrier that not all threads reach in time;
//   * a divergent shuffle: some lanes of a warp finished, or lanes wait in
//     different kinds of shuffle, or the block is not whole warps;
//   * an exception thrown by a body.
// Detected by the sanitizer builds of the same tests:
//   * a missing barrier (data race on shared or global memory): TSan;
//   * an out-of-bounds index into shared or global memory: ASan.
// Not modelled: memory ordering beyond barriers, warp timing, occupancy,
// launch limits, the cuBLAS call and the CUB sort (see cuda/README.md).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace simt {

constexpr int kWarpSize = 32;

// A launch found a bug in the body (divergent barrier, divergent shuffle, an
// exception) or in the launch configuration.
class EmulationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace internal {

// Thrown inside worker threads to unwind a body once the launch has failed.
struct Abort {};

class BlockSlot;

}  // namespace internal

// The Ctx handed to kernel bodies (see cuda/kernel_bodies.h).
class EmuCtx {
 public:
  EmuCtx(internal::BlockSlot* slot, int thread, int block, int block_dim, int grid_dim)
      : slot_(slot), thread_(thread), block_(block), block_dim_(block_dim), grid_dim_(grid_dim) {}
  int thread_idx() const { return thread_; }
  int block_idx() const { return block_; }
  int block_dim() const { return block_dim_; }
  int grid_dim() const { return grid_dim_; }
  void sync() const;
  template <class T>
  T shfl_down(T v, int delta) const {
    const int lane = thread_ % kWarpSize;
    return Exchange(v, lane + delta < kWarpSize ? lane + delta : lane, 1);
  }
  template <class T>
  T shfl(T v, int src_lane) const {
    return Exchange(v, src_lane & (kWarpSize - 1), 2);
  }

 private:
  template <class T>
  T Exchange(T v, int src_lane, int kind) const;
  uint64_t ExchangeBits(uint64_t bits, int src_lane, int kind) const;

  internal::BlockSlot* slot_;
  int thread_, block_, block_dim_, grid_dim_;
};

// Options of a launch.
struct LaunchOptions {
  // A barrier or shuffle not completed within this time is reported as a
  // divergent barrier (threads that will never arrive). Only a hang guard: a
  // correct barrier completes in microseconds, so it is minutes, not seconds,
  // and a busy CI machine never trips it.
  std::chrono::milliseconds barrier_timeout{std::chrono::minutes(5)};
  // Blocks running at the same time (1 or 2).
  int concurrent_blocks = 2;
};

namespace internal {

// Barrier and shuffle state of the block currently running in one slot.
class BlockSlot {
 public:
  explicit BlockSlot(int block_dim, LaunchOptions options)
      : block_dim_(block_dim), options_(options), warps_(block_dim / kWarpSize) {}

  // __syncthreads.
  void Barrier() {
    std::unique_lock<std::mutex> lock(mutex_);
    CheckFailed();
    ++arrived_;
    if (arrived_ + exited_ == block_dim_) {
      if (exited_ > 0)
        FailLocked("divergent barrier: " + std::to_string(arrived_) + " of " +
                   std::to_string(block_dim_) +
                   " threads wait at sync() but the others already finished");
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    const uint64_t generation = generation_;
    if (!cv_.wait_for(lock, options_.barrier_timeout,
                      [&] { return generation_ != generation || failed_; }))
      FailLocked("divergent barrier: only " + std::to_string(arrived_) + " of " +
                 std::to_string(block_dim_) + " threads arrived at sync() (timeout)");
    CheckFailed();
  }

  // One lane's part of a full-warp shuffle.
  uint64_t Exchange(int thread, uint64_t bits, int src_lane, int kind) {
    Warp& w = warps_[thread / kWarpSize];
    const int lane = thread % kWarpSize;
    std::unique_lock<std::mutex> lock(w.mutex);
    CheckFailedWarp(lock);
    // Phase 1: everyone deposits; phase 2: everyone reads. A lane may only
    // deposit for the next shuffle once all have read this one.
    WaitWarp(
        w, lock, [&] { return w.readers == 0; }, "shuffle");
    if (w.arrived == 0) w.kind = kind;
    if (w.kind != kind)
      FailWarp(lock, "divergent shuffle: lanes of warp " + std::to_string(thread / kWarpSize) +
                         " are in different shuffle instructions");
    w.slots[lane] = bits;
    ++w.arrived;
    const uint64_t generation = w.generation;
    if (w.arrived + w.exited == kWarpSize) {
      if (w.exited > 0)
        FailWarp(lock, "divergent shuffle: " + std::to_string(w.arrived) + " lanes of warp " +
                           std::to_string(thread / kWarpSize) +
                           " shuffle but the others already finished");
      w.arrived = 0;
      w.readers = kWarpSize;
      ++w.generation;
      w.cv.notify_all();
    } else {
      WaitWarp(
          w, lock, [&] { return w.generation != generation; }, "shuffle");
    }
    const uint64_t result = w.slots[src_lane];
    if (--w.readers == 0) w.cv.notify_all();
    return result;
  }

  // A thread finished the body of the current block (normally or not).
  void Exit(int thread) {
    {
      Warp& w = warps_[thread / kWarpSize];
      std::lock_guard<std::mutex> lock(w.mutex);
      ++w.exited;
      if (w.arrived > 0 && w.arrived + w.exited == kWarpSize) {
        failed_warp_ = true;
        w.cv.notify_all();
        Record("divergent shuffle: lanes of warp " + std::to_string(thread / kWarpSize) +
               " finished while others wait in a shuffle");
      }
    }
    std::unique_lock<std::mutex> lock(mutex_);
    // Not before every thread has left the start gate: a thread still
    // waking there would take mutex_ after this exit and so be ordered after
    // everything this thread did, which hides its races from TSan (seen on a
    // loaded machine: a missing barrier went unreported).
    cv_.wait(lock, [&] { return passed_ == block_dim_ || failed_; });
    ++exited_;
    if (arrived_ > 0 && arrived_ + exited_ == block_dim_ && !failed_)
      FailNoThrow("divergent barrier: " + std::to_string(arrived_) + " of " +
                  std::to_string(block_dim_) +
                  " threads wait at sync() but the others already finished");
    if (exited_ == block_dim_) {
      // Last one out resets the slot for its next block.
      exited_ = 0;
      arrived_ = 0;
      for (Warp& w : warps_) {
        std::lock_guard<std::mutex> warp_lock(w.mutex);
        w.arrived = w.exited = w.readers = 0;
      }
      ++block_generation_;
      cv_.notify_all();
      return;
    }
    const uint64_t block_generation = block_generation_;
    cv_.wait(lock, [&] { return block_generation_ != block_generation || failed_; });
  }

  // A relaxed read on purpose: locking mutex_ here would order every
  // thread's start after the others' exits and hide races from TSan.
  bool failed() const { return failed_.load(std::memory_order_relaxed); }

  // Holds every thread of the slot until all have been created, so the
  // first block starts together (no thread runs its body before another
  // exists, which would serialise them and hide races).
  void StartGate() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (++started_ == block_dim_) {
      ++passed_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return started_ == block_dim_; });
    if (++passed_ == block_dim_) cv_.notify_all();
  }
  std::string message() {
    std::lock_guard<std::mutex> lock(message_mutex_);
    return message_;
  }
  // Records a failure (first message wins) and wakes everyone. Called with
  // mutex_ held; takes the warp mutexes after it (the one lock order).
  void FailNoThrow(const std::string& message) {
    Record(message);
    failed_ = true;
    failed_warp_ = true;
    cv_.notify_all();
    for (Warp& w : warps_) {
      std::lock_guard<std::mutex> warp_lock(w.mutex);
      w.cv.notify_all();
    }
  }
  void FailFromOutside(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    FailNoThrow(message);
  }

 private:
  struct Warp {
    std::mutex mutex;
    std::condition_variable cv;
    int arrived = 0, exited = 0, readers = 0, kind = 0;
    uint64_t generation = 0;
    uint64_t slots[kWarpSize] = {};
  };

  void Record(const std::string& message) {
    std::lock_guard<std::mutex> lock(message_mutex_);
    if (message_.empty()) message_ = message;
  }
  void CheckFailed() {
    if (failed_) throw Abort{};
  }
  [[noreturn]] void FailLocked(const std::string& message) {
    FailNoThrow(message);
    throw Abort{};
  }
  // Warp-level failures: set under the warp mutex, then propagated to the
  // block under its own mutex (never both held: no lock-order cycle).
  [[noreturn]] void FailWarp(std::unique_lock<std::mutex>& warp_lock, const std::string& message) {
    Record(message);
    failed_warp_ = true;
    for (Warp& w : warps_) w.cv.notify_all();
    warp_lock.unlock();
    FailFromOutside(message);
    throw Abort{};
  }
  void CheckFailedWarp(std::unique_lock<std::mutex>& warp_lock) {
    if (failed_warp_) {
      warp_lock.unlock();
      FailFromOutside(message());
      throw Abort{};
    }
  }
  template <class Pred>
  void WaitWarp(Warp& w, std::unique_lock<std::mutex>& lock, Pred pred, const char* what) {
    if (!w.cv.wait_for(lock, options_.barrier_timeout,
                       [&] { return pred() || failed_warp_.load(); }))
      FailWarp(lock,
               std::string("divergent ") + what + ": not all lanes of a warp arrived (timeout)");
    CheckFailedWarp(lock);
  }

  const int block_dim_;
  const LaunchOptions options_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0, exited_ = 0, started_ = 0, passed_ = 0;  // passed_: left StartGate
  uint64_t generation_ = 0, block_generation_ = 0;
  std::atomic<bool> failed_{false};
  std::atomic<bool> failed_warp_{false};
  std::mutex message_mutex_;
  std::string message_;
  std::vector<Warp> warps_;
};

}  // namespace internal

inline void EmuCtx::sync() const { slot_->Barrier(); }

inline uint64_t EmuCtx::ExchangeBits(uint64_t bits, int src_lane, int kind) const {
  return slot_->Exchange(thread_, bits, src_lane, kind);
}

template <class T>
T EmuCtx::Exchange(T v, int src_lane, int kind) const {
  static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of a type > 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = ExchangeBits(bits, src_lane, kind);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

// Runs body(ctx, shared) for every thread of grid x block, like
// kernel<<<grid, block, shared_bytes>>>. `shared` points to the block's
// shared memory (shared_bytes, garbage-filled; nullptr when 0). Throws
// EmulationError on a bad configuration or a bug detected in the body.
template <class Body>
void Launch(int grid, int block, size_t shared_bytes, Body body, LaunchOptions options = {}) {
  if (grid < 1 || block < 1 || block > 1024)
    throw EmulationError("bad launch: grid " + std::to_string(grid) + ", block " +
                         std::to_string(block));
  if (block % kWarpSize != 0)
    throw EmulationError("bad launch: block of " + std::to_string(block) +
                         " threads is not whole warps (full-mask shuffles "
                         "would be undefined)");
  const int num_slots = std::max(1, std::min(grid, std::min(2, options.concurrent_blocks)));
  std::vector<std::unique_ptr<internal::BlockSlot>> slots;
  for (int s = 0; s < num_slots; ++s)
    slots.push_back(std::make_unique<internal::BlockSlot>(block, options));
  // One allocation per block, so an overflow hits a redzone, not a neighbour.
  std::vector<std::unique_ptr<unsigned char[]>> shared(grid);
  for (int b = 0; b < grid; ++b) {
    if (shared_bytes == 0) continue;
    shared[b].reset(new unsigned char[shared_bytes]);
    std::memset(shared[b].get(), 0xCD, shared_bytes);
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(num_slots) * block);
  for (int s = 0; s < num_slots; ++s) {
    for (int t = 0; t < block; ++t) {
      threads.emplace_back([&, s, t] {
        internal::BlockSlot* slot = slots[s].get();
        slot->StartGate();
        for (int b = s; b < grid; b += num_slots) {
          if (slot->failed()) break;
          try {
            const EmuCtx ctx(slot, t, b, block, grid);
            body(ctx, static_cast<void*>(shared[b].get()));
          } catch (const internal::Abort&) {
          } catch (const std::exception& e) {
            slot->FailFromOutside(std::string("exception in kernel body: ") + e.what());
          }
          slot->Exit(t);
        }
      });
    }
  }
  for (std::thread& th : threads) th.join();
  for (auto& slot : slots)
    if (slot->failed()) throw EmulationError(slot->message());
}

}  // namespace simt
