// write_window.h: the last N writes to one memory, for a pipelined loop whose reads can run ahead of
// the writes of earlier iterations.
//
// In a loop pipelined at II cycles whose read of a memory is issued L cycles before the write of the
// same iteration, the reads of the next ceil(L / II) iterations can miss that write. The kernel keeps
// those writes here, N = ceil(L / II), and reads through `read`, which returns the newest of them for
// the same address, else the stored word. The kernel pairs it with
//   #pragma HLS DEPENDENCE variable = <memory> type = inter direction = RAW distance = N + 1 dependent = true
// in the loop body (UG1399, pragma HLS dependence), which makes HLS land every write before the read of
// the iteration N + 1 later; the window covers the N iterations between. Each kernel's SPEC.md states
// its L, II and N.
//
// Members are scalars (a recursive struct, no array), so that HLS keeps the window in registers.
// In C simulation every write has landed when the next read runs, so the window returns what the
// memory holds: the sequential result, bit for bit.
#pragma once

namespace pearl {

template <typename Key, typename Value, unsigned N>
struct WriteWindow {
    Key key;
    Value value;
    bool valid;
    WriteWindow<Key, Value, N - 1> older;

    // The newest of the last N writes to `k`, or `stored` if none of them wrote it.
    Value read(Key k, const Value& stored) const {
#pragma HLS INLINE
        return valid && key == k ? value : older.read(k, stored);
    }

    // Records a write (`ok` false: an empty slot); the oldest of the N falls out.
    void push(Key k, const Value& v, bool ok = true) {
#pragma HLS INLINE
        older.push(key, value, valid);
        key = k;
        value = v;
        valid = ok;
    }

    void clear() {
#pragma HLS INLINE
        valid = false;
        older.clear();
    }
};

template <typename Key, typename Value>
struct WriteWindow<Key, Value, 0> {
    Value read(Key, const Value& stored) const {
#pragma HLS INLINE
        return stored;
    }
    void push(Key, const Value&, bool) {}
    void clear() {}
};

}  // namespace pearl
