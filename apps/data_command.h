// `ember data image-folder`: writes MNIST or Fashion-MNIST (the IDX files) as PNG image folders,
// so the image-folder path (datasets/image_folder.h) runs end to end on real data.
//
//   ember data image-folder --dataset fashion-mnist --data data/fashion-mnist out/fmnist
//   // out/fmnist/train/<class>/<index>.png (60000) and out/fmnist/val/<class>/<index>.png (10000)
//
// Class folders: MNIST's are the digits "0".."9"; Fashion-MNIST's are "<label>_<name>"
// ("0_T-shirt_top", "1_Trouser", ..., "9_Ankle_boot": torchvision's class names with "/" and
// spaces replaced), so that sorting the folder names, as ImageFolder does, gives back the IDX
// label order. Files are named by their position in the IDX file, zero-padded to 5 digits, so
// sorted names keep the IDX order within a class. Pixels are written as 8-bit gray PNGs
// (ImageFolder reads them as RGB with R = G = B). Existing files are overwritten.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "datasets/mnist.h"

namespace ember::apps {

struct ImageFolderExport {
  std::string dataset = "mnist";  // mnist | fashion-mnist
  std::string data;               // the IDX folder; empty: data/mnist or data/fashion-mnist
  std::string out;
};

// The class folder names of `dataset`, in label order.
std::vector<std::string> image_folder_class_names(const std::string& dataset);

// Writes `split` as dir/<class>/<index>.png; `label` names it in the progress lines.
void write_split_as_pngs(const MnistSplit& split, const std::vector<std::string>& class_names, const std::string& dir,
                         const std::string& label, std::ostream& progress);

// Both splits: out/train and out/val; progress lines go to `progress`.
void export_image_folder(const ImageFolderExport& options, std::ostream& progress);

}  // namespace ember::apps
