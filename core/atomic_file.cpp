#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace ember {

namespace {

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string errno_text() { return std::strerror(errno); }

// The file a write to `path` replaces: `path` itself, or the final target of the symlink it
// is (which need not exist yet). Errors start with `what`.
std::string resolve_target(const std::string& path, const std::string& what) {
  EMBER_CHECK(!path.empty(), what, ": expected a file name, got an empty path");
  namespace fs = std::filesystem;
  fs::path target = path;
  std::error_code ec;
  for (int hops = 0; fs::is_symlink(target, ec); ++hops) {  // a dangling link's target is created
    EMBER_CHECK(hops < 40, what, ": too many levels of symlinks in '", path, "'");
    const fs::path next = fs::read_symlink(target, ec);
    EMBER_CHECK(!ec, what, ": cannot read the symlink '", target.string(), "': ", ec.message());
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  return target.string();
}

// An existing target that is not a regular file, or a missing or read-only directory, is an Error.
void check_target(const std::string& path, const std::string& target, const std::string& what) {
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    EMBER_CHECK(S_ISREG(st.st_mode), what, ": '", path, "' exists and is not a regular file (",
                S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a special file",
                "); refusing to replace it");
  } else {
    EMBER_CHECK(errno == ENOENT, what, ": cannot inspect '", path, "': ", errno_text());
  }
  const std::string dir = directory_of(target);
  EMBER_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), what, ": cannot write '", path,
              "': the directory '", dir, "' does not exist");
  EMBER_CHECK(::access(dir.c_str(), W_OK) == 0, what, ": cannot write '", path, "': the directory '", dir,
              "' is not writable: ", errno_text());
}

}  // namespace

void check_output_path(const std::string& path, const std::string& what) {
  check_target(path, resolve_target(path, what), what);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  const std::string what = "write '" + path_ + "'";
  target_path_ = resolve_target(path_, what);
  check_target(path_, target_path_, what);
  static std::atomic<unsigned> counter{0};
  // Unique per process and per writer; O_EXCL guards against anything left over.
  temp_path_ = target_path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  EMBER_CHECK(fd_ >= 0, "write '", path_, "': cannot create the temporary file '", temp_path_, "': ", errno_text());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  EMBER_CHECK(fd_ >= 0 && !committed_, "write '", path_, "': the file is already committed");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    EMBER_CHECK(n > 0, "write '", path_, "': writing '", temp_path_, "' failed: ", errno_text());
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  EMBER_CHECK(fd_ >= 0 && !committed_, "write '", path_, "': the file is already committed");
  EMBER_CHECK(::fsync(fd_) == 0, "write '", path_, "': fsync failed: ", errno_text());
  const int rc = ::close(fd_);
  fd_ = -1;
  EMBER_CHECK(rc == 0, "write '", path_, "': close failed: ", errno_text());
  EMBER_CHECK(::rename(temp_path_.c_str(), target_path_.c_str()) == 0,
              "write '", path_, "': renaming '", temp_path_, "' over it failed: ", errno_text());
  committed_ = true;
  const int dir = ::open(directory_of(target_path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {  // best effort: some file systems refuse fsync on directories
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace ember
