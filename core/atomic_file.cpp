#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

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

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  EMBER_CHECK(!path_.empty(), "write file: expected a file name, got an empty path");
  static std::atomic<unsigned> counter{0};
  // Unique per process and per writer; O_EXCL guards against anything left over.
  temp_path_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
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
  EMBER_CHECK(::rename(temp_path_.c_str(), path_.c_str()) == 0,
              "write '", path_, "': renaming '", temp_path_, "' over it failed: ", errno_text());
  committed_ = true;
  const int dir = ::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {  // best effort: some file systems refuse fsync on directories
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace ember
