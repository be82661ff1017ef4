// cuda/runtime.h for a build without a CUDA backend (EMBER_CUDA=OFF, or AUTO without nvcc):
// the device is unavailable and every other call says so.
#include "cuda/runtime.h"

#include "core/error.h"

namespace ember::cuda {
namespace {
[[noreturn]] void unavailable(const char* what) {
  EMBER_FAIL(what, ": this build of ember has no CUDA backend (configure with EMBER_CUDA=AUTO or ON ",
             "where nvcc is installed, or EMBER_CUDA=SIM for the CPU simulator)");
}
}  // namespace

namespace detail {
void throw_cuda_error(int status, const char* call, const char* file, int line) {
  throw Error(ember::detail::concat(call, " failed at ", file, ":", line, ": CUDA error ", status), file, line);
}
}  // namespace detail

std::string_view backend_name() { return "none"; }
bool is_available() { return false; }
bool init() { return false; }
int device_count() { return 0; }
DeviceProperties device_properties(int) { unavailable("cuda::device_properties"); }
void set_device(int) { unavailable("cuda::set_device"); }
int current_device() { unavailable("cuda::current_device"); }
Stream create_stream() { unavailable("cuda::create_stream"); }
void destroy_stream(Stream) { unavailable("cuda::destroy_stream"); }
void synchronize(Stream) { unavailable("cuda::synchronize"); }
void synchronize() { unavailable("cuda::synchronize"); }
Event::Event() { unavailable("cuda::Event"); }
Event::~Event() = default;
Event::Event(Event&& other) noexcept : handle_(other.handle_) {}
Event& Event::operator=(Event&&) noexcept { return *this; }
void Event::record(Stream) { unavailable("cuda::Event::record"); }
void Event::synchronize() const { unavailable("cuda::Event::synchronize"); }
void Event::wait_on(Stream) const { unavailable("cuda::Event::wait_on"); }
float Event::elapsed_ms_since(const Event&) const { unavailable("cuda::Event::elapsed_ms_since"); }
void* malloc_device(size_t) { unavailable("cuda::malloc_device"); }
void free_device(void*) { unavailable("cuda::free_device"); }
void memcpy(void*, const void*, size_t, CopyKind) { unavailable("cuda::memcpy"); }
void memcpy_async(void*, const void*, size_t, CopyKind, Stream) { unavailable("cuda::memcpy_async"); }
void memset(void*, int, size_t) { unavailable("cuda::memset"); }
void memset_async(void*, int, size_t, Stream) { unavailable("cuda::memset_async"); }
std::unique_ptr<RawAllocator> make_raw_allocator() { unavailable("cuda::make_raw_allocator"); }
}  // namespace ember::cuda
