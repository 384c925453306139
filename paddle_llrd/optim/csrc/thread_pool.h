// The thread pool of paddle_llrd's fused operators (fused_adamw.cc, ema_update.cc):
// one per process, shared by both.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace paddle_llrd {

// Elements per piece of work that a call shares out.
constexpr int64_t kPiece = 1 << 15;

// The threads a call runs on: as asked, at most one per piece of work, at least one.
inline int threads_for(int64_t asked, int64_t pieces) {
  return static_cast<int>(std::max<int64_t>(1, std::min(asked, pieces)));
}

// ------------------------------------------------------------- the threads
// The pieces of a call shared out between the caller and up to threads - 1
// workers of one pool per process, by an atomic counter; the caller returns as
// soon as every piece is done. Not OpenMP: its idle threads spin after every
// parallel region (libgomp, which Paddle loads itself, reads how long only
// when it loads) and its team's join waits for every thread of the team, so
// with the cores busy a step waited for a worker the OS had not run (the
// operator alone, 393k parameters, one core busy: 16 ms on 2 OpenMP threads,
// 0.6 ms on one). Workers here sleep until there is work, and a worker that
// wakes too late finds none and does not hold the caller up.
struct Job {
  std::function<void(int64_t)> task;
  int64_t total = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;
  std::exception_ptr error;

  void work() {
    for (;;) {
      const int64_t k = next.fetch_add(1);
      if (k >= total) return;
      try {
        task(k);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
      if (done.fetch_add(1) + 1 == total) {
        std::lock_guard<std::mutex> lock(mutex);
        finished.notify_all();
      }
    }
  }
};

class Pool {
 public:
  static Pool& instance() {
    static std::once_flag registered;
    std::call_once(registered, [] { pthread_atfork(nullptr, nullptr, [] { current() = new Pool(); }); });
    return *current();
  }

  // task(k) for every k in [0, total), on up to `threads` threads (the caller among them).
  void run(int threads, int64_t total, std::function<void(int64_t)> task) {
    auto job = std::make_shared<Job>();
    job->task = std::move(task);
    job->total = total;
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);  // (another caller's job runs: this one alone)
    if (threads > 1 && busy.owns_lock()) {
      std::lock_guard<std::mutex> lock(mutex_);
      while (static_cast<int>(workers_.size()) < threads - 1) {
        const int index = static_cast<int>(workers_.size());
        workers_.emplace_back([this, index] { serve(index); });
        workers_.back().detach();
      }
      job_ = job;
      wanted_ = threads - 1;
      ++generation_;
      wake_.notify_all();
    }
    job->work();
    {
      std::unique_lock<std::mutex> lock(job->mutex);
      job->finished.wait(lock, [&] { return job->done.load() == job->total; });
    }
    if (busy.owns_lock()) {
      std::lock_guard<std::mutex> lock(mutex_);
      job_.reset();
    }
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  static Pool*& current() {
    static Pool* pool = new Pool();  // (never destroyed: its detached workers may outlive static destruction)
    return pool;
  }

  void serve(int index) {
    uint64_t seen = 0;
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen && index < wanted_; });
        seen = generation_;
        job = job_;
      }
      if (job) job->work();
    }
  }

  std::mutex busy_;   // held by the caller whose job the workers share
  std::mutex mutex_;  // guards what follows
  std::condition_variable wake_;
  std::vector<std::thread> workers_;
  std::shared_ptr<Job> job_;
  int wanted_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace paddle_llrd
