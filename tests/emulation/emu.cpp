// The scheduler of the SIMT emulator (emu.h): fibers for the threads of one block, run round-robin
// until each exits, with barriers, warp shuffles, shared-memory poisoning and CUDA's launch limits.
#include "emu.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifndef EMU_ASAN
#define EMU_ASAN 0
#endif
#if EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// glibc's swapcontext makes a system call (the signal mask) on every switch, about 0.5 us here;
// the kernels switch millions of times, so on x86-64 a few instructions save and restore the
// callee-saved registers instead (x86-64 ELF). EMU_UCONTEXT forces the portable path.
#if defined(__x86_64__) && defined(__ELF__) && !defined(EMU_UCONTEXT)
#define EMU_FAST_SWITCH 1
#else
#define EMU_FAST_SWITCH 0
#include <ucontext.h>
#endif

#if EMU_FAST_SWITCH
// emu_switch_stack(&from_sp, to_sp): pushes the callee-saved registers and the SSE/x87 control
// words (callee-saved too in the SysV ABI), stores the stack pointer in *from_sp, and pops the
// same from to_sp. A new fiber's stack is built to "return" into its entry function.
extern "C" void emu_switch_stack(void** from_sp, void* to_sp);
asm(R"(
  .pushsection .text
  .p2align 4
  .globl emu_switch_stack
  .hidden emu_switch_stack
  .type emu_switch_stack, @function
emu_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch_stack, .-emu_switch_stack
  .popsection
)");
#endif

namespace emu {
namespace {

#if EMU_FAST_SWITCH

struct Context {
  void* sp = nullptr;
};

void context_init(Context& c, char* stack, size_t size, void (*entry)()) {
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t{15};
  void** slot = reinterpret_cast<void**>(top - 16);  // entry's return address: 16-byte aligned
  slot[1] = nullptr;                                 // where entry would return to: never
  slot[0] = reinterpret_cast<void*>(entry);
  uint32_t control[2] = {0, 0};
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(control[0]), "=m"(control[1]));
  void** sp = slot - 7;  // six registers (zero) and the control words
  std::memset(sp, 0, 7 * sizeof(void*));
  std::memcpy(sp, control, sizeof control);
  c.sp = sp;
}

void context_switch(Context& from, Context& to) {
  emu_switch_stack(&from.sp, to.sp);
}
#else
struct Context {
  ucontext_t uc;
};

void context_init(Context& c, char* stack, size_t size, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}

void context_switch(Context& from, Context& to) {
  swapcontext(&from.uc, &to.uc);
}
#endif

enum class State { kReady, kBarrier, kShuffle, kDone };

struct ShufflePost {
  uint64_t bits;
  unsigned mask;
  const char* file;
  int line;
};

struct Fiber {
  Context context;
  Coord idx{0, 0, 0};
  int tid = 0;
  State state = State::kReady;
  const char* barrier_file = nullptr;
  int barrier_line = 0;
  // The k-th shuffle of a lane pairs with the k-th shuffle of its partner: lanes of a warp that
  // run the same code post their values in the same sequence.
  std::vector<ShufflePost> posts;
  void* asan_fake_stack = nullptr;
};

constexpr size_t kStackBytes = 256 * 1024;
constexpr unsigned kMaxThreads = 1024;
constexpr size_t kMaxStaticShared = 48 * 1024;

struct Scheduler {
  Context main_context;
  std::vector<Fiber> fibers;
  int current = -1;
  unsigned n_threads = 0;
  unsigned arrived = 0;       // threads at the barrier
  uint64_t generation = 0;    // barriers released so far
  uint64_t events = 0;        // arrivals, posts and exits: progress of the block
  uint64_t block_serial = 0;  // blocks run so far, for the shared-memory poisoning
  std::function<void()> body;
  char* stacks = nullptr;  // kMaxThreads stacks, each above a guard page
  size_t stack_stride = 0;
  struct SharedArray {
    void* address;
    size_t bytes;
  };
  std::vector<SharedArray> block_shared;           // arrays this block has declared
  std::vector<std::pair<void*, uint64_t>> poison;  // array -> block that last poisoned it
  Order order = Order::kForward;
  std::mt19937 rng{1};
  std::vector<LaunchRecord> records;
  const void* asan_main_bottom = nullptr;
  size_t asan_main_size = 0;
  void* asan_main_fake_stack = nullptr;
};

Scheduler& sched() {
  static Scheduler s;
  return s;
}

char* stack_of(unsigned t) {
  Scheduler& s = sched();
  if (s.stacks == nullptr) {
    // A guard page below every stack: an overflowing kernel faults instead of corrupting the next.
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    s.stack_stride = kStackBytes + page;
    void* p = mmap(nullptr, s.stack_stride * kMaxThreads, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) die("cannot map the fiber stacks");
    s.stacks = static_cast<char*>(p);
    for (unsigned i = 0; i < kMaxThreads; i++)
      mprotect(s.stacks + i * s.stack_stride, page, PROT_NONE);
  }
  return s.stacks + t * s.stack_stride + (s.stack_stride - kStackBytes);
}

// Into the fiber of thread t, back when it blocks or exits.
void resume(unsigned t) {
  Scheduler& s = sched();
  Fiber& f = s.fibers[t];
  s.current = static_cast<int>(t);
  g_thread_idx = f.idx;
#if EMU_ASAN
  __sanitizer_start_switch_fiber(&s.asan_main_fake_stack, stack_of(t), kStackBytes);
#endif
  context_switch(s.main_context, f.context);
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(s.asan_main_fake_stack, nullptr, nullptr);
#endif
  s.current = -1;
}

// From the running fiber back to the scheduler.
void yield() {
  Scheduler& s = sched();
  Fiber& f = s.fibers[s.current];
#if EMU_ASAN
  __sanitizer_start_switch_fiber(f.state == State::kDone ? nullptr : &f.asan_fake_stack,
                                 s.asan_main_bottom, s.asan_main_size);
#endif
  context_switch(f.context, s.main_context);
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(f.asan_fake_stack, nullptr, nullptr);
#endif
}

void fiber_entry() {
  Scheduler& s = sched();
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &s.asan_main_bottom, &s.asan_main_size);
#endif
  s.body();
  s.fibers[s.current].state = State::kDone;
  s.events++;
  yield();
  die("a finished thread was resumed");
}

std::string where() {
  const Scheduler& s = sched();
  std::string w = "block (" + std::to_string(g_block_idx.x) + "," + std::to_string(g_block_idx.y) +
                  "," + std::to_string(g_block_idx.z) + ")";
  if (s.current >= 0) w += " thread " + std::to_string(s.fibers[s.current].tid);
  return w;
}

bool same_place(const char* file_a, int line_a, const char* file_b, int line_b) {
  return line_a == line_b && (file_a == file_b || std::strcmp(file_a, file_b) == 0);
}

// A kernel that steps past a buffer or shared array hits an inaccessible page: say which thread
// did, then let the fault kill the process. On a stack of its own, so a fiber's stack overflow
// reports too.
void on_fault(int, siginfo_t* info, void*) {
  if (g_in_kernel) {
    char line[256];
    const int n = std::snprintf(line, sizeof line,
                                "EMULATED CUDA ERROR (%s): invalid access to address %p (past the "
                                "end of a buffer or shared array, or a stack overflow)\n",
                                where().c_str(), info->si_addr);
    if (write(STDERR_FILENO, line, static_cast<size_t>(n)) < 0) _exit(1);
  }
}

void install_fault_handler() {
#if !EMU_ASAN  // ASan reports faults itself
  static bool installed = false;
  if (installed) return;
  installed = true;
  static std::vector<char> alternate_stack(64 * 1024);
  stack_t ss{};
  ss.ss_sp = alternate_stack.data();
  ss.ss_size = alternate_stack.size();
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;  // the retried access then kills
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
#endif
}

void run_block() {
  Scheduler& s = sched();
  s.block_serial++;
  s.block_shared.clear();
  s.arrived = 0;
  const Coord dim = g_block_dim;
  for (unsigned t = 0; t < s.n_threads; t++) {
    Fiber& f = s.fibers[t];
    f.tid = static_cast<int>(t);
    f.idx = Coord{t % dim.x, (t / dim.x) % dim.y, t / (dim.x * dim.y)};
    f.state = State::kReady;
    f.posts.clear();
#if EMU_ASAN
    // The previous fiber on this stack never returned: its frames' redzones are still marked.
    ASAN_UNPOISON_MEMORY_REGION(stack_of(t), kStackBytes);
#endif
    context_init(f.context, stack_of(t), kStackBytes, fiber_entry);
  }
  std::vector<unsigned> order(s.n_threads);
  for (unsigned t = 0; t < s.n_threads; t++) order[t] = t;
  if (s.order == Order::kReverse) std::reverse(order.begin(), order.end());
  for (;;) {
    if (s.order == Order::kRandom) std::shuffle(order.begin(), order.end(), s.rng);
    const uint64_t events = s.events;
    unsigned done = 0;
    for (unsigned t : order) {
      const State state = s.fibers[t].state;
      if (state == State::kDone) {
        done++;
      } else if (state != State::kBarrier) {
        resume(t);
      }
    }
    if (done == s.n_threads) break;
    if (s.events == events) {
      unsigned at_barrier = 0, in_shuffle = 0;
      for (const Fiber& f : s.fibers) {
        at_barrier += f.state == State::kBarrier;
        in_shuffle += f.state == State::kShuffle;
      }
      die("deadlock: " + std::to_string(at_barrier) + " threads at a __syncthreads, " +
          std::to_string(in_shuffle) + " in a shuffle, " + std::to_string(done) +
          " exited (a barrier not reached by every thread, or a shuffle partner missing)");
    }
  }
}

}  // namespace

void die(const std::string& message) {
  std::fprintf(stderr, "EMULATED CUDA ERROR (%s): %s\n", g_in_kernel ? where().c_str() : "host",
               message.c_str());
  std::fflush(stderr);
  std::abort();
}

void set_order(Order order, uint32_t seed) {
  sched().order = order;
  sched().rng.seed(seed);
}

void launch(dim3 grid, dim3 block, std::function<void()> body) {
  Scheduler& s = sched();
  if (g_in_kernel) die("a kernel launched a kernel");
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0)
    die("launch with an empty grid or block (cudaErrorInvalidConfiguration)");
  if (grid.x > 2147483647u || grid.y > 65535u || grid.z > 65535u)
    die("grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," +
        std::to_string(grid.z) + ") over CUDA's limits");
  if (threads > kMaxThreads || block.z > 64)
    die("block (" + std::to_string(block.x) + "," + std::to_string(block.y) + "," +
        std::to_string(block.z) + ") over CUDA's limits");
  install_fault_handler();
  s.body = std::move(body);
  s.n_threads = static_cast<unsigned>(threads);
  s.fibers.resize(std::max<size_t>(s.fibers.size(), s.n_threads));
  g_block_dim = Coord{block.x, block.y, block.z};
  g_grid_dim = Coord{grid.x, grid.y, grid.z};
  g_in_kernel = true;
  const uint64_t n_blocks = uint64_t{grid.x} * grid.y * grid.z;
  std::vector<uint64_t> block_order(n_blocks);
  for (uint64_t b = 0; b < n_blocks; b++) block_order[b] = b;
  if (s.order == Order::kReverse) std::reverse(block_order.begin(), block_order.end());
  if (s.order == Order::kRandom) std::shuffle(block_order.begin(), block_order.end(), s.rng);
  for (uint64_t b : block_order) {
    g_block_idx =
        Coord{static_cast<unsigned>(b % grid.x), static_cast<unsigned>(b / grid.x % grid.y),
              static_cast<unsigned>(b / (uint64_t{grid.x} * grid.y))};
    run_block();
  }
  g_in_kernel = false;
  s.body = nullptr;
  s.records.push_back(LaunchRecord{grid, block});
}

void syncthreads(const char* file, int line) {
  Scheduler& s = sched();
  Fiber& me = s.fibers[s.current];
  me.state = State::kBarrier;
  me.barrier_file = file;
  me.barrier_line = line;
  s.events++;
  if (++s.arrived < s.n_threads) {
    const uint64_t generation = s.generation;
    while (s.generation == generation) yield();
    return;
  }
  // The last thread to arrive checks that all wait at this same barrier, then releases them.
  for (unsigned t = 0; t < s.n_threads; t++) {
    Fiber& f = s.fibers[t];
    if (!same_place(f.barrier_file, f.barrier_line, file, line))
      die("threads " + std::to_string(t) + " and " + std::to_string(me.tid) +
          " wait at different __syncthreads (lines " + std::to_string(f.barrier_line) + " and " +
          std::to_string(line) + ")");
    f.state = State::kReady;
  }
  s.arrived = 0;
  s.generation++;
}

uint64_t shfl_xor_bits(unsigned mask, uint64_t bits, int lane_mask, const char* file, int line) {
  Scheduler& s = sched();
  const int me = s.current;
  const int lane = s.fibers[me].tid & 31;
  const int partner_lane = lane ^ lane_mask;
  if (!(mask >> lane & 1u)) die("a lane outside its shuffle's mask shuffles");
  if (lane_mask < 0 || partner_lane > 31 || !(mask >> partner_lane & 1u))
    die("shuffle partner lane " + std::to_string(partner_lane) + " outside the mask");
  const int partner = (s.fibers[me].tid & ~31) + partner_lane;
  if (partner >= static_cast<int>(s.n_threads)) die("shuffle partner past the end of the block");
  const size_t k = s.fibers[me].posts.size();
  s.fibers[me].posts.push_back(ShufflePost{bits, mask, file, line});
  s.events++;
  while (s.fibers[partner].posts.size() <= k) {
    if (s.fibers[partner].state == State::kDone) die("shuffle partner has exited");
    s.fibers[me].state = State::kShuffle;
    yield();
  }
  s.fibers[me].state = State::kReady;
  const ShufflePost& p = s.fibers[partner].posts[k];
  if (p.mask != mask) die("shuffle partners pass different masks");
  if (!same_place(p.file, p.line, file, line))
    die("shuffle partners at different shuffles (lines " + std::to_string(p.line) + " and " +
        std::to_string(line) + ")");
  return p.bits;
}

void shared_array(void* array, size_t bytes) {
  Scheduler& s = sched();
  bool declared = false;
  for (const auto& a : s.block_shared) declared |= a.address == array;
  if (!declared) {
    s.block_shared.push_back({array, bytes});
    size_t total = 0;
    for (const auto& a : s.block_shared) total += a.bytes;
    if (total > kMaxStaticShared)
      die("static shared memory of " + std::to_string(total) + " bytes, over CUDA's 48 KB");
  }
  for (auto& [address, serial] : s.poison)
    if (address == array) {
      if (serial != s.block_serial) {
        serial = s.block_serial;
        std::memset(array, 0xff, bytes);
      }
      return;
    }
  s.poison.emplace_back(array, s.block_serial);
  std::memset(array, 0xff, bytes);
}

void* guarded_allocation(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t data_pages = (bytes + page - 1) / page;
  void* p = mmap(nullptr, (data_pages + 1) * page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) die("cannot map " + std::to_string(bytes) + " bytes");
  char* guard = static_cast<char*>(p) + data_pages * page;
  mprotect(guard, page, PROT_NONE);
  return guard - bytes;
}

const std::vector<LaunchRecord>& launches() {
  return sched().records;
}

void clear_launches() {
  sched().records.clear();
}

}  // namespace emu
