#include "apps/data_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <ostream>

#include "core/error.h"
#include "core/parallel.h"
#include "datasets/png_write.h"

namespace ember::apps {

namespace fs = std::filesystem;

std::vector<std::string> image_folder_class_names(const std::string& dataset) {
  if (dataset == "mnist") return {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  if (dataset == "fashion-mnist")
    return {"0_T-shirt_top", "1_Trouser", "2_Pullover", "3_Dress", "4_Coat",
            "5_Sandal",      "6_Shirt",   "7_Sneaker",  "8_Bag",   "9_Ankle_boot"};
  EMBER_FAIL("data image-folder: unknown dataset '", dataset, "' (expected mnist or fashion-mnist)");
}

void write_split_as_pngs(const MnistSplit& split, const std::vector<std::string>& class_names, const std::string& dir,
                         const std::string& label, std::ostream& progress) {
  const std::vector<int64_t>& dims = split.images.dims;
  EMBER_CHECK(dims.size() == 3 && split.labels.dims.size() == 1 && split.labels.dims[0] == dims[0],
              "data image-folder: expected images (N, H, W) and labels (N), got ", shape_str(dims), " and ",
              shape_str(split.labels.dims));
  const int64_t n = dims[0], height = dims[1], width = dims[2];
  for (uint8_t l : split.labels.data)
    EMBER_CHECK(l < class_names.size(), "data image-folder: label ", int(l), " has no class folder (",
                class_names.size(), " classes)");
  for (const std::string& name : class_names) fs::create_directories(fs::path(dir) / name);
  // Blocks of images written in parallel (the files do not depend on the thread count); a
  // progress line after each block.
  constexpr int64_t kBlock = 10000;
  for (int64_t first = 0; first < n; first += kBlock) {
    const int64_t last = std::min(n, first + kBlock);
    parallel_for(first, last, 256, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        Tensor image = Tensor::empty({height, width}, {.dtype = DType::u8});
        std::copy_n(split.images.data.begin() + i * height * width, height * width, image.data<uint8_t>());
        char file[32];
        std::snprintf(file, sizeof file, "%05lld.png", static_cast<long long>(i));
        write_png((fs::path(dir) / class_names[split.labels.data[size_t(i)]] / file).string(), image);
      }
    });
    progress << "data image-folder: " << label << " " << last << "/" << n << " images\n" << std::flush;
  }
}

void export_image_folder(const ImageFolderExport& options, std::ostream& progress) {
  EMBER_CHECK(!options.out.empty(), "data image-folder: expected an output folder");
  const std::vector<std::string> classes = image_folder_class_names(options.dataset);
  const std::string data = !options.data.empty() ? options.data : "data/" + options.dataset;
  for (const bool train : {true, false}) {
    const std::string split = train ? "train" : "val";
    write_split_as_pngs(load_mnist_split(data, train), classes, (fs::path(options.out) / split).string(), split,
                        progress);
  }
  progress << "data image-folder: wrote " << options.out << "/train and " << options.out << "/val\n";
}

}  // namespace ember::apps
