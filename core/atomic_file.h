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
#pragma once

#include <cstddef>
#include <string>

namespace ember {

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
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace ember
