#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "core/error.h"
#include "datasets/data_loader.h"
#include "datasets/image_folder.h"
#include "datasets/png_write.h"
#include "idx_fixtures.h"
#include "image_fixtures.h"
#include "support/test_support.h"

using namespace ember;
using namespace ember::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// root/<class>/<file> with a PNG per listed file; pixel values encode (class, file) so a test can
// tell which file a sample came from.
void write_folder(const fs::path& root, const std::vector<std::pair<std::string, std::vector<std::string>>>& classes,
                  int64_t side = 12) {
  int seed = 0;
  for (const auto& [name, files] : classes) {
    fs::create_directories(root / name);
    for (const std::string& file : files) write_png((root / name / file).string(), patterned_image(side, side + 3, seed += 17));
  }
}

// Every batch of one epoch, as values.
std::vector<std::pair<std::vector<float>, std::vector<int64_t>>> epoch_values(DataLoader& loader) {
  std::vector<std::pair<std::vector<float>, std::vector<int64_t>>> out;
  for (auto& [x, y] : loader) out.push_back({x.to_vector<float>(), y.to_vector<int64_t>()});
  return out;
}

}  // namespace

TEST_CASE("image_folder: classes sorted by name, files sorted, only png/jpg/jpeg in any case") {
  TempDir dir("image_folder_scan");
  write_folder(dir.path, {{"b_dog", {"2.PNG", "10.jpeg", "1.png"}}, {"a_cat", {"x.Jpg"}}, {"C_upper", {"0.png"}}});
  std::ofstream(dir.path / "b_dog" / "notes.txt") << "not an image";
  fs::create_directories(dir.path / "b_dog" / "nested");
  write_png((dir.path / "b_dog" / "nested" / "deep.png").string(), patterned_image(2, 2));
  std::ofstream(dir.path / "README") << "a file at the root is not a class";

  const ImageFolder folder(dir.path.string());
  // Byte order, as Python's sorted(): upper case before lower case.
  CHECK(folder.classes() == std::vector<std::string>{"C_upper", "a_cat", "b_dog"});
  REQUIRE(folder.size() == 5);
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"C_upper/0.png", 0}, {"a_cat/x.Jpg", 1}, {"b_dog/1.png", 2}, {"b_dog/10.jpeg", 2}, {"b_dog/2.PNG", 2}};
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(folder.samples()[i].path == (dir.path / expected[i].first).string());
    CHECK(folder.samples()[i].label == expected[i].second);
  }
}

TEST_CASE("image_folder: a sample is its transformed image and its class index") {
  TempDir dir("image_folder_get");
  write_folder(dir.path, {{"a", {"0.png"}}, {"b", {"0.png", "1.png"}}});
  const ImageFolder folder(dir.path.string(), {.transform = normalize_transform({.mean = {0, 0, 0}, .std = {1, 1, 1}})});
  Generator rng(1);
  const Sample s = folder.get(2, rng);
  CHECK(s.target.dim() == 0);
  CHECK(s.target.item() == 1.0);
  CHECK(s.input.shape() == Shape{3, 12, 15});
  // The first value is pixel (0, 0)'s red channel: the third file's seed (51) over 255.
  CHECK(s.input.to_vector<float>()[0] == Approx(51 / 255.0));
  CHECK(values_of(folder.load(0)) == values_of(patterned_image(12, 15, 17)));
}

TEST_CASE("image_folder: an empty or missing root and a class without images are errors naming the path") {
  TempDir dir("image_folder_errors");
  CHECK_THROWS_WITH(ImageFolder(dir.file("missing")), Contains(dir.file("missing")) && Contains("not a directory"));
  CHECK_THROWS_WITH(ImageFolder(dir.path.string()), Contains(dir.path.string()) && Contains("no class folders"));
  write_folder(dir.path, {{"a", {"0.png"}}});
  fs::create_directories(dir.path / "b");
  std::ofstream(dir.path / "b" / "notes.txt") << "text";
  CHECK_THROWS_WITH(ImageFolder(dir.path.string()), Contains((dir.path / "b").string()) && Contains("has no .png"));
  CHECK_THROWS_WITH(parse_bad_images("ignore"), Contains("expected skip or fail, got 'ignore'"));
}

TEST_CASE("image_folder: --bad-images fail names the file, and skip reports it once and substitutes the next") {
  TempDir dir("image_folder_bad");
  write_folder(dir.path, {{"a", {"0.png", "1.png"}}, {"b", {"2.png"}}});
  write_file((dir.path / "a" / "1.png").string(), {1, 2, 3});  // a garbage file named .png
  fs::create_directory(dir.path / "b" / "3.png");               // a directory named .png
  const std::string garbage = (dir.path / "a" / "1.png").string(), folder_png = (dir.path / "b" / "3.png").string();
  Generator rng(0);

  const ImageFolder strict(dir.path.string());
  REQUIRE(strict.size() == 4);
  CHECK_THROWS_WITH(strict.get(1, rng), Contains(garbage) && Contains("not a PNG or JPEG"));
  CHECK_THROWS_WITH(strict.get(3, rng), Contains(folder_png) && Contains("not a regular file"));
  CHECK_THROWS_AS(strict.get(1, rng), Error);

  std::mutex m;
  std::vector<std::string> reports;
  const ImageFolder lenient(dir.path.string(), {.bad_images = BadImages::skip, .report = [&](const std::string& r) {
                                                  std::lock_guard lock(m);
                                                  reports.push_back(r);
                                                }});
  for (int epoch = 0; epoch < 2; ++epoch) {
    // Sample 1 (bad) is replaced by sample 2 (b/2.png, label 1); sample 3 wraps around to sample 0.
    CHECK(values_of(lenient.get(1, rng).input) == values_of(lenient.get(2, rng).input));
    CHECK(lenient.get(1, rng).target.item() == 1.0);
    CHECK(values_of(lenient.get(3, rng).input) == values_of(lenient.get(0, rng).input));
    CHECK(lenient.get(3, rng).target.item() == 0.0);
  }
  REQUIRE(reports.size() == 2);  // once per bad file, not once per read
  CHECK_THAT(reports[0], Contains(garbage));
  CHECK_THAT(reports[1], Contains(folder_png));
  CHECK(lenient.bad_count() == 2);

  // Through a loader, skip keeps every batch full.
  DataLoader loader(std::make_shared<ImageFolder>(dir.path.string(), ImageFolderOptions{.bad_images = BadImages::skip,
                                                                                        .report = [](const std::string&) {}}),
                    {.batch_size = 4, .prefetch = 2, .workers = 2});
  const auto batch = loader.next();
  REQUIRE(batch.has_value());
  CHECK(batch->inputs.shape() == Shape{4, 3, 12, 15});
}

TEST_CASE("image_folder: the loader's batches do not depend on the number of workers or prefetch") {
  TempDir dir("image_folder_workers");
  write_folder(dir.path, {{"a", {"0.png", "1.png", "2.png", "3.png"}}, {"b", {"4.png", "5.png", "6.png"}}, {"c", {"7.png", "8.png"}}}, 20);
  auto data = std::make_shared<ImageFolder>(dir.path.string(), ImageFolderOptions{.transform = train_transform({.size = 8})});
  DataLoader reference(data, {.batch_size = 2, .seed = 5, .prefetch = 0});
  DataLoader pooled(data, {.batch_size = 2, .seed = 5, .prefetch = 3, .workers = 3});
  DataLoader single(data, {.batch_size = 2, .seed = 5, .prefetch = 1, .workers = 1});
  for (int epoch = 0; epoch < 2; ++epoch) {
    const auto expected = epoch_values(reference);
    REQUIRE(expected.size() == 5);
    CHECK(expected.back().second.size() == 1);
    CHECK(epoch_values(pooled) == expected);
    CHECK(epoch_values(single) == expected);
  }
  // The augmentation differs between epochs (a new key per epoch).
  DataLoader fresh(data, {.batch_size = 9, .shuffle = false, .seed = 5});
  CHECK(epoch_values(fresh) != epoch_values(fresh));
  CHECK_THROWS_WITH(DataLoader(data, {.workers = 0}), Contains("workers must be >= 1, got 0"));
}

TEST_CASE("image_folder: a loader resumed mid-epoch gives the same augmented batches bitwise") {
  TempDir dir("image_folder_resume");
  write_folder(dir.path, {{"a", {"0.png", "1.png", "2.png"}}, {"b", {"3.png", "4.png", "5.png", "6.png"}}}, 16);
  auto data = std::make_shared<ImageFolder>(dir.path.string(), ImageFolderOptions{.transform = train_transform({.size = 6})});
  for (int workers : {1, 3}) {
    DataLoader original(data, {.batch_size = 2, .seed = 42, .prefetch = 2, .workers = workers});
    epoch_values(original);  // a full first epoch
    original.next();         // and one batch of the second
    const DataLoaderState saved = original.state();
    const auto rest = epoch_values(original);
    const auto next_epoch = epoch_values(original);

    DataLoader resumed(data, {.batch_size = 2, .seed = 7, .prefetch = 3, .workers = 4 - workers});
    resumed.set_state(saved);
    CHECK(epoch_values(resumed) == rest);
    CHECK(epoch_values(resumed) == next_epoch);
  }
}

TEST_CASE("data_loader: samples of unequal shapes in one batch are an error naming the sample") {
  TempDir dir("image_folder_shapes");
  fs::create_directories(dir.path / "a");
  write_png((dir.path / "a" / "0.png").string(), patterned_image(4, 4));
  write_png((dir.path / "a" / "1.png").string(), patterned_image(5, 4));
  DataLoader loader(std::make_shared<ImageFolder>(dir.path.string()), {.batch_size = 2, .shuffle = false, .prefetch = 0});
  CHECK_THROWS_WITH(loader.next(), Contains("sample 1") && Contains("(3, 5, 4)") && Contains("(3, 4, 4)"));
}

TEST_CASE("data_loader: sample_generator streams depend on seed, epoch and position only") {
  auto first_word = [](Generator g) { return g.block(g.reserve(1))[0]; };
  CHECK(first_word(sample_generator(1, 1, 0)) == first_word(sample_generator(1, 1, 0)));
  CHECK(first_word(sample_generator(1, 1, 0)) != first_word(sample_generator(2, 1, 0)));
  CHECK(first_word(sample_generator(1, 1, 0)) != first_word(sample_generator(1, 2, 0)));
  CHECK(first_word(sample_generator(1, 1, 0)) != first_word(sample_generator(1, 1, 1)));
}
