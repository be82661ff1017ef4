// RunLog (run_log.h): the per-epoch CSV and an SVG of the curves, written by hand.
#include "apps/train/run_log.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_fields.h"

namespace ember::apps {
namespace {

void write_text(const std::string& path, const std::string& text) {
  AtomicFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A CSV column name as a label: "test_accuracy" -> "test accuracy".
std::string display_name(std::string name) {
  std::replace(name.begin(), name.end(), '_', ' ');
  return name;
}

// One panel: a polyline per series over epochs, with axes, ticks and a legend.
struct Series {
  std::string name, colour;
  std::vector<double> values;
};

void panel(std::ostringstream& os, double x0, double y0, double w, double h, const std::string& title,
           const std::vector<Series>& series, int first_epoch, int epochs, bool percent) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& s : series)
    for (double v : s.values)
      if (std::isfinite(v)) { lo = std::min(lo, v); hi = std::max(hi, v); }
  if (!std::isfinite(lo)) { lo = 0; hi = 1; }
  if (hi - lo < 1e-12) { lo -= 0.5; hi += 0.5; }
  const double pad = (hi - lo) * 0.08;
  lo = lo >= 0 ? std::max(0.0, lo - pad) : lo - pad;  // losses and accuracies never go below 0
  hi += pad;
  auto X = [&](double e) { return x0 + w * (epochs > 1 ? (e - 1) / double(epochs - 1) : 0.5); };
  auto Y = [&](double v) { return y0 + h - h * (v - lo) / (hi - lo); };
  os << "<text x='" << x0 + w / 2 << "' y='" << y0 - 10 << "' text-anchor='middle' font-size='14'>" << title << "</text>\n";
  os << "<rect x='" << x0 << "' y='" << y0 << "' width='" << w << "' height='" << h
     << "' fill='none' stroke='#888'/>\n";
  for (int t = 0; t <= 4; ++t) {
    const double v = lo + (hi - lo) * t / 4.0;
    char label[32];
    std::snprintf(label, sizeof label, percent ? "%.2f%%" : "%.4f", percent ? 100 * v : v);
    os << "<line x1='" << x0 << "' x2='" << x0 + w << "' y1='" << Y(v) << "' y2='" << Y(v)
       << "' stroke='#eee'/>\n<text x='" << x0 - 6 << "' y='" << Y(v) + 4 << "' text-anchor='end' font-size='10'>"
       << label << "</text>\n";
  }
  // The i-th record is labelled with its epoch, first_epoch + i - 1 (a run resumed from a
  // checkpoint without a history starts after 1).
  for (int i = 1; i <= epochs; ++i)
    if (epochs <= 12 || i % ((epochs + 11) / 12) == 0 || i == 1)
      os << "<text x='" << X(i) << "' y='" << y0 + h + 14 << "' text-anchor='middle' font-size='10'>"
         << int64_t(first_epoch) + i - 1 << "</text>\n";
  os << "<text x='" << x0 + w / 2 << "' y='" << y0 + h + 30 << "' text-anchor='middle' font-size='11'>epoch</text>\n";
  int legend = 0;
  for (const auto& s : series) {
    os << "<polyline fill='none' stroke='" << s.colour << "' stroke-width='2' points='";
    for (size_t i = 0; i < s.values.size(); ++i) os << X(double(i + 1)) << "," << Y(s.values[i]) << " ";
    os << "'/>\n";
    for (size_t i = 0; i < s.values.size(); ++i)
      os << "<circle cx='" << X(double(i + 1)) << "' cy='" << Y(s.values[i]) << "' r='3' fill='" << s.colour << "'/>\n";
    os << "<text x='" << x0 + 10 << "' y='" << y0 + 16 + 14 * legend++ << "' font-size='11' fill='" << s.colour << "'>"
       << s.name << "</text>\n";
  }
}

}  // namespace

void RunLog::write_csv(const std::string& path) const {
  std::ostringstream os;
  const bool with_test_loss = !records_.empty() && records_[0].test_loss.has_value();
  os << "epoch,train_loss" << (with_test_loss ? ",test_loss" : "");
  if (!records_.empty())
    for (const auto& [name, value] : records_[0].scores) os << "," << name;
  os << ",seconds,lr\n";
  for (const auto& r : records_) {
    char field[64];
    std::snprintf(field, sizeof field, "%d,%.6f", r.epoch, r.train_loss);
    os << field;
    if (with_test_loss) {
      std::snprintf(field, sizeof field, ",%.6f", r.test_loss.value_or(NAN));
      os << field;
    }
    for (const auto& [name, value] : r.scores) {
      std::snprintf(field, sizeof field, ",%.6f", value);
      os << field;
    }
    std::snprintf(field, sizeof field, ",%.3f,%.6g\n", r.seconds, r.lr);
    os << field;
  }
  write_text(path, os.str());
}

std::string RunLog::svg(const std::string& title) const {
  static const char* const colours[] = {"#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"};
  std::ostringstream os;
  const int epochs = int(records_.size()), first_epoch = records_.empty() ? 1 : records_.front().epoch;
  Series train{"train loss", "#d62728", {}}, test{"test loss", "#1f77b4", {}};
  std::vector<Series> scores;
  if (!records_.empty())
    for (const auto& [name, value] : records_[0].scores)
      scores.push_back({display_name(name), colours[scores.size() % std::size(colours)], {}});
  for (const auto& r : records_) {
    train.values.push_back(r.train_loss);
    if (r.test_loss) test.values.push_back(*r.test_loss);
    for (size_t i = 0; i < scores.size() && i < r.scores.size(); ++i) scores[i].values.push_back(r.scores[i].second);
  }
  std::vector<Series> losses{train};
  if (!test.values.empty()) losses.push_back(test);
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='900' height='380' font-family='sans-serif'>\n"
     << "<rect width='100%' height='100%' fill='white'/>\n"
     << "<text x='450' y='22' text-anchor='middle' font-size='16'>" << escape_xml(title) << "</text>\n";
  panel(os, 70, 60, 340, 260, "loss", losses, first_epoch, epochs, false);
  panel(os, 520, 60, 340, 260, scores.size() == 1 ? scores[0].name : "test scores", scores, first_epoch, epochs,
        true);
  os << "</svg>\n";
  return os.str();
}

void RunLog::write_svg(const std::string& path, const std::string& title) const { write_text(path, svg(title)); }

namespace {

Json number_to_json(double v) {
  if (std::isfinite(v)) return Json(v);
  return Json(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

double number_from_json(const Json& value, const std::string& field) {
  if (value.is_string()) {
    const std::string& s = value.as_string();
    if (s == "nan") return NAN;
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  EMBER_CHECK(value.is_number(), field, ": expected a number (or \"nan\", \"inf\", \"-inf\"), got ", value.dump());
  return value.as_double();
}

}  // namespace

std::string RunLog::mismatch(const EpochRecord& r) const {
  if (records_.empty()) return "";
  const EpochRecord &first = records_.front(), &last = records_.back();
  const int64_t next = int64_t(last.epoch) + 1;  // int64: the last epoch may be INT_MAX
  if (r.epoch != next)
    return "expected epoch " + std::to_string(next) + " after epoch " + std::to_string(last.epoch) +
           ", got " + std::to_string(r.epoch);
  const bool same_columns = r.test_loss.has_value() == first.test_loss.has_value() &&
                            std::equal(r.scores.begin(), r.scores.end(), first.scores.begin(), first.scores.end(),
                                       [](const auto& a, const auto& b) { return a.first == b.first; });
  return same_columns ? "" : "expected the columns of the first record (test loss and scores)";
}

void RunLog::add(const EpochRecord& r) {
  const std::string why = mismatch(r);
  EMBER_CHECK(why.empty(), "RunLog::add: ", why);
  records_.push_back(r);
}

Json RunLog::to_json() const {
  Json history = Json::array();
  for (const EpochRecord& r : records_) {
    Json record = Json::object();
    record.set("epoch", Json(r.epoch));
    record.set("train_loss", number_to_json(r.train_loss));
    if (r.test_loss) record.set("test_loss", number_to_json(*r.test_loss));
    Json scores = Json::object();
    for (const auto& [name, value] : r.scores) scores.set(name, number_to_json(value));
    record.set("scores", std::move(scores));
    record.set("seconds", number_to_json(r.seconds));
    record.set("lr", number_to_json(r.lr));
    history.push_back(std::move(record));
  }
  return history;
}

RunLog RunLog::from_json(const Json& history, const std::string& where) {
  EMBER_CHECK(history.is_array(), where, ": expected an array of epoch records, got ", history.dump());
  RunLog log;
  for (size_t i = 0; i < history.size(); ++i) {
    const Json& entry = history.as_array()[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    EpochRecord r;
    r.epoch = int(json_int(json_field(entry, "epoch", at), at + ".epoch", 1, std::numeric_limits<int>::max()));
    r.train_loss = number_from_json(json_field(entry, "train_loss", at), at + ".train_loss");
    if (const Json* test_loss = entry.find("test_loss")) r.test_loss = number_from_json(*test_loss, at + ".test_loss");
    for (const auto& [name, value] : json_object(json_field(entry, "scores", at), at + ".scores")) {
      // A column name of the CSV and a label of the SVG, as the apps name them.
      EMBER_CHECK(!name.empty() && std::all_of(name.begin(), name.end(),
                                               [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; }),
                  at, ".scores: expected names of letters, digits and '_', got '", name, "'");
      r.scores.emplace_back(name, number_from_json(value, at + ".scores." + name));
    }
    r.seconds = number_from_json(json_field(entry, "seconds", at), at + ".seconds");
    r.lr = number_from_json(json_field(entry, "lr", at), at + ".lr");
    const std::string why = log.mismatch(r);
    EMBER_CHECK(why.empty(), at, ": ", why);
    log.records_.push_back(std::move(r));
  }
  return log;
}

}  // namespace ember::apps
