// Writes a file so that readers see either the old content or the complete new content,
// never a torn file, even if the process or the machine dies in the middle.
//
//   AtomicFile out("model.safetensors");   // creates a temporary file beside the target
//   out.write(header.data(), header.size());
//   out.write(weights, n_bytes);
//   out.commit();                           // fsync, rename over the target, fsync the directory
//   // destroyed without commit(): the temporary file is removed and the target is untouched
//
// Note [Atomic replace]: rename(2) within one directory is atomic on POSIX file systems, so
// the temporary file lives in the target's directory. The data is fsync'ed before the
// rename (otherwise a crash can leave the new name pointing at unwritten blocks) and the
// directory after it (otherwise the rename itself may be lost).
//
// Note [Replace targets]: the target, if it exists, must be a regular file: a device node,
// FIFO or directory is refused (replacing /dev/null with a regular file loses data). A
// symlink is followed: its final target is replaced atomically and the link stays a link.
#pragma once

#include <cstddef>
#include <string>

namespace ember {

// Checks, before any work, that `path` can be written by AtomicFile: a non-empty path whose
// (symlink-resolved) target is absent or a regular file, in an existing writable directory.
// The Error names `what` (the flag or the caller) and the problem.
void check_output_path(const std::string& path, const std::string& what);

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void commit();
  const std::string& path() const { return path_; }

 private:
  std::string path_;         // as given, for messages
  std::string target_path_;  // symlinks resolved: the file rename(2) replaces
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace ember
