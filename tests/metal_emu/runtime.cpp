// The threads, barriers and SIMD-group exchange behind metal_stdlib (compiled once, linked).
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "metal_stdlib"

#undef kernel
#undef device
#undef constant
#undef thread
#undef threadgroup

namespace zyn_emu {

constexpr int SIMD_WIDTH = 32;

struct SimdGroup {
    std::barrier<> bar;
    alignas(16) unsigned char slots[SIMD_WIDTH][16];
    int lanes;
    explicit SimdGroup(int n) : bar(n), lanes(n) {}
};

struct Group {
    std::barrier<> bar;
    std::vector<SimdGroup*> simd;
    explicit Group(int n) : bar(n) {
        for (int s = 0; s * SIMD_WIDTH < n; ++s)
            simd.push_back(new SimdGroup(n - s * SIMD_WIDTH < SIMD_WIDTH ? n - s * SIMD_WIDTH : SIMD_WIDTH));
    }
    ~Group() { for (auto* s : simd) delete s; }
};

static thread_local Group* tl_group = nullptr;
static thread_local int tl_tid = 0;

static SimdGroup& my_simd() { return *tl_group->simd[tl_tid / SIMD_WIDTH]; }

void group_barrier() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    tl_group->bar.arrive_and_wait();
}
void simd_barrier() { my_simd().bar.arrive_and_wait(); }
unsigned char (*simd_slots())[16] { return my_simd().slots; }
int simd_lanes() { return my_simd().lanes; }
int simd_lane() { return tl_tid % SIMD_WIDTH; }

void run(uint grid, uint ntg, const std::function<void(const Ids&)>& body) {
    if (ntg == 0 || ntg > 1024) { std::fprintf(stderr, "threadgroup of %u threads\n", ntg); std::exit(3); }
    Group group((int)ntg);
    std::vector<std::thread> threads;
    for (uint t = 0; t < ntg; ++t) {
        threads.emplace_back([&, t] {
            tl_group = &group;
            tl_tid = (int)t;
            const uint nsg = (ntg + SIMD_WIDTH - 1) / SIMD_WIDTH;
            for (uint g = 0; g < grid; ++g) {
                Ids ids{t, g, grid, ntg, t % SIMD_WIDTH, t / SIMD_WIDTH, nsg};
                body(ids);
                group.bar.arrive_and_wait();     // the next threadgroup reuses threadgroup memory
            }
        });
    }
    for (auto& th : threads) th.join();
}

}  // namespace zyn_emu
