// ember-simcc's source transformation (see rewrite.h): a scanner that knows where comments and
// literals are, finds `<<<` launches and `extern __shared__` declarations in code, and rewrites
// them in place.
#include "cuda/simcc/rewrite.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace ember::simcc {
namespace {

bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Marks every character that is code (true) or inside a comment, string or character literal
// (false). Note [digit separators]: `1'000` is a number, not a character literal; a quote is
// a separator when the token it ends started with a digit.
std::vector<bool> code_mask(std::string_view s, const std::string& file) {
  std::vector<bool> code(s.size(), true);
  auto line_of = [&](size_t pos) { return 1 + int(std::count(s.begin(), s.begin() + pos, '\n')); };
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    const char next = i + 1 < s.size() ? s[i + 1] : '\0';
    size_t end = i;
    if (c == '/' && next == '/') {
      end = s.find('\n', i);
      if (end == std::string_view::npos) end = s.size();
    } else if (c == '/' && next == '*') {
      end = s.find("*/", i + 2);
      if (end == std::string_view::npos) throw RewriteError(file, line_of(i), "unterminated comment: expected `*/`, got the end of the file");
      end += 2;
    } else if (c == 'R' && next == '"' && (i == 0 || !is_ident_char(s[i - 1]) || s[i - 1] == '8' || s[i - 1] == 'u' ||
                                           s[i - 1] == 'U' || s[i - 1] == 'L')) {
      const size_t open = s.find('(', i + 2);
      if (open == std::string_view::npos) throw RewriteError(file, line_of(i), "unterminated raw string literal");
      const std::string close = ")" + std::string(s.substr(i + 2, open - i - 2)) + "\"";
      end = s.find(close, open);
      if (end == std::string_view::npos)
        throw RewriteError(file, line_of(i), "unterminated raw string literal: expected `" + close + "`, got the end of the file");
      end += close.size();
    } else if (c == '"' || c == '\'') {
      if (c == '\'' && i > 0 && is_ident_char(s[i - 1])) {
        size_t start = i;
        while (start > 0 && (is_ident_char(s[start - 1]) || s[start - 1] == '\'')) --start;
        if (std::isdigit(static_cast<unsigned char>(s[start]))) {  // Note [digit separators]
          ++i;
          continue;
        }
      }
      end = i + 1;
      while (end < s.size() && s[end] != c && s[end] != '\n') end += s[end] == '\\' ? 2 : 1;
      if (end >= s.size() || s[end] != c)
        throw RewriteError(file, line_of(i), std::string("unterminated ") + (c == '"' ? "string" : "character") +
                                                 " literal: expected a closing " + c + " on the same line");
      ++end;
    }
    if (end == i) {
      ++i;
      continue;
    }
    std::fill(code.begin() + i, code.begin() + end, false);
    i = end;
  }
  return code;
}

class Rewriter {
 public:
  Rewriter(std::string_view source, std::string file) : s_(source), file_(std::move(file)), code_(code_mask(s_, file_)) {}

  std::string run() {
    std::string quoted;  // the file name as a string literal
    for (char c : file_) {
      if (c == '\\' || c == '"') quoted.push_back('\\');
      quoted.push_back(c);
    }
    out_ = "#line 1 \"" + quoted + "\"\n";
    size_t i = 0;
    while (i < s_.size()) {
      if (code_[i] && s_.compare(i, 3, "<<<") == 0) {
        i = rewrite_launch(i);
      } else if (!null_arguments_.empty() && null_arguments_.front() == i) {
        null_arguments_.erase(null_arguments_.begin());
        out_ += "nullptr";
        i += 4;
      } else if (code_[i] && word_at(i, "extern")) {
        const size_t after = skip_space(i + 6);
        if (word_at(after, "__shared__")) {
          i = rewrite_extern_shared(i, after + 10);
          continue;
        }
        out_.append(s_.substr(i, 6));
        i += 6;
      } else {
        if (code_[i] && s_[i] == '{') braces_.push_back(namespace_brace(i));
        if (code_[i] && s_[i] == '}' && !braces_.empty()) braces_.pop_back();
        if (code_[i] && (s_[i] == ';' || s_[i] == '{' || s_[i] == '}')) statement_start_ = i + 1;
        out_.push_back(s_[i++]);
      }
    }
    return out_;
  }

 private:
  int line_of(size_t pos) const { return 1 + int(std::count(s_.begin(), s_.begin() + pos, '\n')); }
  [[noreturn]] void fail(size_t pos, const std::string& message) const { throw RewriteError(file_, line_of(pos), message); }

  bool word_at(size_t i, std::string_view word) const {
    return s_.compare(i, word.size(), word) == 0 && (i == 0 || !is_ident_char(s_[i - 1])) &&
           (i + word.size() >= s_.size() || !is_ident_char(s_[i + word.size()])) && code_[i];
  }
  // The next position at or after i that is code and not white space (comments are skipped).
  size_t skip_space(size_t i) const {
    while (i < s_.size() && (!code_[i] || std::isspace(static_cast<unsigned char>(s_[i])))) ++i;
    return i;
  }
  size_t skip_space_back(size_t i) const {  // i: one past; returns one past the previous code char
    while (i > limit_ && (!code_[i - 1] || std::isspace(static_cast<unsigned char>(s_[i - 1])))) --i;
    return i;
  }
  std::string excerpt(size_t begin, size_t end) const {
    std::string text(s_.substr(begin, std::min(end, begin + 60) - begin));
    std::replace(text.begin(), text.end(), '\n', ' ');
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return text + (end > begin + 60 ? "..." : "");
  }

  // Whether the `{` at i opens a namespace or an extern "C" block (rather than a function,
  // class or statement block): what decides how `extern __shared__` is rewritten.
  bool namespace_brace(size_t i) const {
    const std::string_view head = s_.substr(statement_start_, i - statement_start_);
    const size_t first = head.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return false;
    const std::string_view h = head.substr(first);
    return h.starts_with("namespace") || h.starts_with("inline namespace") || (h.starts_with("extern") && h.find('"') != h.npos);
  }

  // Start of the kernel expression that ends just before `<<<` at p: identifiers, `::`,
  // `template` and template argument lists, scanned backwards.
  size_t callee_start(size_t p) const {
    size_t i = skip_space_back(p);
    size_t start = std::string_view::npos;
    while (true) {
      if (i > limit_ && s_[i - 1] == '>') {  // template arguments: balance <> and ()
        int angle = 0, paren = 0;
        size_t j = i;
        while (j > limit_) {
          const char c = s_[--j];
          if (!code_[j]) continue;
          if (c == ')' || c == ']') ++paren;
          else if (c == '(' || c == '[') --paren;
          else if (paren == 0 && c == '>') ++angle;
          else if (paren == 0 && c == '<' && --angle == 0) break;
          if (c == ';' || c == '{' || c == '}') fail(p, "kernel launch: expected the kernel's template arguments `<...>` before `<<<`, got `" + excerpt(j, p) + "`");
        }
        if (angle != 0) fail(p, "kernel launch: expected the kernel's template arguments `<...>` before `<<<`, got `" + excerpt(j, p) + "`");
        i = skip_space_back(j);
      }
      size_t j = i;
      while (j > limit_ && is_ident_char(s_[j - 1]) && code_[j - 1]) --j;
      if (j == i || std::isdigit(static_cast<unsigned char>(s_[j]))) {
        if (start != std::string_view::npos) return start;  // `a::<<<` cannot happen; be safe
        fail(p, "kernel launch: expected a kernel name before `<<<`, got `" + excerpt(skip_space_back(p) > 20 ? skip_space_back(p) - 20 : 0, p) + "`");
      }
      start = j;
      size_t k = skip_space_back(j);
      if (k >= limit_ + 8 && s_.compare(k - 8, 8, "template") == 0 && (k - 8 == 0 || !is_ident_char(s_[k - 9]))) {
        const size_t before = skip_space_back(k - 8);
        if (before >= limit_ + 2 && s_.compare(before - 2, 2, "::") == 0) k = before;
      }
      if (k >= limit_ + 2 && s_.compare(k - 2, 2, "::") == 0) {
        start = k - 2;
        i = skip_space_back(k - 2);
        if (i > limit_ && (s_[i - 1] == '>' || is_ident_char(s_[i - 1]))) continue;
      }
      return start;
    }
  }

  // Position of the `>>>` closing the configuration opened at p.
  size_t config_end(size_t p) const {
    int depth = 0;
    for (size_t i = p + 3; i < s_.size(); ++i) {
      if (!code_[i]) continue;
      const char c = s_[i];
      if (c == '(' || c == '[' || c == '{') ++depth;
      else if (c == ')' || c == ']' || c == '}') {
        if (--depth < 0) break;
      } else if (depth == 0 && s_.compare(i, 3, ">>>") == 0) {
        while (i + 3 < s_.size() && s_[i + 3] == '>') ++i;  // `s<int>>>>`: the last three close
        return i;
      } else if (depth == 0 && c == ';') break;
    }
    const size_t stop = s_.find_first_of(";\n", p + 3);
    fail(p, "unterminated kernel launch: expected `>>>` closing the `<<<` opened here, got `" +
                excerpt(p, stop == std::string_view::npos ? s_.size() : stop + 1) + "`");
  }

  static std::string collapse(std::string_view text) {  // white space to single spaces
    std::string r;
    for (char c : text) {
      if (std::isspace(static_cast<unsigned char>(c)) || c == '\\') {
        if (!r.empty() && r.back() != ' ') r.push_back(' ');
      } else {
        r.push_back(c);
      }
    }
    while (!r.empty() && r.back() == ' ') r.pop_back();
    return r;
  }

  size_t rewrite_launch(size_t p) {
    const size_t start = callee_start(p);
    const std::string callee = collapse(s_.substr(start, p - start));
    const size_t close = config_end(p);
    const size_t paren = skip_space(close + 3);
    if (paren >= s_.size() || s_[paren] != '(')
      fail(close, "kernel launch of " + callee + ": expected `(` and the kernel's arguments after `>>>`, got `" +
                      (paren >= s_.size() ? std::string("end of file") : excerpt(paren, paren + 20)) + "`");
    // Note [launch rewrite]: the callee is already in out_ (copied verbatim since the last
    // rewrite); replace it. Its newlines move after the generated head so lines stay put.
    out_.resize(out_.size() - (p - start));
    const std::string newlines(std::count(s_.begin() + start, s_.begin() + p, '\n'), '\n');
    out_ += "::ember::sim::dropin::make_launch(::ember::sim::dropin::configure(";
    out_.append(s_.substr(p + 3, close - p - 3));
    out_ += "), \"" + callee + "\", EMBER_SIM_KERNEL_BODY(" + callee + "), EMBER_SIM_KERNEL_ADDRESS(" + callee + "))";
    out_ += newlines;
    out_.append(s_.substr(close + 3, paren - close - 3));  // comments or white space before `(`
    limit_ = paren;
    find_null_arguments(paren);
    return paren;  // the arguments are scanned as ordinary code
  }

  // Note [NULL kernel argument]: the launch keeps its arguments by value (decayed) before it
  // calls the kernel, and g++'s NULL is `__null`, an integer: stored, it is a `long` that no
  // longer converts to the kernel's pointer parameter, where nvcc converts the literal itself.
  // An argument that is exactly `NULL` is therefore written as `nullptr` (the same null pointer;
  // nvcc would also accept NULL for an integer parameter, which then fails to compile, naming
  // the line). Records the positions of such arguments in the list opened at `paren`.
  void find_null_arguments(size_t paren) {
    int depth = 0;
    size_t arg_begin = paren + 1;
    for (size_t i = paren; i < s_.size(); ++i) {
      if (!code_[i]) continue;
      const char c = s_[i];
      const bool opens = c == '(' || c == '[' || c == '{', closes = c == ')' || c == ']' || c == '}';
      if (opens) ++depth;
      if (closes) --depth;
      if ((depth == 1 && c == ',') || (depth == 0 && closes)) {
        const size_t first = skip_space(arg_begin);
        if (first + 4 <= i && word_at(first, "NULL") && skip_space(first + 4) == i)  // a nested launch may have added later ones
          null_arguments_.insert(std::lower_bound(null_arguments_.begin(), null_arguments_.end(), first), first);
        arg_begin = i + 1;
      }
      if (depth == 0 || c == ';') return;  // the list ended (or was unbalanced: the compiler says so)
    }
  }

  size_t rewrite_extern_shared(size_t at, size_t after) {
    size_t end = after;
    while (end < s_.size() && !(code_[end] && s_[end] == ';')) ++end;
    const std::string given = "`" + excerpt(at, std::min(end + 1, s_.size())) + "`";
    if (end >= s_.size()) fail(at, "expected `extern __shared__ T name[];`, got " + given + " without `;`");
    std::string decl = collapse(s_.substr(after, end - after));
    for (const char* attr : {"__align__", "alignas"}) {  // alignment: the buffer is 16-byte aligned
      for (size_t a = decl.find(attr); a != std::string::npos; a = decl.find(attr)) {
        const size_t close = decl.find(')', a);
        if (close == std::string::npos) fail(at, "expected `extern __shared__ T name[];`, got " + given);
        decl.erase(a, close + 1 - a);
      }
    }
    decl = collapse(decl);
    if (decl.size() < 3 || decl.compare(decl.size() - 2, 2, "[]") != 0)
      fail(at, "expected `extern __shared__ T name[];` (an array of unknown size), got " + given);
    decl = collapse(decl.substr(0, decl.size() - 2));
    size_t name_begin = decl.size();
    while (name_begin > 0 && is_ident_char(decl[name_begin - 1])) --name_begin;
    const std::string name = decl.substr(name_begin), type = collapse(decl.substr(0, name_begin));
    if (name.empty() || type.empty()) fail(at, "expected `extern __shared__ T name[];`, got " + given);
    const std::string pointer = "static_cast<" + type + "*>(::ember::sim::dynamic_shared_memory())";
    const std::string newlines(std::count(s_.begin() + at, s_.begin() + end, '\n'), '\n');
    const bool file_scope = std::all_of(braces_.begin(), braces_.end(), [](bool ns) { return ns; });
    if (file_scope) {
      // Note [file-scope extern __shared__]: every kernel of the file shares the array; a macro
      // reads the running block's buffer wherever the name is used (so the name must not be
      // reused for anything else in the file).
      out_ += "\n#define " + name + " (" + pointer + ")\n#line " + std::to_string(line_of(at)) + "\n" + newlines;
    } else {
      out_ += type + "* " + name + " = " + pointer + ";" + newlines;
    }
    limit_ = end + 1;
    statement_start_ = end + 1;
    return end + 1;
  }

  std::string_view s_;
  std::string file_;
  std::vector<bool> code_;
  std::string out_;
  std::vector<bool> braces_;   // open braces: true for namespace / extern "C" blocks
  size_t statement_start_ = 0;  // after the last `;`, `{` or `}`
  size_t limit_ = 0;            // backward scans stop here (the end of the last rewrite)
  std::vector<size_t> null_arguments_;  // ascending: `NULL` arguments to write as `nullptr`
};

}  // namespace

std::string rewrite_cuda(std::string_view source, std::string_view file_name) {
  return Rewriter(source, std::string(file_name)).run();
}

}  // namespace ember::simcc
