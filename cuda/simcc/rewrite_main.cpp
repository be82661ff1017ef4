// ember-simcc-rewrite IN.cu OUT.cpp: the source transformation of rewrite.h as a command, run
// by the ember-simcc script before the host compiler. Errors name the file and line.
#include <fstream>
#include <iostream>
#include <sstream>

#include "cuda/simcc/rewrite.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: ember-simcc-rewrite IN.cu OUT.cpp (expected 2 arguments, got " << argc - 1 << ")\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "ember-simcc: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::ostringstream source;
  source << in.rdbuf();
  try {
    const std::string out = ember::simcc::rewrite_cuda(source.str(), argv[1]);
    std::ofstream file(argv[2], std::ios::binary);
    file << out;
    if (!file.flush()) {
      std::cerr << "ember-simcc: cannot write " << argv[2] << "\n";
      return 1;
    }
  } catch (const ember::simcc::RewriteError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
