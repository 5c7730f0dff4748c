// batch_pool.h: runs independent rows of a batch on a few threads, the caller among them.
//
// One pool per process, started on first use; its helper threads sleep on a condition variable
// between calls. A call cuts [0, n) into chunks that the caller and the helpers claim from an atomic
// counter, so a helper that wakes late (its core busy with other work) takes fewer chunks instead of
// holding the call up: the caller waits only for chunks a helper has already claimed. A call that
// finds the pool in use by another thread runs on the caller alone, and a process forked from one
// that started the pool starts its own (the helpers do not survive a fork).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace batch_pool {

// Rows [begin, end) of the batch; must not throw.
using RowsFn = std::function<void(int begin, int end)>;

class Pool {
   public:
    // fn over [0, n) in chunks of `chunk` rows on up to `threads` threads, the caller included.
    void run(int n, int chunk, int threads, const RowsFn& fn) {
        std::unique_lock<std::mutex> call(call_, std::try_to_lock);
        const int helpers = std::min(threads - 1, (n + chunk - 1) / chunk - 1);
        if (!call.owns_lock() || helpers <= 0) {
            fn(0, n);
            return;
        }
        while (started_ < helpers) {  // helpers live as long as the process: the pool is never destroyed
            std::thread([this] { helper_loop(); }).detach();
            ++started_;
        }
        Job job{&fn, n, chunk};
        {
            std::lock_guard<std::mutex> lock(m_);
            job_ = &job;
            wanted_ = helpers;
        }
        work_.notify_all();
        job.work();
        std::unique_lock<std::mutex> lock(m_);
        job_ = nullptr;  // a helper that has not woken yet stays asleep
        wanted_ = 0;
        done_.wait(lock, [this] { return busy_ == 0; });
    }

    pid_t owner() const { return owner_; }

   private:
    struct Job {
        const RowsFn* fn;
        int n, chunk;
        std::atomic<int> next{0};
        void work() {
            for (int b; (b = next.fetch_add(chunk)) < n;) (*fn)(b, std::min(n, b + chunk));
        }
    };

    void helper_loop() {
        std::unique_lock<std::mutex> lock(m_);
        for (;;) {
            work_.wait(lock, [this] { return job_ != nullptr && wanted_ > 0; });
            --wanted_;
            ++busy_;
            Job* job = job_;
            lock.unlock();
            job->work();
            lock.lock();
            if (--busy_ == 0) done_.notify_all();
        }
    }

    const pid_t owner_ = getpid();
    std::mutex call_;  // one call at a time
    std::mutex m_;     // guards job_, wanted_, busy_
    std::condition_variable work_, done_;
    Job* job_ = nullptr;
    int wanted_ = 0;   // helpers the current call may still take
    int busy_ = 0;     // helpers inside the current call's job
    int started_ = 0;  // helper threads running (touched under call_ only)
};

// This process's pool. Call it with the GIL held (which serializes the first use and a fork).
inline Pool& instance() {
    static Pool* pool = nullptr;
    if (pool == nullptr || pool->owner() != getpid()) pool = new Pool;  // a forked child's old pool is left as is
    return *pool;
}

}  // namespace batch_pool
