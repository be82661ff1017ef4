// RunLog's JSON form (apps/train/run_log.h), which checkpoints keep so that a resumed run's CSV
// and curves cover the whole run: the round trip, non-finite values, and malformed histories.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "apps/train/run_log.h"
#include "core/error.h"

using namespace ember;
using apps::EpochRecord;
using apps::RunLog;

namespace {

RunLog from_text(const std::string& text) { return RunLog::from_json(Json::parse(text), "history"); }

}  // namespace

TEST_CASE("run log: the JSON form round-trips every field, with and without a test loss") {
  RunLog log;
  log.add({.epoch = 1, .train_loss = 0.25, .test_loss = 0.125, .scores = {{"test_accuracy", 0.9}, {"top5", 0.99}},
           .seconds = 41.5, .lr = 0.064});
  log.add({.epoch = 2, .train_loss = 0.1 + 0.2, .test_loss = 1e-300, .scores = {{"test_accuracy", 1.0 / 3}, {"top5", 1}},
           .seconds = 40, .lr = 0});
  const RunLog back = RunLog::from_json(Json::parse(log.to_json().dump()), "history");
  REQUIRE(back.records().size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const EpochRecord &a = log.records()[i], &b = back.records()[i];
    CHECK(a.epoch == b.epoch);
    CHECK(a.train_loss == b.train_loss);  // exactly: the JSON keeps every bit of a double
    CHECK(a.test_loss == b.test_loss);
    CHECK(a.scores == b.scores);
    CHECK(a.seconds == b.seconds);
    CHECK(a.lr == b.lr);
  }

  RunLog metric;  // no test loss (ember train metric)
  metric.add({.epoch = 3, .train_loss = 0.5, .scores = {{"precision_at_1", 0.98}}, .seconds = 1, .lr = 1e-3});
  const RunLog metric_back = RunLog::from_json(metric.to_json(), "history");
  REQUIRE(metric_back.records().size() == 1);
  CHECK_FALSE(metric_back.records()[0].test_loss.has_value());
  CHECK(metric_back.records()[0].epoch == 3);
  CHECK(RunLog::from_json(RunLog().to_json(), "history").records().empty());
}

TEST_CASE("run log: a diverged run's NaN and infinite values survive as strings") {
  RunLog log;
  log.add({.epoch = 1, .train_loss = NAN, .test_loss = INFINITY, .scores = {{"test_accuracy", -INFINITY}}, .seconds = 2,
           .lr = 0.1});
  const std::string text = log.to_json().dump();
  CHECK_THAT(text, Catch::Contains("\"nan\"") && Catch::Contains("\"inf\"") && Catch::Contains("\"-inf\""));
  const EpochRecord r = from_text(text).records().at(0);
  CHECK(std::isnan(r.train_loss));
  CHECK(*r.test_loss == INFINITY);
  CHECK(r.scores.at(0).second == -INFINITY);
}

TEST_CASE("run log: a malformed history is an Error naming the record and the field") {
  const std::string good = R"({"epoch": 1, "train_loss": 0.5, "test_loss": 0.4, "scores": {"acc": 0.9}, "seconds": 1, "lr": 0.1})";
  CHECK(from_text("[" + good + "]").records().size() == 1);
  struct Case { std::string text, message; };
  const std::vector<Case> cases = {
      {R"({"epoch": 1})", "history: expected an array of epoch records"},
      {"[7]", "history[0]: expected an object"},
      {R"([{"train_loss": 0.5, "scores": {}, "seconds": 1, "lr": 0.1}])", "history[0]: missing the field 'epoch'"},
      {R"([{"epoch": 0, "train_loss": 0.5, "scores": {}, "seconds": 1, "lr": 0.1}])", "history[0].epoch"},
      {R"([{"epoch": 1, "train_loss": "x", "scores": {}, "seconds": 1, "lr": 0.1}])",
       "history[0].train_loss: expected a number"},
      {R"([{"epoch": 1, "train_loss": 0.5, "scores": [], "seconds": 1, "lr": 0.1}])", "history[0].scores"},
      {R"([{"epoch": 1, "train_loss": 0.5, "scores": {"acc": null}, "seconds": 1, "lr": 0.1}])",
       "history[0].scores.acc: expected a number"},
      {R"([{"epoch": 1, "train_loss": 0.5, "scores": {}, "lr": 0.1}])", "history[0]: missing the field 'seconds'"},
      {"[" + good + "," + good + "]", "history[1]: expected epoch 2 after epoch 1, got 1"},
      {"[" + good + "," + std::string(good).replace(good.find("1"), 1, "3") + "]", "history[1]: expected epoch 2 after epoch 1, got 3"},
      {R"([{"epoch": 2147483647, "train_loss": 0.5, "scores": {}, "seconds": 1, "lr": 0.1},
           {"epoch": 1, "train_loss": 0.5, "scores": {}, "seconds": 1, "lr": 0.1}])",
       "history[1]: expected epoch 2147483648 after epoch 2147483647, got 1"},
      {R"([{"epoch": 1, "train_loss": 0.5, "scores": {"a<b": 0.9}, "seconds": 1, "lr": 0.1}])",
       "history[0].scores: expected names of letters, digits and '_', got 'a<b'"},
      {R"([{"epoch": 1, "train_loss": 0.5, "scores": {"": 0.9}, "seconds": 1, "lr": 0.1}])",
       "history[0].scores: expected names of letters"},
      {"[" + good + R"(, {"epoch": 2, "train_loss": 0.5, "scores": {"acc": 0.9}, "seconds": 1, "lr": 0.1}])",
       "history[1]: expected the columns of the first record"},
      {"[" + good + R"(, {"epoch": 2, "train_loss": 0.5, "test_loss": 1, "scores": {"top5": 0.9}, "seconds": 1, "lr": 0.1}])",
       "history[1]: expected the columns of the first record"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    CHECK_THROWS_AS(from_text(c.text), Error);
    CHECK_THROWS_WITH(from_text(c.text), Catch::Contains(c.message));
  }
}

TEST_CASE("run log: records are one table, and the curves label the epochs a log holds") {
  RunLog log;
  log.add({.epoch = 6, .train_loss = 0.5, .test_loss = 0.4, .scores = {{"test_accuracy", 0.9}}});
  CHECK_THROWS_WITH(log.add({.epoch = 8, .train_loss = 0.4, .test_loss = 0.3, .scores = {{"test_accuracy", 0.9}}}),
                    Catch::Contains("RunLog::add: expected epoch 7 after epoch 6, got 8"));
  CHECK_THROWS_WITH(log.add({.epoch = 7, .train_loss = 0.4, .scores = {{"test_accuracy", 0.9}}}),
                    Catch::Contains("expected the columns of the first record"));
  CHECK_THROWS_WITH(log.add({.epoch = 7, .train_loss = 0.4, .test_loss = 0.3, .scores = {{"top5", 0.9}}}),
                    Catch::Contains("expected the columns of the first record"));
  log.add({.epoch = 7, .train_loss = 0.4, .test_loss = 0.3, .scores = {{"test_accuracy", 0.95}}});
  REQUIRE(log.records().size() == 2);
  // A run resumed from a checkpoint without a history starts after epoch 1: its axis says so.
  const std::string svg = log.svg("resumed");
  CHECK(svg.find(">6</text>") != std::string::npos);
  CHECK(svg.find(">7</text>") != std::string::npos);
  CHECK(svg.find(">1</text>") == std::string::npos);
}
