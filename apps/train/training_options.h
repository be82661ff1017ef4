// The options every `ember train` command shares (data, recipe, run control, outputs), their
// JSON in a checkpoint, and how a resumed run merges them with the command line. A command's
// config derives from TrainingOptions and adds its own fields (TrainMnistConfig: the model;
// TrainMetricConfig: the loss, embedding size and sampler).
//
//   struct MyConfig : TrainingOptions { std::string model = "mlp"; };
//   Json j = Json::object();
//   c.write_json(j);                             // the recipe, as a checkpoint stores it
//   for (auto& [key, value] : j.as_object()) c.read_json_field(key, value, "config");   // back
//   check_resume_conflicts(resumed_json, given_json, given.explicit_keys, "train mnist");
//   resumed.take_run_control(given);             // where the data lives, how long, what to write
//   c.check("train mnist");                      // errors name the command and the value
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "nn/distributed/process_group.h"

namespace ember::apps {

struct TrainingOptions {
  std::string data = "data/mnist";
  std::string dataset = "mnist";   // mnist | fashion-mnist (the same IDX layout)
  int epochs = 5;                  // with --resume: 0 keeps the checkpoint's value
  int64_t batch_size = 64;         // per rank under mpirun (Note [Batch size across rank counts])
  int ranks = 1;                   // the ranks the recipe trains on: batch_size * ranks is the global batch
  double lr = 0.05;
  double momentum = 0.9;           // SGD only
  std::string optimizer = "sgd";   // sgd | adam | adamw
  double weight_decay = 0.0;
  std::string schedule = "cosine"; // cosine (per step, to 0 at the last step) | none
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string save;                // checkpoint written after every epoch
  std::string resume;              // checkpoint to continue from
  std::string log;                 // CSV, one row per epoch
  std::string plot;                // SVG of the curves
  int64_t max_batches = 0;         // > 0: stop each epoch after this many batches (--dry-run)
  int stop_after = 0;              // > 0: stop after this many epochs of the run (resume later)
  bool detect_anomaly = false;     // anomaly mode in every training step (Note [--detect-anomaly])
  std::string precision = "fp32";  // fp32 | bf16 | fp16 (Note [Mixed-precision steps] in training_loop.h)
  // The ranks of a data-parallel job (Note [Training under mpirun], data_parallel.h); null: one
  // process. Not part of the recipe: `ember` sets it from the MPI environment.
  std::shared_ptr<distributed::ProcessGroup> group;
  // The recipe keys (as in write_json: "lr", "batch_size", "model", ...) the command line set
  // explicitly; with --resume, each must agree with the checkpoint (check_resume_conflicts).
  std::vector<std::string> explicit_keys;

  // The recipe fields (not the run control or outputs) into a checkpoint's config object.
  void write_json(Json& object) const;
  // Reads one field written by write_json; false when `key` is not one of them. A value of the
  // wrong kind is an Error naming `where` and the key (ranges are check()'s).
  bool read_json_field(const std::string& key, const Json& value, const std::string& where);
  // A resumed run takes its recipe from the checkpoint; where the data lives, how long to train
  // (epochs <= 0 keeps the checkpoint's) and what to write come from the command line.
  void take_run_control(const TrainingOptions& given);
  // Note [Batch size across rank counts]: --batch-size is per rank, as in PyTorch, and the recipe
  // records the rank count, so the global batch is batch_size * ranks. A run at another rank
  // count than its recipe's (a checkpoint resumed alone, or by more ranks) keeps the global
  // batch, and with it the learning-rate recipe: each rank takes global / world_size, an Error
  // when that does not divide. Returns a line saying so, or "" when nothing changed.
  std::string fit_to_ranks(int world_size, const std::string& command);
  int64_t global_batch() const { return batch_size * ranks; }
  // Dataset, epochs, batch size, lr, momentum, weight decay, optimizer and schedule; errors
  // start with `command`.
  void check(const std::string& command) const;
  // --save, --log and --plot can be written (core/atomic_file.h), checked before any work.
  void check_outputs(const std::string& command) const;
};

// Note [Resume conflicts]: a resumed run trains the checkpoint's recipe. A recipe flag given
// explicitly on the command line that differs from the checkpoint's value is an Error listing
// every conflict (flag, given value, checkpoint value), rather than being silently ignored or
// silently winning: either would train something other than what one of the two sources says.
// Run control (--data, --epochs, --stop-after, outputs) comes from the command line as before.
void check_resume_conflicts(const Json& checkpoint_recipe, const Json& given_recipe,
                            const std::vector<std::string>& explicit_keys, const std::string& command);

}  // namespace ember::apps
