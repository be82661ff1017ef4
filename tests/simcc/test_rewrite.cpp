// ember-simcc's source transformation (cuda/simcc/rewrite.h) on tricky inputs: what must be
// rewritten, what must be left alone (strings, comments, shifts, templates closing with >>),
// and malformed launches that must fail naming the line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "cuda/simcc/rewrite.h"

using ember::simcc::rewrite_cuda;
using ember::simcc::RewriteError;

namespace {
// The rewritten text without the leading #line directive.
std::string body(const std::string& source) {
  const std::string out = rewrite_cuda(source, "t.cu");
  REQUIRE(out.rfind("#line 1 \"t.cu\"\n", 0) == 0);
  return out.substr(out.find('\n') + 1);
}
std::string launch_of(const std::string& callee, const std::string& config) {
  return "::ember::sim::dropin::make_launch(::ember::sim::dropin::configure(" + config + "), \"" + callee +
         "\", EMBER_SIM_KERNEL_BODY(" + callee + "), EMBER_SIM_KERNEL_ADDRESS(" + callee + "))";
}
int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }
std::string error_of(const std::string& source) {
  try {
    rewrite_cuda(source, "bad.cu");
  } catch (const RewriteError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("rewrite: plain and four-part launches") {
  CHECK(body("k<<<g, b>>>(x, y);") == launch_of("k", "g, b") + "(x, y);");
  CHECK(body("k<<<g, b, smem, stream>>>(x);") == launch_of("k", "g, b, smem, stream") + "(x);");
  CHECK(body("k <<< 1 , 2 >>> ();") == launch_of("k", " 1 , 2 ") + " ();");
}

TEST_CASE("rewrite: a NULL argument becomes nullptr, NULL inside an expression stays") {
  // Note [NULL kernel argument] in cuda/simcc/rewrite.cpp.
  CHECK(body("k<<<g, b>>>(x, NULL, y);") == launch_of("k", "g, b") + "(x, nullptr, y);");
  CHECK(body("k<<<g, b>>>( NULL );") == launch_of("k", "g, b") + "( nullptr );");
  CHECK(body("k<<<g, b>>>(NULL,NULL);") == launch_of("k", "g, b") + "(nullptr,nullptr);");
  CHECK(body("k<<<g, b>>>(p == NULL ? a : b, f(NULL), \"NULL\", NULLABLE);") ==
        launch_of("k", "g, b") + "(p == NULL ? a : b, f(NULL), \"NULL\", NULLABLE);");
  CHECK(body("f(NULL); k<<<1, 1>>>(/* NULL */ x);") == "f(NULL); " + launch_of("k", "1, 1") + "(/* NULL */ x);");
}

TEST_CASE("rewrite: templated and qualified kernels") {
  CHECK(body("k<float, 4><<<1, 2>>>(p);") == launch_of("k<float, 4>", "1, 2") + "(p);");
  CHECK(body("ns::k<A<B<int>>, (N > 2)><<<1, 2>>>(p);") == launch_of("ns::k<A<B<int>>, (N > 2)>", "1, 2") + "(p);");
  CHECK(body("a::template k<T><<<1, 1>>>();") == launch_of("a::template k<T>", "1, 1") + "();");
  CHECK(body("::top<<<1, 1>>>();") == launch_of("::top", "1, 1") + "();");
}

TEST_CASE("rewrite: nested parentheses and templates in the configuration and arguments") {
  CHECK(body("k<<<dim3(f(a, b), 2), std::max<int>(1, 2), sizeof(T), s>>>(g(h(1), 2), v[i]);") ==
        launch_of("k", "dim3(f(a, b), 2), std::max<int>(1, 2), sizeof(T), s") + "(g(h(1), 2), v[i]);");
  // A configuration that ends with a template argument list: the last three `>` close it.
  CHECK(body("k<<<1, N<T>>>>(x);") == launch_of("k", "1, N<T>") + "(x);");
}

TEST_CASE("rewrite: a launch inside a macro's argument, and in a #define") {
  CHECK(body("CHECK((k<T><<<1, 2>>>(x)));") == "CHECK((" + launch_of("k<T>", "1, 2") + "(x)));");
  CHECK(body("#define RUN(n) kern<<<n, 32>>>(n)\n") == "#define RUN(n) " + launch_of("kern", "n, 32") + "(n)\n");
}

TEST_CASE("rewrite: strings, comments, shifts and >> are left alone") {
  const std::string untouched =
      "const char* s = \"k<<<1, 1>>>(x)\";  // k<<<2, 2>>>()\n"
      "/* k<<<3, 3>>>() */ int a = b << 2, c = d >> 3;\n"
      "std::vector<std::vector<int>> v; char q = '<'; auto r = R\"x(<<<)x\";\n"
      "long big = 1'000'000; int m = x<<y;\n";
  CHECK(body(untouched) == untouched);
}

TEST_CASE("rewrite: line numbers are kept") {
  const std::string source = "int a;\nk<<<grid,\n  block>>>(x,\n  y);\nint b;\n";
  const std::string out = body(source);
  CHECK(lines(out) == lines(source));
  CHECK(out.substr(out.rfind('\n', out.size() - 2) + 1) == "int b;\n");
}

TEST_CASE("rewrite: extern __shared__ inside a kernel becomes a pointer to the block's buffer") {
  CHECK(body("__global__ void k() { extern __shared__ float s[]; s[0] = 1; }") ==
        "__global__ void k() { float* s = static_cast<float*>(::ember::sim::dynamic_shared_memory()); s[0] = 1; }");
  CHECK(body("void k() {\n  extern __shared__ __align__(16) unsigned char raw[];\n}") ==
        "void k() {\n  unsigned char* raw = static_cast<unsigned char*>(::ember::sim::dynamic_shared_memory());\n}");
}

TEST_CASE("rewrite: extern __shared__ at file scope becomes a macro and keeps the line") {
  const std::string out = body("int a;\nnamespace n { extern __shared__ float s[]; }\nint b;\n");
  CHECK(out.find("#define s (static_cast<float*>(::ember::sim::dynamic_shared_memory()))\n#line 2\n") != std::string::npos);
  CHECK(out.find("extern") == std::string::npos);
}

TEST_CASE("rewrite: malformed input fails naming the file and line") {
  CHECK(error_of("int a;\nk<<<1, 2(x);\n") ==
        "bad.cu:2: unterminated kernel launch: expected `>>>` closing the `<<<` opened here, got `<<<1, 2(x);`");
  CHECK(error_of("int a;\n\nk<<<1, 2>>>;\n") ==
        "bad.cu:3: kernel launch of k: expected `(` and the kernel's arguments after `>>>`, got `;`");
  CHECK(error_of("x = (k)<<<1, 1>>>();").rfind("bad.cu:1: kernel launch: expected a kernel name before `<<<`", 0) == 0);
  CHECK(error_of("k<<<1, 1").rfind("bad.cu:1: unterminated kernel launch", 0) == 0);
  CHECK(error_of("a;\n/* open\n") == "bad.cu:2: unterminated comment: expected `*/`, got the end of the file");
  CHECK(error_of("s = \"abc\n") == "bad.cu:1: unterminated string literal: expected a closing \" on the same line");
  CHECK(error_of("void f() {\n extern __shared__ float s[4];\n}").rfind(
            "bad.cu:2: expected `extern __shared__ T name[];` (an array of unknown size), got `extern __shared__ float s[4];`", 0) == 0);
}

TEST_CASE("rewrite: the #line directive quotes the file name") {
  CHECK(rewrite_cuda("int a;\n", "dir\\with \"quote\".cu") == "#line 1 \"dir\\\\with \\\"quote\\\".cu\"\nint a;\n");
}
