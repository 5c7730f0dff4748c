// worker_pool.h: a persistent pool of native threads for jobs run with the GIL released.
//
// `run(threads, job)` calls job(slot) once on each of `threads` threads, slot 0 being the caller's own
// thread, and returns when every call has returned. The workers are started the first time they are
// needed and then sleep on a condition variable between jobs, so a call costs a wake-up, not a thread
// start. One job runs at a time: a second caller waits for the first. A job must not throw.
//
// The threads are detached and the pool is never destroyed: at exit they are asleep holding nothing,
// and a destructor that joined them could run while one is still waking up. A process forked while a
// pool exists gets a fresh pool (the child has the parent's pool object but none of its threads).
#pragma once

#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace pearl_pool {

class WorkerPool {
   public:
    void run(int threads, const std::function<void(int)>& job) {
        std::lock_guard<std::mutex> one_job(job_mutex_);
        if (threads > 1) {
            std::unique_lock<std::mutex> lock(mutex_);
            while (started_ < threads - 1) {  // counted once started: a failed start leaves no phantom slot
                const int slot = started_ + 1;
                std::thread([this, slot] { work(slot); }).detach();
                started_ = slot;
            }
            job_ = &job;
            active_ = threads;
            pending_ = threads - 1;
            generation_++;
            lock.unlock();
            wake_.notify_all();
        }
        job(0);
        if (threads > 1) {
            std::unique_lock<std::mutex> lock(mutex_);
            finished_.wait(lock, [this] { return pending_ == 0; });
            job_ = nullptr;
        }
    }

   private:
    void work(int slot) {
        std::unique_lock<std::mutex> lock(mutex_);
        uint64_t seen = generation_ - 1;  // a job published before this thread first waits is still its job
        for (;;) {
            wake_.wait(lock, [&] { return generation_ != seen; });
            seen = generation_;
            if (slot >= active_) continue;  // this job asked for fewer threads
            const auto* job = job_;
            lock.unlock();
            (*job)(slot);
            lock.lock();
            if (--pending_ == 0) finished_.notify_one();
        }
    }

    std::mutex job_mutex_;  // one job at a time
    std::mutex mutex_;      // guards everything below
    std::condition_variable wake_, finished_;
    const std::function<void(int)>* job_ = nullptr;
    uint64_t generation_ = 0;  // counts the jobs published to the workers
    int started_ = 0;          // workers started (slots 1..started_)
    int active_ = 1;           // threads of the current job, the caller's included
    int pending_ = 0;          // workers of the current job that have not finished it
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

}  // namespace pearl_pool
