// worker_pool.h: the persistent pool of native threads that the extensions run their jobs on, with the
// GIL released (the MLP kernel's split batches, the tabular kernel's partitioned mode).
//
// `run(threads, job)` calls job(0) on the caller's own thread and job(slot) on up to threads - 1
// helpers, each with its own slot in 1..threads-1, and returns when every call has returned. The jobs
// share the work by claiming it (an atomic counter): a helper that has not joined by the time the
// caller's job(0) returns is not called at all, so the caller alone must be able to finish the work,
// and a helper that wakes late (its core busy with other work) takes less of it instead of holding the
// call up. A job must not throw.
//
// Waking a sleeping thread costs as much as a small job on a virtualized host (the idle core halts), so
// a helper spins for SPIN after each job before it sleeps on a condition variable, and a caller spins as
// long for the helpers to finish before it sleeps: back-to-back calls (a batch loop, a benchmark) find
// their helpers awake. One call runs at a time: a call that finds the pool in use runs job(0) alone.
//
// The threads are detached and the pool is never destroyed: at exit they are asleep holding nothing,
// and a destructor that joined them could run while one is still waking up. A process forked while a
// pool exists gets a fresh pool (the child has the parent's pool object but none of its threads).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace pearl_pool {

class WorkerPool {
   public:
    // How long a helper stays awake after a job, and a caller waits awake for its helpers.
    static constexpr std::chrono::microseconds SPIN{200};

    void run(int threads, const std::function<void(int)>& job) {
        std::unique_lock<std::mutex> one_call(call_, std::try_to_lock);
        if (threads <= 1 || !one_call.owns_lock()) {
            job(0);
            return;
        }
        while (started_ < threads - 1) {  // counted once started: a failed start leaves no phantom helper
            std::thread([this] { work(); }).detach();
            ++started_;
        }
        bool sleepers;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            job_ = &job;
            threads_ = threads;
            seats_.store(threads - 1);
            generation_.fetch_add(1);
            sleepers = sleeping_ > 0;
        }
        if (sleepers) wake_.notify_all();
        job(0);
        seats_.store(0);  // closed: a helper that has not taken a seat by now stays out
        if (!spin_until([this] { return busy_.load() == 0; }, /*yield=*/false)) {
            std::unique_lock<std::mutex> lock(mutex_);
            finished_.wait(lock, [this] { return busy_.load() == 0; });
        }
    }

   private:
    // Polls `done` for up to SPIN; whether it came true. With `yield`, any other thread on this core
    // runs first. An idle helper yields (that thread may be the caller, with work to do); a caller
    // waiting for its helpers does not (it would hand its core to another process for a time slice).
    template <typename Done>
    static bool spin_until(const Done& done, bool yield) {
        const auto until = std::chrono::steady_clock::now() + SPIN;
        for (;;) {
            for (int k = 0; k < 16; ++k) {
                if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
                _mm_pause();
#endif
            }
            if (std::chrono::steady_clock::now() >= until) return false;
            if (yield) std::this_thread::yield();
        }
    }

    void work() {
        uint64_t seen = 0;  // the first call's generation is 1: a helper started for it joins it
        for (;;) {
            if (!spin_until([&] { return generation_.load() != seen; }, /*yield=*/true)) {
                std::unique_lock<std::mutex> lock(mutex_);
                ++sleeping_;
                wake_.wait(lock, [&] { return generation_.load() != seen; });
                --sleeping_;
            }
            seen = generation_.load();
            // Counted busy before taking a seat, so that the caller, having closed the seats, waits for
            // every helper that may still take one. A seat of a later call is as good: its job is
            // published before its seats open, and that call waits for this helper too.
            busy_.fetch_add(1);
            int seats = seats_.load();
            while (seats > 0 && !seats_.compare_exchange_weak(seats, seats - 1)) {
            }
            if (seats > 0) (*job_)(threads_ - seats);  // slots 1..threads-1, one per seat
            if (busy_.fetch_sub(1) == 1) {
                std::lock_guard<std::mutex> lock(mutex_);  // the caller checks busy_ under it before sleeping
                finished_.notify_all();
            }
        }
    }

    std::mutex call_;   // one call at a time; guards started_
    std::mutex mutex_;  // guards sleeping_ and the sleeps on the condition variables
    std::condition_variable wake_, finished_;
    // The current call's job and thread count: written before its seats open, read by seat holders.
    const std::function<void(int)>* job_ = nullptr;
    int threads_ = 1;
    std::atomic<uint64_t> generation_{0};  // counts the calls published to the helpers
    std::atomic<int> seats_{0};            // helpers the current call may still take
    std::atomic<int> busy_{0};             // helpers between waking for a call and leaving it
    int started_ = 0;                      // helper threads running
    int sleeping_ = 0;                     // helpers asleep on wake_
};

// The process's pool (a new one after a fork).
inline WorkerPool& pool() {
    static std::mutex guard;
    static WorkerPool* instance = nullptr;
    static pid_t owner = 0;
    std::lock_guard<std::mutex> lock(guard);
    if (instance == nullptr || owner != getpid()) {
        instance = new WorkerPool();  // the old one, if any, belongs to the parent process
        owner = getpid();
    }
    return *instance;
}

// fn(begin, end) over [0, n) in chunks of `chunk` rows, on up to `threads` threads of pool() (the
// caller among them) claiming chunks in turn. fn must not throw.
template <typename Rows>
void run_rows(int n, int chunk, int threads, const Rows& fn) {
    threads = std::min(threads, (n + chunk - 1) / chunk);
    if (threads <= 1) {
        fn(0, n);
        return;
    }
    std::atomic<int> next{0};
    pool().run(threads, [&](int) {
        for (int b; (b = next.fetch_add(chunk)) < n;) fn(b, std::min(n, b + chunk));
    });
}

}  // namespace pearl_pool
